"""Dense re-scoring: embed the query and each candidate with a (possibly different) embedding model.

Useful on a laptop to rerank BM25 candidates semantically; the production rerankers (BGE cross-encoder,
Rank-R1) implement the same interface.
"""

from __future__ import annotations

import numpy as np

from rag.core.hashing import slug
from rag.embed import Embedder
from rag.records import ScoredPassage
from rag.rerank.base import Reranker


class DenseReranker(Reranker):
    kind = "dense"

    def __init__(self, embedder: Embedder, k: int | None = 5):
        super().__init__(k)
        self.embedder = embedder

    @property
    def key(self) -> str:
        return slug(f"dense-{self.embedder.name}")

    def score(self, queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[float]]:
        query_vecs = self.embedder.encode_queries(queries)
        flat = [p.passage.text for cands in candidates for p in cands]
        passage_vecs = self.embedder.encode_passages(flat) if flat else np.zeros((0, query_vecs.shape[1]))
        out, start = [], 0
        for q_vec, cands in zip(query_vecs, candidates):
            block = passage_vecs[start:start + len(cands)]
            start += len(cands)
            out.append((block @ q_vec).astype(float).tolist())
        return out
