"""TrustRAG's retrieval-side defence as a reranker (`rerank=trustrag_filter`): any strategy gets the filter.

The retrieved list of each question goes through TrustRAG's K-means and n-gram filter
(`rag.generate.defense`, checked against TrustRAG's `defend_module.py`); the passages it keeps stay in the
retriever's order with the retriever's scores, and `k` then cuts them. With `retriever.k` above `rerank.k` this is
TrustRAG's own protocol (`main_trustrag.py`): the filter sees the top k plus whatever was planted among them, and
the list is cut to k afterwards. `generator=trustrag` filters the passages it is handed once more.
"""

from __future__ import annotations

from typing import Any

from rag.core.hashing import slug
from rag.generate.defense import FILTERS, defend_lists
from rag.records import ScoredPassage, with_ranks
from rag.rerank.base import Reranker


class TrustRAGFilter(Reranker):
    kind = "trustrag_filter"

    def __init__(self, embedder: Any, k: int | None = None, filter: str = "kmeans_ngram",  # noqa: A002
                 similarity_threshold: float = 0.88, ngram_threshold: float = 0.25, seed: int = 0):
        super().__init__(k)
        if filter not in FILTERS or filter == "none":
            raise ValueError(f"rerank.filter must be kmeans or kmeans_ngram, got {filter!r}")
        self.embedder, self.mode = embedder, filter
        self.similarity_threshold, self.ngram_threshold, self.seed = similarity_threshold, ngram_threshold, seed
        #: passages the filter dropped, summed over questions (metrics.json: rerank/dropped)
        self.stats: dict[str, float] = {}

    @property
    def key(self) -> str:
        model = getattr(self.embedder, "model", "embedder")
        return slug(f"trustrag_filter-{self.mode}-{self.similarity_threshold}-{self.ngram_threshold}-"
                    f"{model}-s{self.seed}")

    def score(self, queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[float]]:
        """The retriever's scores for kept passages, -inf for dropped ones (`rerank` drops them instead)."""
        kept = self._kept(candidates)
        return [[p.score if i in keep else float("-inf") for i, p in enumerate(cands)]
                for cands, keep in zip(candidates, kept)]

    def rerank(self, queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[ScoredPassage]]:
        kept = self._kept(candidates)
        return [with_ranks([ScoredPassage(cands[i].passage, cands[i].score) for i in sorted(keep)])
                for cands, keep in zip(candidates, kept)]

    def _kept(self, candidates: list[list[ScoredPassage]]) -> list[set[int]]:
        decisions = defend_lists([[p.passage.text for p in cands] for cands in candidates], self.embedder,
                                 self.mode, self.similarity_threshold, self.ngram_threshold, self.seed)
        kept = [set(d.kept) for d in decisions]
        dropped = sum(len(c) - len(k) for c, k in zip(candidates, kept))
        self.stats["dropped"] = self.stats.get("dropped", 0) + dropped
        return kept

    def close(self) -> None:
        close = getattr(self.embedder, "close", None)
        if callable(close):
            close()
