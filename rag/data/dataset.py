"""A dataset: a question loader plus the corpus its questions are answered from, and its relevance judgments.

Judgments come from the questions' gold documents (binary), or from a qrels file (`qrels`, graded), which then
also names each question's gold documents (those graded at least `min_relevance`). A collection read from a
folder or an id (BEIR, TREC, ir_datasets) names it in `path`, `split` or `id`, which its loaders' settings read
by interpolation (`${..path}/queries.jsonl`); `imports` are modules imported first (ir_datasets extensions, or a
module registering a collection of your own). `hop` keeps only single-hop or only multi-hop questions (LiveRAG's
two-document questions: `dataset.hop=multi`), before `offset` and `limit` cut the list.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from functools import cached_property

from rag.core.errors import ConfigError, DataError
from rag.core.hashing import stable_hash
from rag.data.corpus import Corpus
from rag.data.qrels import QrelsSource
from rag.data.questions import QuestionLoader
from rag.records import Question

#: what becomes of questions that the qrels do not judge: `keep` them (TREC topics not yet judged still get
#: answers, judged by the nugget judges), or `drop` them (BEIR evaluates the queries of its split's qrels)
UNJUDGED = ("keep", "drop")
#: what `dataset.hop` may keep (each question's `hop`, from its loader: gold documents or the file's own label)
HOPS = ("single", "multi")

log = logging.getLogger(__name__)


class Dataset:
    def __init__(self, name: str, questions: QuestionLoader, corpus: Corpus, limit: int | None = None,
                 offset: int = 0, qrels: QrelsSource | None = None, unjudged: str = "keep", min_relevance: int = 1,
                 path: str | None = None, split: str | None = None, id: str | None = None,  # noqa: A002
                 imports: Sequence[str] = (), hop: str | None = None):
        for module in imports or ():  # e.g. an ir_datasets extension, or a module registering a local collection
            try:
                importlib.import_module(str(module))
            except ImportError as err:
                raise ConfigError(f"dataset.imports: cannot import {module!r} ({err})") from None
        if unjudged not in UNJUDGED:
            raise ValueError(f"dataset.unjudged must be one of {', '.join(UNJUDGED)}, got {unjudged!r}")
        if limit is not None and limit < 1:
            raise ValueError(f"dataset.limit must be a positive integer or null, got {limit}")
        if offset < 0:
            raise ValueError(f"dataset.offset must be 0 or a positive integer, got {offset}")
        if hop is not None and hop not in HOPS:
            raise ValueError(f"dataset.hop must be one of {', '.join(HOPS)} or null, got {hop!r}")
        self.name = name
        self.loader = questions
        self.corpus = corpus
        self.limit = limit
        #: questions skipped at the start of the file, so a long benchmark can run in slices that add up
        self.offset = offset
        #: only single-hop or only multi-hop questions (None: all)
        self.hop = hop
        self.qrels, self.unjudged, self.min_relevance = qrels, unjudged, min_relevance
        #: the collection's folder, split and ir_datasets id, where the dataset is read from one (BEIR, TREC)
        self.path, self.split, self.id = path, split, id

    @property
    def qrels_level(self) -> str:
        """What the judgments name: `document` (gold documents, most qrels files) or `passage`."""
        return self.qrels.level if self.qrels is not None else "document"

    @cached_property
    def questions(self) -> list[Question]:
        """`limit` questions in file order after the first `offset` (all of them by default), of one `hop` kind
        when set."""
        questions = self._judged(self.loader.load_some())
        if self.hop is not None:
            kept = [q for q in questions if q.hop == self.hop]
            if not kept:
                raise ConfigError(f"dataset {self.name}: dataset.hop={self.hop} keeps none of the "
                                  f"{len(questions)} questions of {self.loader.path}")
            questions = kept
        ids = [q.id for q in questions]
        if len(set(ids)) != len(ids):
            dupes = sorted({i for i in ids if ids.count(i) > 1})[:5]
            where = getattr(self.loader, "path", None) or self.name
            raise DataError(f"{where}: duplicate question ids {dupes} (dataset.questions.path of dataset "
                            f"{self.name}; each question needs its own id)")
        if self.offset >= len(questions):
            kind = f"{self.hop}-hop " if self.hop else ""
            raise ConfigError(f"dataset {self.name}: dataset.offset={self.offset} skips all {len(questions)} "
                              f"{kind}questions of {self.loader.path}")
        end = self.offset + self.limit if self.limit else None
        return questions[self.offset:end]

    def _judged(self, questions: list[Question]) -> list[Question]:
        """Questions with their qrels attached (when the dataset has a qrels file), unjudged ones kept or dropped."""
        if self.qrels is None:
            return questions
        qrels = self.qrels.load()
        out = []
        for q in questions:
            judged = qrels.get(q.id)
            if judged:
                q.qrels = dict(judged)
                q.gold_doc_ids = [d for d, grade in judged.items() if grade >= self.min_relevance]
            if judged or self.unjudged == "keep":
                out.append(q)
        dropped = len(questions) - len(out)
        if dropped:  # BEIR evaluates the queries its split's qrels judge: the others are left out, said with a count
            log.info("dataset %s: %d of %d question(s) have no judgment in the qrels and are left out "
                     "(dataset.unjudged=drop; keep runs them unjudged), e.g. %s", self.name, dropped,
                     len(questions), next(q.id for q in questions if not qrels.get(q.id)))
        unknown = len(set(qrels) - {q.id for q in questions})
        if unknown:
            log.warning("dataset %s: %d judged question id(s) are not among the questions (e.g. %s)", self.name,
                        unknown, sorted(set(qrels) - {q.id for q in questions})[0])
        if not out:
            raise DataError(f"dataset {self.name}: no question is judged by its qrels (do the question ids "
                            f"and the qrels' ids differ?)")
        return out

    @property
    def key(self) -> str:
        """Names the question set in cache files: dataset, size and a hash of ids and texts."""
        digest = stable_hash([(q.id, q.question) for q in self.questions], length=10)
        return f"{self.name}-q{len(self.questions)}-{digest}"

    def gold_coverage(self) -> dict[str, int]:
        """Count gold documents that the corpus lacks: those questions can never reach full recall."""
        corpus_ids = self.corpus.doc_ids
        missing = [(q.id, d) for q in self.questions for d in q.gold_doc_ids if d not in corpus_ids]
        if missing:
            log.warning("dataset %s: %d gold document(s) are not in corpus %s (e.g. question %s, doc %s); "
                        "their recall counts as a miss", self.name, len(missing), self.corpus.name,
                        missing[0][0], missing[0][1])
        total = sum(len(q.gold_doc_ids) for q in self.questions)
        return {"gold_docs": total, "gold_docs_missing_from_corpus": len(missing)}
