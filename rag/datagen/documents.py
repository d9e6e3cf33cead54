"""The documents pairs are written from: one drawn at random, or two related ones found with the retriever.

Two-document pairs need documents on the same topic with different facts (DataMorgana's multi-document
categories). We query the project's own retriever with the opening words of the first document and take the
best-ranked other document that is long enough and not a near copy of the first (word-set Jaccard similarity
below `max_jaccard`): same topic, different facts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rag.core.errors import DataError
from rag.core.text import first_words
from rag.data.corpus import JsonlCorpus
from rag.retrieve.base import Retriever

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Document:
    doc_id: str
    text: str
    n_words: int

    def excerpt(self, max_words: int) -> str:
        """The text shown to the model: at most `max_words` words (small models have small contexts)."""
        words = self.text.split()
        return " ".join(words[:max_words]) + (" ..." if len(words) > max_words else "")


def _jaccard(a: str, b: str) -> float:
    sa, sb = set(a.lower().split()), set(b.lower().split())
    return len(sa & sb) / max(1, len(sa | sb))


class DocumentPool:
    """All documents of the corpus; those with at least `min_words` words can seed a pair."""

    def __init__(self, corpus: JsonlCorpus, min_words: int = 80, max_prompt_words: int = 400,
                 query_words: int = 64, max_jaccard: float = 0.6):
        if min_words < 1 or max_prompt_words < 1:
            raise DataError("documents.min_words and documents.max_prompt_words must be positive")
        self.corpus = corpus
        self.min_words, self.max_prompt_words = min_words, max_prompt_words
        self.query_words, self.max_jaccard = query_words, max_jaccard
        self.documents: list[Document] = []
        self.by_id: dict[str, Document] = {}
        for doc_id, _title, text in corpus.documents():
            text = text.strip()
            doc = Document(doc_id=doc_id, text=text, n_words=len(text.split()))
            self.documents.append(doc)
            self.by_id[doc_id] = doc
        file: Path = corpus.file()
        if not self.documents or not any(d.n_words for d in self.documents):
            raise DataError(f"{file}: corpus has no documents with text; nothing to generate pairs from")
        self.eligible = [i for i, d in enumerate(self.documents) if d.n_words >= min_words]
        if not self.eligible:
            longest = max(d.n_words for d in self.documents)
            raise DataError(f"{file}: no document has at least {min_words} words (the longest has {longest}); "
                            f"documents are too short for a pair; lower documents.min_words")
        log.info("corpus %s: %d documents, %d with at least %d words", file, len(self.documents),
                 len(self.eligible), min_words)

    def pick(self, rng: np.random.Generator) -> Document:
        return self.documents[self.eligible[int(rng.integers(len(self.eligible)))]]

    def related(self, retriever: Retriever, firsts: list[Document]) -> list[Document | None]:
        """For each document, the best-ranked other eligible document on the same topic (None if there is none)."""
        if not firsts:
            return []
        queries = [first_words(d.text, self.query_words) for d in firsts]
        hits = retriever.search(queries, retriever.k)
        out: list[Document | None] = []
        for first, ranked in zip(firsts, hits):
            chosen = None
            for hit in ranked:
                other = self.by_id.get(hit.passage.doc_id)
                if (other is None or other.doc_id == first.doc_id or other.n_words < self.min_words
                        or _jaccard(first.text, other.text) > self.max_jaccard):
                    continue
                chosen = other
                break
            out.append(chosen)
        return out
