"""Hybrid retrieval: fuse two retrievers' ranked lists by reciprocal rank fusion (RRF).

RRF (Cormack, Clarke and Buettcher, SIGIR 2009) scores a passage by the sum over lists of
`weight / (rrf_k + rank)`, with ranks starting at 1 and `rrf_k = 60` as in the paper. It needs no score
calibration, so a BM25 list (unbounded scores) and a dense list (cosines) fuse directly; passages are matched by
`passage_id`, so both retrievers must index the same passages (same corpus and chunking, or the LiveRAG
OpenSearch and Pinecone indexes, which share their passage ids).
"""

from __future__ import annotations

from pathlib import Path

from rag.core.hashing import slug, stable_hash
from rag.data.corpus import Corpus
from rag.records import Passage, ScoredPassage
from rag.retrieve.base import Retriever

#: keys longer than this are shortened (readable prefix + hash) so cache file names stay well under 255 bytes
MAX_KEY_CHARS = 100


def reciprocal_rank_fusion(lists: list[list[ScoredPassage]], rrf_k: float = 60.0,
                           weights: list[float] | None = None) -> list[ScoredPassage]:
    """Fuse ranked lists into one, best first; ties keep the order of first appearance (list 1 first)."""
    weights = weights or [1.0] * len(lists)
    scores: dict[str, float] = {}
    passages: dict[str, Passage] = {}
    for ranked, weight in zip(lists, weights):
        for position, item in enumerate(ranked, start=1):
            pid = item.passage.passage_id
            rank = item.rank if item.rank > 0 else position
            scores[pid] = scores.get(pid, 0.0) + weight / (rrf_k + rank)
            passages.setdefault(pid, item.passage)
    order = sorted(scores, key=lambda pid: -scores[pid])  # sorted() is stable: ties keep insertion order
    return [ScoredPassage(passages[pid], scores[pid], rank) for rank, pid in enumerate(order, start=1)]


class HybridRetriever(Retriever):
    kind = "hybrid"

    def __init__(self, first: Retriever, second: Retriever, k: int = 20, rrf_k: float = 60.0,
                 depth: int | None = None, weights: tuple[float, float] | list[float] = (1.0, 1.0)):
        super().__init__(k)
        if rrf_k <= 0:
            raise ValueError(f"retriever.rrf_k must be > 0, got {rrf_k}")
        if len(weights) != 2:
            raise ValueError(f"retriever.weights needs two values, got {list(weights)}")
        self.first, self.second = first, second
        self.rrf_k = rrf_k
        #: how deep each sub-retriever searches (default: the requested k); deeper lists make fusion steadier
        self.depth = depth
        self.weights = [float(w) for w in weights]

    @property
    def key(self) -> str:
        a, b = self.first.key, self.second.key
        depth = f"-d{self.depth}" if self.depth else ""
        weights = "" if self.weights == [1.0, 1.0] else f"-w{self.weights[0]:g}_{self.weights[1]:g}"
        params = f"hybrid-rrf{self.rrf_k:g}{depth}{weights}"
        full = f"{params}--{a}--{b}"
        if len(full) <= MAX_KEY_CHARS:
            return full
        return slug(f"{params}--{a[:24]}--{b[:24]}-{stable_hash([params, a, b], 10)}")

    @property
    def stores_text(self) -> bool:
        """Store text whenever a sub-retriever's hits are not all in the dataset corpus (remote indexes)."""
        return self.corpus is None or self.first.stores_text or self.second.stores_text

    def parts(self) -> list[Retriever]:
        return [self.first, self.second]

    def prepare(self, corpus: Corpus | None, cache_dir: str | Path) -> None:
        super().prepare(corpus, cache_dir)
        self.first.prepare(corpus, cache_dir)
        self.second.prepare(corpus, cache_dir)

    def search(self, queries: list[str], k: int) -> list[list[ScoredPassage]]:
        if not queries:
            return []
        depth = max(k, self.depth or 0)
        firsts = self.first.search(queries, depth)
        seconds = self.second.search(queries, depth)
        return [reciprocal_rank_fusion([a, b], self.rrf_k, self.weights)[:k] for a, b in zip(firsts, seconds)]

    def close(self) -> None:
        self.first.close()
        self.second.close()
