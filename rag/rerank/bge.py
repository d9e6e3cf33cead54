"""BGE rerankers through FlagEmbedding: the cross-encoder RAGtifier submitted with, and BGE-M3 scoring.

RAGtifier (LiveRAG 2025, section 3.3/4.4) reranked Pinecone candidates with BGE; its latency figure is about
8.6 s per question for 300 passages. Two modes:

- `cross_encoder` (default, `BAAI/bge-reranker-v2-m3`): FlagEmbedding's `FlagReranker` scores each
  (question, passage) pair jointly; raw logits, higher is more relevant.
- `m3` (`BAAI/bge-m3`): FlagEmbedding's `BGEM3FlagModel.compute_score`, a weighted sum of its dense, sparse and
  multi-vector (ColBERT) similarities (`m3_weights`, FlagEmbedding's example weights by default).

All pairs of a batch of questions go to the model in one call, so the GPU sees full batches across questions
(FlagEmbedding sorts pairs by length to limit padding). fp16 is used on GPU only (FlagEmbedding turns it off on
CPU). FlagEmbedding is imported when the model is first needed; `model_path` points at a local copy for
clusters without Hub access.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from rag.core.hashing import slug
from rag.core.models import resolve_model_dir
from rag.records import ScoredPassage
from rag.rerank.base import Reranker

log = logging.getLogger(__name__)

MISSING_FLAGEMBEDDING = ("rerank=bge needs FlagEmbedding: pip install 'FlagEmbedding==1.4.2' (it needs "
                         "transformers<5), or the project's `gpu` extra")


class BGEReranker(Reranker):
    kind = "bge"

    def __init__(self, k: int | None = 5, model: str = "BAAI/bge-reranker-v2-m3", model_path: str | None = None,
                 mode: str = "cross_encoder", use_fp16: bool = True, max_length: int = 512,
                 query_max_length: int | None = None, batch_size: int = 128, devices: str | list[str] | None = None,
                 normalize: bool = False, m3_weights: tuple[float, float, float] | list[float] = (0.4, 0.2, 0.4),
                 with_title: bool = False):
        super().__init__(k)
        if mode not in ("cross_encoder", "m3"):
            raise ValueError(f"rerank.mode must be cross_encoder or m3, got {mode!r}")
        if len(m3_weights) != 3:
            raise ValueError("rerank.m3_weights needs three weights: dense, sparse, colbert")
        self.model_name, self.model_path, self.mode = model, model_path, mode
        self.use_fp16, self.max_length, self.query_max_length = use_fp16, max_length, query_max_length
        self.batch_size, self.devices, self.normalize = batch_size, devices, normalize
        self.m3_weights = [float(w) for w in m3_weights]
        #: prepend the passage title (useful on Wikipedia-style corpora such as HotpotQA)
        self.with_title = with_title
        self._model = None
        #: what the last `score` call cost: the pipeline reads seconds per question from here
        self.stats: dict[str, Any] = {"seconds": 0.0, "questions": 0, "pairs": 0, "seconds_per_question": 0.0}

    @property
    def key(self) -> str:
        extra = "" if self.mode == "cross_encoder" else "-m3_" + "_".join(f"{w:g}" for w in self.m3_weights)
        title = "-title" if self.with_title else ""
        return slug(f"bge-{self.model_name}-len{self.max_length}{extra}{title}")

    @property
    def model(self):
        if self._model is None:
            try:
                import FlagEmbedding
            except ImportError as err:
                raise ImportError(f"{MISSING_FLAGEMBEDDING} ({err})") from None
            location = resolve_model_dir(self.model_name, self.model_path)
            common: dict[str, Any] = dict(use_fp16=self.use_fp16, devices=self.devices, batch_size=self.batch_size)
            if self.mode == "cross_encoder":
                self._model = FlagEmbedding.FlagReranker(location, max_length=self.max_length,
                                                         query_max_length=self.query_max_length,
                                                         normalize=self.normalize, **common)
            else:
                self._model = FlagEmbedding.BGEM3FlagModel(location, query_max_length=self.query_max_length or
                                                           self.max_length, passage_max_length=self.max_length,
                                                           **common)
            log.info("BGE reranker %s (%s) loaded from %s", self.model_name, self.mode, location)
        return self._model

    def _text(self, item: ScoredPassage) -> str:
        p = item.passage
        return f"{p.title}\n{p.text}" if self.with_title and p.title else p.text

    def score_pairs(self, pairs: list[tuple[str, str]]) -> list[float]:
        """Relevance of each (query, passage) pair, in one model call."""
        if not pairs:
            return []
        if self.mode == "cross_encoder":
            scores = self.model.compute_score([list(p) for p in pairs], batch_size=self.batch_size,
                                              max_length=self.max_length, normalize=self.normalize)
        else:
            out = self.model.compute_score([list(p) for p in pairs], batch_size=self.batch_size,
                                           max_query_length=self.query_max_length or self.max_length,
                                           max_passage_length=self.max_length,
                                           weights_for_different_modes=self.m3_weights)
            scores = out["colbert+sparse+dense"]
        if isinstance(scores, (int, float)):  # FlagEmbedding unwraps a single pair
            scores = [scores]
        return [float(s) for s in scores]

    def score(self, queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[float]]:
        start = time.perf_counter()
        pairs = [(q, self._text(c)) for q, cands in zip(queries, candidates) for c in cands]
        flat = self.score_pairs(pairs)
        out, offset = [], 0
        for cands in candidates:
            out.append(flat[offset:offset + len(cands)])
            offset += len(cands)
        seconds = time.perf_counter() - start
        self.stats = {"seconds": seconds, "questions": len(queries), "pairs": len(pairs),
                      "seconds_per_question": seconds / max(1, len(queries))}
        return out

    def close(self) -> None:
        if self._model is not None and hasattr(self._model, "stop_self_pool"):
            self._model.stop_self_pool()
        self._model = None
