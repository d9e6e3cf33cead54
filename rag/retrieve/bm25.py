"""Embedded BM25 with bm25s (sparse-matrix BM25, Lucene scoring by default), English stemming and stopwords.

Stands in for LiveRAG's OpenSearch BM25 index on a laptop; same `match`-style bag-of-words scoring family.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from rag.core.hashing import slug
from rag.core.io import build_once
from rag.data.corpus import Corpus
from rag.records import ScoredPassage
from rag.retrieve.base import Retriever


class BM25Retriever(Retriever):
    kind = "bm25"

    def __init__(self, k: int = 20, k1: float = 1.5, b: float = 0.75, method: str = "lucene",
                 stemmer: str | None = "english", stopwords: str | None = "en", n_threads: int = 0):
        super().__init__(k)
        self.k1, self.b, self.method = k1, b, method
        self.stemmer_lang, self.stopwords, self.n_threads = stemmer, stopwords, n_threads
        self._index = None
        self._stemmer = None

    @property
    def key(self) -> str:
        return slug(f"bm25-{self.method}-k1_{self.k1}-b_{self.b}-stem_{self.stemmer_lang}-sw_{self.stopwords}")

    def _tokenize(self, texts: list[str], show_progress: bool = False):
        import bm25s

        return bm25s.tokenize(texts, stopwords=self.stopwords, stemmer=self._stemmer, show_progress=show_progress)

    def tokenize(self, texts: list[str], show_progress: bool = False):
        """Token ids and their vocabulary (a bm25s `Tokenized`) with this retriever's stopwords and stemmer: the
        terms its index and its queries are made of. Public so that `rag.index` and the sharded searcher make
        exactly these terms."""
        if self.stemmer_lang and self._stemmer is None:
            import Stemmer

            self._stemmer = Stemmer.Stemmer(self.stemmer_lang)
        return self._tokenize(texts, show_progress)

    def prepare(self, corpus: Corpus | None, cache_dir: str | Path) -> None:
        import bm25s

        if corpus is None:
            raise ValueError("retriever=bm25 needs a dataset with a corpus")
        super().prepare(corpus, cache_dir)
        if self.stemmer_lang:
            import Stemmer

            self._stemmer = Stemmer.Stemmer(self.stemmer_lang)
        index_dir = Path(cache_dir) / "index" / f"{self.key}__{corpus.key}"

        def build(tmp: Path) -> None:
            passages = corpus.passages
            index = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
            index.index(self._tokenize([p.text for p in passages], show_progress=True), show_progress=True)
            index.save(str(tmp))
            (tmp / "passage_ids.json").write_text(json.dumps([p.passage_id for p in passages]))

        build_once(index_dir, build)
        ids = json.loads((index_dir / "passage_ids.json").read_text())
        if ids != [p.passage_id for p in corpus.passages]:
            raise RuntimeError(f"BM25 index {index_dir} does not match the corpus; delete it to rebuild")
        self._index = bm25s.BM25.load(str(index_dir))

    def search(self, queries: list[str], k: int) -> list[list[ScoredPassage]]:
        if self._index is None:
            raise RuntimeError("BM25Retriever.prepare() must run before search()")
        passages = self.corpus.passages
        k = min(k, len(passages))
        docs, scores = self._index.retrieve(self._tokenize(queries), k=k, n_threads=self.n_threads,
                                            show_progress=len(queries) > 50)
        out = []
        for row_docs, row_scores in zip(np.asarray(docs), np.asarray(scores)):
            out.append([ScoredPassage(passages[int(d)], float(s), rank + 1)
                        for rank, (d, s) in enumerate(zip(row_docs, row_scores))])
        return out
