"""IR collections as datasets: BEIR folders, TREC topics, and whatever ir_datasets has on this machine.

- BEIR (`conf/dataset/beir.yaml`, `dataset.path=<folder>`): `queries.jsonl` (`{_id, text}`, `BeirQueries`),
  `corpus.jsonl` (`{_id, title, text}`, read by `JsonlCorpus`) and `qrels/<split>.tsv` (`rag.data.qrels`).
- TREC (`conf/dataset/trec.yaml`): topics in the TREC RAG shapes (`TrecTopics`: 2024's TSV `qid<TAB>query`, 2025's
  JSONL `{"id", "title"}` whose title is the narrative, 2026's `trec_rag_2026_queries.tsv`, `topic_id<TAB>narrative`),
  TREC qrels, and a JSONL corpus such as MS MARCO v2.1's segments (`docid`, `segment`, `title`), kept whole so that
  passage ids are segment ids, or ClimbMix-400b's documents (`docid` such as `shard_00459_61697`, `contents`).
- ir_datasets (`conf/dataset/ir_datasets.yaml`, `dataset.id=<id>`): queries, documents and qrels through
  ir_datasets' own readers (`IrDatasetsQueries`, `IrDatasetsCorpus`, `IrDatasetsQrels`). It reads what it has
  locally and downloads only what is missing (this project never asks it to); `dataset.imports` names modules
  that register further ids (ir_datasets extension packages, or your own `ir_datasets.registry.register` of a
  collection `ir_datasets.create_dataset` builds from local files).

Questions of these collections have no gold answers: retrieval measures score them against the qrels, and the
nugget judges (and `eval.pool`'s UMBRELA grades) judge their answers, as TREC judges its topics.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

from rag.core.errors import ConfigError, DataError, MissingDataError
from rag.core.io import iter_jsonl_numbered, open_text
from rag.data.corpus import Corpus, file_sha256
from rag.data.qrels import Qrels, QrelsSource
from rag.data.questions import QuestionLoader
from rag.records import Question

log = logging.getLogger(__name__)

#: fields a topic's text may be under (TREC RAG 2025 puts the narrative in `title`), first found wins
TOPIC_TEXT_FIELDS = ("title", "narrative", "query", "text", "question")


class BeirQueries(QuestionLoader):
    """BEIR's `queries.jsonl`: `{"_id", "text", "metadata"}` per line."""

    has_answers = False

    def load(self) -> list[Question]:
        file = self.file()
        out: list[Question] = []
        for line_no, row in iter_jsonl_numbered(file):
            if "_id" not in row or "text" not in row:
                raise DataError(f"{file}:{line_no}: a BEIR query needs '_id' and 'text'")
            self._check(Question(id=str(row["_id"]), question=str(row["text"] or "").strip()), f"{file}:{line_no}",
                        out)
        return out


class TrecTopics(QuestionLoader):
    """TREC topics: JSONL (`.jsonl`/`.json`, gzip allowed; TREC RAG 2025's `{"id", "title"}`) or TSV (TREC RAG
    2024's `qid<TAB>query` and 2026's `trec_rag_2026_queries.tsv`, `topic_id<TAB>narrative` with no header; any
    other suffix). `text_field` names the topic text's field in JSONL (default: the first of title, narrative,
    query, text, question). Ids are kept as written (`rag2026-37`); texts lose only surrounding whitespace, as
    the 2026 organizers' own validator reads them (their checker wants the narrative copied exactly)."""

    has_answers = False

    def __init__(self, path: str, data_dir: str | None = None, skip_invalid: bool = False,
                 text_field: str | None = None):
        super().__init__(path, data_dir, skip_invalid)
        self.text_field = text_field

    def load(self) -> list[Question]:
        file = self.file()
        jsonl = any(s in (".jsonl", ".json") for s in file.suffixes)
        out: list[Question] = []
        for where, qid, text in (self._jsonl(file) if jsonl else self._tsv(file)):
            self._check(Question(id=qid, question=text), where, out)
        return out

    def _jsonl(self, file: Path) -> Iterator[tuple[str, str, str]]:
        for line_no, row in iter_jsonl_numbered(file):
            where = f"{file}:{line_no}"
            fields = [self.text_field] if self.text_field else [f for f in TOPIC_TEXT_FIELDS if f in row]
            qid = row.get("id", row.get("qid", row.get("topic_id")))
            if qid is None or not fields or fields[0] not in row:
                raise DataError(f"{where}: a topic needs 'id' and its text "
                                f"({self.text_field or ' or '.join(TOPIC_TEXT_FIELDS)})")
            yield where, str(qid), str(row[fields[0]] or "").strip()

    @staticmethod
    def _tsv(file: Path) -> Iterator[tuple[str, str, str]]:
        with open_text(file) as handle:
            for line_no, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                parts = line.rstrip("\n").split("\t")
                if len(parts) != 2:
                    raise DataError(f"{file}:{line_no}: expected 2 tab-separated columns (qid, query), "
                                    f"got {len(parts)}")
                yield f"{file}:{line_no}", parts[0].strip(), parts[1].strip()


