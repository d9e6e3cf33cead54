"""The attacked corpus: the clean corpus plus the attack's planted passages, under a key of its own.

Its key is the clean key followed by the attack's name, `n_passages` and a hash of the planted passages' ids and
texts, so the index, retrieval and rerank caches of a clean run and an attacked run never mix; with
`n_passages=0` nothing is planted and the clean key (and the clean index) is used. Planted passages are kept whole
(never chunked), each its own document with id `attack-<name>-<question id>-<j>`. Planning also marks every
target question (`Question.attack`: target answer and planted ids), which the answer records keep and the attack
metrics (rag/metrics/attack.py) read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

from rag.attack.base import CorpusAttack, Target
from rag.core.hashing import stable_hash
from rag.data.corpus import Corpus
from rag.llm.base import LLMEngine
from rag.records import Passage, Question


class AttackedCorpus(Corpus):
    def __init__(self, clean: Corpus, attack: CorpusAttack, questions: Callable[[], list[Question]],
                 engine: Callable[[], LLMEngine | None], cache_dir: str | Path, dataset: str):
        super().__init__(clean.path, clean.data_dir, clean.chunk_words, clean.overlap_words, clean.name,
                         clean.hash_cache_dir)
        self.clean, self.attack = clean, attack
        self._questions, self._engine, self.cache_dir, self.dataset = questions, engine, cache_dir, dataset

    def file(self) -> Path:
        return self.clean.file()

    @property
    def content_hash(self) -> str:  # type: ignore[override]
        return self.clean.content_hash

    @cached_property
    def targets(self) -> list[Target]:
        """The attack's targets; every target question is marked with what was planted for it."""
        questions = self._questions()
        targets = self.attack.plan(questions, self._engine, self.cache_dir, self.dataset)
        by_id = {q.id: q for q in questions}
        for target in targets:
            by_id[target.question_id].attack = {
                "name": self.attack.name, "target_answer": target.target_answer,
                "planted": [planted_id(self.attack.name, target.question_id, j) for j in range(len(target.texts))]}
        return targets

    def manifest(self) -> dict[str, Any]:
        """What was planted, for the run folder's attack.json (readable beside the answers)."""
        return {"settings": self.attack.settings(), "n_passages": self.attack.n_passages, "corpus": self.key,
                "targets": [{"id": t.question_id, "question": t.question, "correct": t.correct,
                             "target_answer": t.target_answer, "planted": list(t.texts)} for t in self.targets]}

    @cached_property
    def planted(self) -> list[Passage]:
        return [Passage(passage_id=pid, doc_id=pid, text=text, title="")
                for target in self.targets for j, text in enumerate(target.texts)
                for pid in [planted_id(self.attack.name, target.question_id, j)]]

    @property
    def extends(self) -> Corpus | None:
        """The clean corpus, when anything is planted: its passages come first, so a dense index of this corpus
        is the clean one's vectors plus the planted passages' (rag/retrieve/dense.py)."""
        return self.clean if self.planted else None

    @property
    def key(self) -> str:
        if not self.planted:
            return self.clean.key
        digest = stable_hash([(p.passage_id, p.text) for p in self.planted], length=12)
        return f"{self.clean.key}-{self.attack.name}{self.attack.n_passages}-{digest}"

    def documents(self) -> Iterator[tuple[str, str, str]]:
        yield from self.clean.documents()
        for passage in self.planted:
            yield passage.doc_id, passage.title, passage.text

    @cached_property
    def passages(self) -> list[Passage]:  # type: ignore[override]
        clean = self.clean.passages
        self.empty_documents = self.clean.empty_documents
        return [*clean, *self.planted]


def planted_id(attack: str, question_id: str, j: int) -> str:
    """The id (passage and document) of the j-th passage planted for a question."""
    return f"attack-{attack}-{question_id}-{j}"
