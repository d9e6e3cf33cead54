"""The reranker interface. `k` cuts the reranked list; `k: null` keeps every candidate."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING

from rag.records import ScoredPassage, with_ranks

if TYPE_CHECKING:
    from rag.retrieve.base import Retriever


class Reranker(ABC):
    kind: str = "reranker"

    def __init__(self, k: int | None = None):
        if k is not None and k < 1:
            raise ValueError(f"rerank.k must be >= 1 or null, got {k}")
        self.k = k

    @property
    @abstractmethod
    def key(self) -> str:
        """Names everything that changes the reranked order (not k, which only cuts)."""

    @property
    def is_identity(self) -> bool:
        """True when reranking keeps the retriever's order (nothing to compute or cache)."""
        return False

    @abstractmethod
    def score(self, queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[float]]:
        """One relevance score per candidate (higher is better), for a whole batch of queries."""

    def rerank(self, queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[ScoredPassage]]:
        """Full reranked lists (uncut): the cacheable part. Stable for ties."""
        scores = self.score(queries, candidates)
        out = []
        for cands, cand_scores in zip(candidates, scores):
            order = sorted(range(len(cands)), key=lambda i: (-cand_scores[i], i))
            out.append(with_ranks([ScoredPassage(cands[i].passage, float(cand_scores[i])) for i in order]))
        return out

    def prepare(self, cache_dir: str | Path, retriever: Retriever | None = None) -> None:  # noqa: B027
        """Optional hook, called once the retriever's index is ready: reuse what it holds (dense vectors)."""

    def cut(self, ranked: list[ScoredPassage]) -> list[ScoredPassage]:
        return ranked if self.k is None else ranked[: self.k]

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release model memory."""


class NoRerank(Reranker):
    """Keep the retriever's order; `rerank.k` still cuts the list handed to the generator."""

    kind = "none"

    @property
    def key(self) -> str:
        return "none"

    @property
    def is_identity(self) -> bool:
        return True

    def score(self, queries, candidates):
        return [[p.score for p in cands] for cands in candidates]

    def rerank(self, queries, candidates):
        return candidates
