"""A dataset: a question loader plus the corpus its questions are answered from."""

from __future__ import annotations

import logging
from functools import cached_property

from rag.core.errors import DataError
from rag.core.hashing import stable_hash
from rag.data.corpus import Corpus
from rag.data.questions import QuestionLoader
from rag.records import Question

log = logging.getLogger(__name__)


class Dataset:
    def __init__(self, name: str, questions: QuestionLoader, corpus: Corpus, limit: int | None = None,
                 offset: int = 0):
        if limit is not None and limit < 1:
            raise ValueError(f"dataset.limit must be a positive integer or null, got {limit}")
        if offset < 0:
            raise ValueError(f"dataset.offset must be 0 or a positive integer, got {offset}")
        self.name = name
        self.loader = questions
        self.corpus = corpus
        self.limit = limit
        #: questions skipped at the start of the file, so a long benchmark can run in slices that add up
        self.offset = offset

    @cached_property
    def questions(self) -> list[Question]:
        """`limit` questions in file order after the first `offset` (all of them by default)."""
        questions = self.loader.load()
        ids = [q.id for q in questions]
        if len(set(ids)) != len(ids):
            dupes = sorted({i for i in ids if ids.count(i) > 1})[:5]
            where = getattr(self.loader, "path", None) or self.name
            raise DataError(f"{where}: duplicate question ids {dupes} (dataset.questions.path of dataset "
                            f"{self.name}; each question needs its own id)")
        if self.offset >= len(questions):
            raise ValueError(f"dataset {self.name}: dataset.offset={self.offset} skips all {len(questions)} "
                             f"questions of {self.loader.path}")
        end = self.offset + self.limit if self.limit else None
        return questions[self.offset:end]

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
