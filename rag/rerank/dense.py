"""Dense re-scoring: cosine similarity of the query and each candidate under a (possibly different) embedding
model, without encoding a passage twice.

Useful on a laptop to rerank BM25 candidates semantically; the production rerankers (BGE cross-encoder,
Rank-R1) implement the same interface. When the reranker's embedder is the dense index's (same `vector_key`),
candidate vectors are read back from the faiss index; otherwise they come from an embedding cache on disk keyed
by the embedder and the passage text (`rag.embed.store`), and only passages never seen are encoded.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rag.core.hashing import slug
from rag.embed import Embedder
from rag.embed.store import EmbeddingCache, text_hash
from rag.records import ScoredPassage
from rag.rerank.base import Reranker
from rag.retrieve.base import Retriever


def dense_retrievers(retriever: Retriever | None) -> list[Retriever]:
    """The dense retrievers inside a retriever (itself, or a hybrid's or a fusion's parts) that can hand out vectors."""
    if retriever is None:
        return []
    if hasattr(retriever, "passage_vectors"):
        return [retriever]
    return [r for part in retriever.parts() for r in dense_retrievers(part)]


class DenseReranker(Reranker):
    kind = "dense"

    def __init__(self, embedder: Embedder, k: int | None = 5, cache_vectors: bool = True):
        super().__init__(k)
        self.embedder = embedder
        #: keep vectors of passages the index does not hold in <cache_dir>/embeddings (off: encode every time)
        self.cache_vectors = cache_vectors
        self._index_sources: list[Retriever] = []
        self._cache_dir: Path | None = None
        self._store: EmbeddingCache | None = None
        #: where candidate vectors came from in this process
        self.stats = {"vectors_from_index": 0, "vectors_from_cache": 0, "vectors_encoded": 0}

    @property
    def key(self) -> str:
        return slug(f"dense-{self.embedder.vector_key}")

    def prepare(self, cache_dir: str | Path, retriever: Retriever | None = None) -> None:
        self._cache_dir = Path(cache_dir)
        corpus = getattr(retriever, "corpus", None)
        if self.embedder.needs_calibration and corpus is not None:  # int8 static: calibrate on the same corpus
            self.embedder.calibrate([p.text for p in corpus.passages])
        self._index_sources = [r for r in dense_retrievers(retriever)
                               if r.embedder.vector_key == self.embedder.vector_key]

    def _count(self, name: str, n: int) -> None:
        self.stats[name] = self.stats.get(name, 0) + n

    @property
    def store(self) -> EmbeddingCache | None:
        if self._store is None and self.cache_vectors and self._cache_dir is not None:
            self._store = EmbeddingCache(self._cache_dir / "embeddings" / f"{self.embedder.vector_key}.sqlite")
        return self._store

    def passage_vectors(self, candidates: list[ScoredPassage]) -> np.ndarray:
        """Vectors of the candidates: from the index, else the embedding cache, else encoded (and cached)."""
        ids = [c.passage.passage_id for c in candidates]
        for source in self._index_sources:
            vectors = source.passage_vectors(ids)
            if vectors is not None:
                self._count("vectors_from_index", len(ids))
                return vectors
        texts = [c.passage.text for c in candidates]
        if self.store is None:
            self._count("vectors_encoded", len(texts))
            return self.embedder.encode_passages(texts)
        hashes = [text_hash(t) for t in texts]
        found = self.store.get(hashes)
        missing = list(dict.fromkeys(h for h in hashes if h not in found))
        if missing:
            text_of = dict(zip(hashes, texts))
            fresh = self.embedder.encode_passages([text_of[h] for h in missing])
            self.store.put(missing, fresh)
            found.update(zip(missing, fresh))
        self._count("vectors_encoded", len(missing))
        self._count("vectors_from_cache", len(hashes) - len(missing))
        return np.stack([found[h] for h in hashes]) if hashes else np.zeros((0, 0), dtype=np.float32)

    def score(self, queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[float]]:
        query_vecs = self.embedder.encode_queries(queries)
        flat = [p for cands in candidates for p in cands]
        passage_vecs = self.passage_vectors(flat) if flat else np.zeros((0, query_vecs.shape[1]))
        out, start = [], 0
        for q_vec, cands in zip(query_vecs, candidates):
            block = passage_vecs[start:start + len(cands)]
            start += len(cands)
            out.append((block @ q_vec).astype(float).tolist())
        return out

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
