"""The retriever interface: a batch of queries in, ranked passage lists out.

A retriever answers a batch of queries with ranked `ScoredPassage` lists. Embedded retrievers (BM25, dense)
build their index once per (corpus, chunking, model) into a cache folder named by those parameters and load
it afterwards; remote retrievers (Pinecone, OpenSearch) carry passage text in their hits.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from rag.data.corpus import Corpus
from rag.records import Passage, ScoredPassage

log = logging.getLogger(__name__)


def clamp_to_corpus(stages: dict[str, Any], capacity: int | None, corpus_key: str) -> None:
    """k beyond the corpus retrieves the whole corpus: say so once and set each stage's (setting name -> retriever
    or reranker) `k` to the corpus size, so metric names and prompts say what was really done
    (`retriever.k=100000` over 28,082 passages ran silently before)."""
    if not capacity:
        return
    for name, stage in stages.items():
        if stage.k is not None and stage.k > capacity:
            log.warning("%s=%d is more than the %d passages of the corpus %s: using %d", name, stage.k, capacity,
                        corpus_key, capacity)
            stage.k = capacity


class Retriever(ABC):
    #: short name used in cache keys and logs
    kind: str = "retriever"
    #: whether `prepare` indexes the run's own corpus, so that what a corpus attack plants in it is searched
    #: (rag/attack/); one that searches an index made elsewhere says what it searches (`searched_index`), and a run
    #: that plants passages refuses it, alone or inside a composite retriever (rag/preflight/attack.py)
    indexes_local_corpus: bool = True
    searched_index: str = "the run's corpus"
    #: whether it searches an index `python -m rag.index` built beforehand from corpus files (the preflight refuses
    #: it over a corpus that command cannot read: rag/preflight/prebuilt.py)
    needs_prebuilt_index: bool = False

    def __init__(self, k: int = 20):
        if k < 1:
            raise ValueError(f"retriever.k must be >= 1, got {k}")
        self.k = k
        self.corpus: Corpus | None = None

    @property
    @abstractmethod
    def key(self) -> str:
        """Names everything that changes results except k (a retrieval at depth d serves every k <= d)."""

    def prepare(self, corpus: Corpus | None, cache_dir: str | Path) -> None:
        """Build or load the index. Remote retrievers only keep the corpus for gold-recall bookkeeping."""
        self.corpus = corpus

    @abstractmethod
    def search(self, queries: list[str], k: int) -> list[list[ScoredPassage]]:
        """Top-k passages per query, best first, ranks 1..k."""

    def parts(self) -> list[Retriever]:
        """The retrievers this one searches through (a hybrid's two, a fusion's sources): what walks a retriever
        for its dense indexes or its model loads looks inside through this."""
        return []

    def capacity(self) -> int | None:
        """How many passages a search can return at most: the indexed corpus's (None: a service's index, whose
        size the local corpus does not tell)."""
        return None if self.corpus is None else len(self.corpus.passages)

    # -- cache support: corpus-backed retrievers store ids only and re-attach text on load --------------------
    @property
    def stores_text(self) -> bool:
        return self.corpus is None

    def passage(self, passage_id: str) -> Passage:
        if self.corpus is None:
            raise KeyError(passage_id)
        return self._passages_by_id()[passage_id]

    def _passages_by_id(self) -> dict[str, Passage]:
        if not hasattr(self, "_by_id"):
            self._by_id = {p.passage_id: p for p in self.corpus.passages}
        return self._by_id

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


class RemoteRetriever(Retriever):
    """A retriever whose index lives in a service: hits carry their text, `prepare` connects (and indexes nothing:
    a corpus attack cannot reach it)."""

    indexes_local_corpus = False
    searched_index = "a hosted index"

    def capacity(self) -> int | None:
        return None

    @property
    def stores_text(self) -> bool:
        """Hits carry their text; a dataset corpus, if given, only serves gold bookkeeping."""
        return True

    def prepare(self, corpus: Corpus | None, cache_dir: str | Path) -> None:
        super().prepare(corpus, cache_dir)
        self.connect()

    @abstractmethod
    def connect(self) -> Any:
        """Open the client; raise a ServiceError naming the missing variable or unreachable host."""