# -- ir_datasets ----------------------------------------------------------------------------------------------
def load_ir_dataset(dataset_id: str) -> Any:
    """`ir_datasets.load(dataset_id)`, an unknown id one clear error."""
    import ir_datasets

    try:
        return ir_datasets.load(dataset_id)
    except KeyError:
        raise ConfigError(f"dataset.id={dataset_id!r}: ir_datasets knows no such dataset (a collection of your "
                          f"own: register it in a module named in dataset.imports)") from None


def _entities(dataset: Any, kind: str, dataset_id: str) -> Iterator[Any]:
    """Queries, docs or qrels of an ir_datasets dataset; a file it would have to download is a MissingDataError."""
    if not dataset.has(kind):
        raise ConfigError(f"dataset.id={dataset_id!r}: ir_datasets has no {kind} for it")
    try:
        yield from getattr(dataset, f"{kind}_iter")()
    except (OSError, ConnectionError) as err:
        raise MissingDataError(f"ir_datasets {dataset_id!r}: its {kind} are not on this machine and could not be "
                               f"fetched ({type(err).__name__}: {err}); put them under IR_DATASETS_HOME "
                               f"first") from None


class IrDatasetsQueries(QuestionLoader):
    """The queries of an ir_datasets dataset, each by its `default_text()` (ir_datasets' own choice of field)."""

    has_answers = False

    def __init__(self, id: str, skip_invalid: bool = False):  # noqa: A002 - ir_datasets' word
        super().__init__(path=f"ir_datasets:{id}", data_dir=None, skip_invalid=skip_invalid)
        self.id = id

    def load(self) -> list[Question]:
        out: list[Question] = []
        for index, query in enumerate(_entities(load_ir_dataset(self.id), "queries", self.id)):
            text = query.default_text() if hasattr(query, "default_text") else getattr(query, "text", "")
            self._check(Question(id=str(query.query_id), question=str(text).strip()),
                        f"ir_datasets {self.id}: query {index}", out)
        return out


class IrDatasetsCorpus(Corpus):
    """The documents of an ir_datasets dataset (`default_text()`, `title` when it has one), chunked like any corpus.

    Its key names the content: the sha256 of the documents' source file (or of every file of a source folder),
    remembered like any corpus file's; a source ir_datasets does not expose is hashed from the documents."""

    def __init__(self, id: str, chunk_words: int | None = 512, overlap_words: int = 0,  # noqa: A002
                 name: str | None = None, hash_cache_dir: str | None = None):
        super().__init__(path=f"ir_datasets:{id}", data_dir=None, chunk_words=chunk_words,
                         overlap_words=overlap_words, name=name or id.replace("/", "-"), hash_cache_dir=hash_cache_dir)
        self.id = id

    def file(self) -> Path:
        """The documents' source on this machine (file or folder), for messages and the content hash."""
        source = self._source()
        return source if source is not None else Path(self.path)

    def _source(self) -> Path | None:
        handler = load_ir_dataset(self.id).docs_handler()
        try:
            return Path(handler.docs_path(force=True)) if hasattr(handler, "docs_path") else None
        except (OSError, ConnectionError, NotImplementedError):
            return None

    @cached_property
    def content_hash(self) -> str:
        source = self._source()
        if source is not None and source.is_file():
            return file_sha256(source, self.hash_cache_dir)
        digest = hashlib.sha256()
        if source is not None and source.is_dir():
            for part in sorted(p for p in source.rglob("*") if p.is_file()):
                digest.update(f"{part.relative_to(source)}\0{file_sha256(part, self.hash_cache_dir)}\n".encode())
            return digest.hexdigest()
        for doc_id, title, text in self.documents():
            digest.update(f"{doc_id}\0{title}\0{text}\n".encode())
        return digest.hexdigest()

    def documents(self) -> Iterator[tuple[str, str, str]]:
        for doc in _entities(load_ir_dataset(self.id), "docs", self.id):
            text = doc.default_text() if hasattr(doc, "default_text") else getattr(doc, "text", "")
            yield str(doc.doc_id), str(getattr(doc, "title", "") or ""), str(text or "")


class IrDatasetsQrels(QrelsSource):
    """The qrels of an ir_datasets dataset (its `relevance` grades; ids at the documents' level)."""

    def __init__(self, id: str, level: str = "document"):  # noqa: A002
        super().__init__(level)
        self.id = id

    def load(self) -> Qrels:
        out: Qrels = {}
        for qrel in _entities(load_ir_dataset(self.id), "qrels", self.id):
            out.setdefault(str(qrel.query_id), {})[str(qrel.doc_id)] = int(qrel.relevance)
        if not out:
            raise DataError(f"ir_datasets {self.id!r}: no qrels")
        return out
