"""Passage vectors computed once: read back from a dense index, or from an embedding cache on disk.

The dense reranker scores candidates by cosine similarity to the query. When its model is the dense index's
model, every candidate's vector is already in the faiss index (`DenseRetriever.passage_vectors`); for any other
model (or a BM25 first stage) vectors go to an `EmbeddingCache`, keyed by the embedder's `vector_key` and the
SHA-256 of the passage text, so no passage is encoded twice, in a run or across runs.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import numpy as np


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class EmbeddingCache:
    """float32 vectors by passage-text hash in one SQLite file per embedder (safe for concurrent jobs)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path), timeout=60, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS vec (h TEXT PRIMARY KEY, v BLOB NOT NULL)")
        self._db.commit()

    def get(self, hashes: list[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        for start in range(0, len(unique), 500):
            part = unique[start:start + 500]
            rows = self._db.execute(f"SELECT h, v FROM vec WHERE h IN ({','.join('?' * len(part))})", part)
            out.update({h: np.frombuffer(v, dtype=np.float32) for h, v in rows})
        return out

    def put(self, hashes: list[str], vectors: np.ndarray) -> None:
        rows = [(h, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for h, v in zip(hashes, vectors)]
        with self._db:
            self._db.executemany("INSERT OR IGNORE INTO vec (h, v) VALUES (?, ?)", rows)

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM vec").fetchone()[0]

    def close(self) -> None:
        self._db.close()
