"""A dataset: a question loader plus the corpus its questions are answered from."""

from __future__ import annotations

import logging
from functools import cached_property

from rag.core.hashing import stable_hash
from rag.data.corpus import Corpus
from rag.data.questions import QuestionLoader
from rag.records import Question

log = logging.getLogger(__name__)


class Dataset:
    def __init__(self, name: str, questions: QuestionLoader, corpus: Corpus, limit: int | None = None):
        if limit is not None and limit < 1:
            raise ValueError(f"dataset.limit must be a positive integer or null, got {limit}")
        self.name = name
        self.loader = questions
        self.corpus = corpus
        self.limit = limit

    @cached_property
    def questions(self) -> list[Question]:
        """The first `limit` questions in file order."""
        questions = self.loader.load()
        ids = [q.id for q in questions]
        if len(set(ids)) != len(ids):
            dupes = sorted({i for i in ids if ids.count(i) > 1})[:5]
            raise ValueError(f"dataset {self.name}: duplicate question ids {dupes}")
        return questions[: self.limit] if self.limit else questions

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
