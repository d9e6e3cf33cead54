"""Relevance judgments (qrels): read from a qrels file, or made from a dataset's gold documents.

Every dataset yields qrels. Datasets with gold documents (LiveRAG's DataMorgana documents, SQuAD's paragraph,
HotpotQA's supporting facts, MuSiQue's supporting paragraphs) give binary qrels, grade 1 per gold document
(`Question.relevance`); a collection with a qrels file (BEIR, TREC, ir_datasets) gives graded ones, 0 meaning
judged not relevant.

The level says what a judgment names. `document`: a corpus record's id; a ranked list of passages is read as a
ranking of documents, each at the rank of its best passage (a document counts as found when any of its passages
is, as the gold-document recall does). `passage`: a passage id, for collections whose qrels judge the retrieved
units themselves (TREC RAG's MS MARCO v2.1 segments, kept whole by `corpus.chunk_words: null`, so that a passage id
is the segment id).

Formats read: TREC (`qid iter docid grade`, whitespace-separated) and BEIR's TSV (`query-id corpus-id score`,
with its header line); `format: auto` tells them apart by their column count.
"""

from __future__ import annotations

import logging
from pathlib import Path

from rag.core.errors import ConfigError, DataError
from rag.core.io import open_text
from rag.data.paths import resolve_data_file

log = logging.getLogger(__name__)

#: what a judgment names: a corpus document or a retrieved passage
LEVELS = ("document", "passage")
FORMATS = ("auto", "trec", "tsv")

#: qid -> id -> grade
Qrels = dict[str, dict[str, int]]


def check_level(level: str, setting: str = "dataset.qrels.level") -> str:
    if level not in LEVELS:
        raise ConfigError(f"{setting}={level!r}: one of {', '.join(LEVELS)}")
    return level


class QrelsSource:
    """Where a dataset's judgments come from; `load` returns qid -> id -> grade."""

    def __init__(self, level: str = "document"):
        self.level = check_level(level)

    def load(self) -> Qrels:
        raise NotImplementedError


class QrelsFile(QrelsSource):
    """A qrels file in TREC (`qid 0 docid grade`) or BEIR TSV (`query-id corpus-id score`) form, gzip allowed."""

    def __init__(self, path: str, data_dir: str | None = None, format: str = "auto", level: str = "document"):
        super().__init__(level)
        if format not in FORMATS:
            raise ConfigError(f"dataset.qrels.format={format!r}: one of {', '.join(FORMATS)}")
        self.path, self.data_dir, self.format = path, data_dir, format

    def file(self) -> Path:
        return resolve_data_file(self.path, self.data_dir, "qrels")

    def load(self) -> Qrels:
        file = self.file()
        out: Qrels = {}
        with open_text(file) as handle:
            for line_no, line in enumerate(handle, start=1):
                parts = line.split()
                if not parts:
                    continue
                if line_no == 1 and parts[:2] == ["query-id", "corpus-id"]:  # BEIR's header
                    continue
                qid, doc_id, grade = self._fields(parts, f"{file}:{line_no}")
                out.setdefault(qid, {})[doc_id] = grade
        if not out:
            raise DataError(f"{file}: no judgments")
        return out

    def _fields(self, parts: list[str], where: str) -> tuple[str, str, int]:
        width = {"trec": 4, "tsv": 3}.get(self.format) or (4 if len(parts) == 4 else 3)
        if len(parts) != width:
            shape = "qid iter docid grade" if width == 4 else "query-id corpus-id score"
            raise DataError(f"{where}: expected {width} columns ({shape}), got {len(parts)}")
        qid, doc_id, grade = (parts[0], parts[2], parts[3]) if width == 4 else (parts[0], parts[1], parts[2])
        try:
            value = float(grade)
        except ValueError:
            raise DataError(f"{where}: relevance grade {grade!r} is not a number") from None
        if value != int(value):
            raise DataError(f"{where}: relevance grade {grade!r} is not a whole number")
        return qid, doc_id, int(value)
