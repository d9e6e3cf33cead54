"""Embedding attribution: a sentence cites the passages most similar to it under the run's embedder.

The strength of (sentence, passage) is the largest cosine similarity between the sentence and the passage as a whole
or any one of its sentences (`rag.core.text.split_sentences`): a sentence copied or paraphrased from one place of a
long passage scores as that place does, not as the passage's average. Vectors are normalised (`Embedder.encode`),
so a dot product is the cosine. Answer sentences are encoded as queries and passage texts as passages (the
embedder's own prefixes, for models such as E5 that want them). No LLM; MiniLM runs offline on a laptop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rag.attribute.base import MAX_CITATIONS, Attribution, AttributionItem, Support
from rag.core.text import split_sentences
from rag.embed import Embedder

if TYPE_CHECKING:
    from rag.llm.base import LLMEngine


class EmbeddingAttribution(Attribution):
    """Cosine similarity of each answer sentence with each prompt passage (max over the passage's sentences)."""

    name = "embedding"

    def __init__(self, embedder: Embedder, threshold: float = 0.5, max_citations: int = MAX_CITATIONS,
                 passage_sentences: bool = True, threshold_source: str = "", min_citations: int = 0):
        super().__init__(max_citations, min_citations)
        if not -1.0 <= threshold <= 1.0:
            raise ValueError(f"attribution.threshold is a cosine similarity in [-1, 1], got {threshold}")
        self.embedder = embedder
        self.threshold = float(threshold)
        #: also compare with each sentence of a passage (False: the whole passage only)
        self.passage_sentences = passage_sentences
        #: where the threshold came from (declared in the YAML, shown by `python -m rag.describe`)
        self.threshold_source = threshold_source

    def settings(self) -> dict[str, Any]:
        return {"embedder": self.embedder.vector_key}

    def units(self, text: str) -> list[str]:
        """What a passage is compared by: itself, and each of its sentences when `passage_sentences`."""
        parts = split_sentences(text) if self.passage_sentences else []
        return list(dict.fromkeys([text.strip(), *parts]))

    def support(self, items: list[AttributionItem], engine: LLMEngine | None = None) -> list[Support]:
        sentences = list(dict.fromkeys(s for item in items for s in item.sentences))
        passages = list(dict.fromkeys(c.text for item in items for c in item.candidates))
        units = {p: self.units(p) for p in passages}
        flat = list(dict.fromkeys(u for p in passages for u in units[p]))
        sentence_vecs = dict(zip(sentences, self.embedder.encode_queries(sentences)))
        unit_vecs = dict(zip(flat, self.embedder.encode_passages(flat))) if flat else {}
        out = []
        for item in items:
            rows = []
            for sentence in item.sentences:
                vec = sentence_vecs[sentence]
                rows.append([float(max(np.dot(unit_vecs[u], vec) for u in units[c.text])) if units[c.text]
                             else 0.0 for c in item.candidates])
            out.append(Support(rows, {}))
        return out
