"""The records that flow one way through the pipeline: questions and passages in, answers out.

They are plain dataclasses so that every stage can write them as JSONL lines and read them back unchanged.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Question:
    """One question of a dataset, with whatever gold information the dataset has."""

    id: str
    question: str
    answer: str | None = None
    answer_aliases: list[str] = field(default_factory=list)
    gold_doc_ids: list[str] = field(default_factory=list)
    gold_docs: list[str] = field(default_factory=list)
    #: "single" or "multi": how many gold documents the question needs (DataMorgana's single-doc vs two-doc).
    hop: str = "single"
    #: DataMorgana question/user categories, or dataset-specific labels (HotpotQA type, MuSiQue hops).
    categories: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Passage:
    """A retrievable unit: a chunk of one corpus document."""

    passage_id: str
    doc_id: str
    text: str
    title: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ScoredPassage:
    """A passage with the score and rank a stage gave it (rank starts at 1)."""

    passage: Passage
    score: float
    rank: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"passage_id": self.passage.passage_id, "doc_id": self.passage.doc_id,
                "score": self.score, "rank": self.rank}


def with_ranks(passages: list[ScoredPassage]) -> list[ScoredPassage]:
    """Number a ranked list 1..n in its current order."""
    return [ScoredPassage(p.passage, p.score, i + 1) for i, p in enumerate(passages)]
