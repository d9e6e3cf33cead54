"""Context orderings. `inverted` puts the best passage last, right before the question (Cuconasu et al.,
"The Power of Noise", SIGIR 2024), which RAGtifier used for every strategy but IterDRAG."""

from __future__ import annotations

from abc import ABC, abstractmethod

from rag.records import ScoredPassage


class Ordering(ABC):
    name: str = "ordering"

    @abstractmethod
    def order(self, ranked: list[ScoredPassage]) -> list[ScoredPassage]:
        """Arrange a best-first list for the prompt; ranks stay those of the ranked list."""


class AsRanked(Ordering):
    name = "as_ranked"

    def order(self, ranked: list[ScoredPassage]) -> list[ScoredPassage]:
        return list(ranked)


class Inverted(Ordering):
    name = "inverted"

    def order(self, ranked: list[ScoredPassage]) -> list[ScoredPassage]:
        return list(reversed(ranked))
