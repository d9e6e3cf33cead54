"""A retriever over an index built in shards by `python -m rag.index`: BM25 or dense, searched unit by unit.

Each unit (a part of a shard, in corpus order) returns its best rows; the lists are merged by score, ties broken
by passage id, so N shards return exactly the ranked list one index over the same corpus returns (tested on the
shared corpus for BM25 and flat dense). BM25 units score with the index's global statistics (document frequencies
and average length over the whole corpus, `rag.index.bm25`), term for term in the query's order as bm25s does,
so every score is bitwise the score of `retriever=bm25`'s single bm25s index. Dense units are flat (exact inner
product) or IVF / IVF-PQ units sharing one trained quantizer (`ann.type`), searched at `ann.nprobe` one by one
or through their on-disk merge (`layout: merged`, the default when it exists).

Hits carry their text (read from the units' passage stores), so the dataset's corpus is only needed to name the
index folder: `index_dir` points at an index of another corpus, e.g. FineWeb-10BT built on a cluster.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag.core.errors import ConfigError, DataError, MissingDataError
from rag.core.hashing import slug, stable_hash
from rag.data.corpus import Corpus
from rag.records import ScoredPassage
from rag.retrieve.base import Retriever
from rag.retrieve.shards import (
    IVF,
    MANIFEST,
    NONOCCURRENCE,
    PID_RANK,
    PIDS,
    SCORES,
    TERMS,
    VECTORS,
    VOCAB,
    PassageStore,
    StringTable,
    cut_ties,
    index_name,
    load_array,
    read_manifest,
    top_rows,
)

log = logging.getLogger(__name__)

#: BM25 settings that must equal the base retriever's for the index's scores to be its scores
BM25_SETTINGS = ("k1", "b", "method", "stemmer", "stopwords")


@dataclass
class Unit:
    folder: Path
    passages: int
    #: each passage's rank among all the index's passage ids: ties are broken with it
    pid_rank: np.ndarray
    store: PassageStore
    pids: StringTable
    #: BM25: the CSC score matrix and its columns' global term ids; dense: a faiss index
    scores: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    terms: np.ndarray | None = None
    faiss_index: Any = None


class ShardedRetriever(Retriever):
    kind = "sharded"
    #: it reads an index `python -m rag.index` built from corpus files, never the run's (attacked) corpus
    indexes_local_corpus = False
    needs_prebuilt_index = True
    searched_index = "an index built beforehand by python -m rag.index"

    def __init__(self, base: Retriever, k: int = 20, ann: dict[str, Any] | None = None,
                 index_dir: str | None = None, layout: str = "auto"):
        super().__init__(k)
        if getattr(base, "kind", None) not in ("bm25", "dense"):
            raise ConfigError(f"retriever.base must be the bm25 or dense retriever config, got "
                              f"{type(base).__name__}")
        if layout not in ("auto", "units", "merged"):
            raise ConfigError(f"retriever.layout must be auto, units or merged, got {layout!r}")
        self.base, self.layout = base, layout
        self.ann = {"type": "flat", **dict(ann or {})}
        index_name(base, self.ann)  # validates ann.type
        self.index_dir = index_dir
        self.manifest: dict[str, Any] = {}
        self.folder: Path | None = None
        self.units: list[Unit] = []
        self._vocab: StringTable | None = None
        self._nonoccurrence: np.ndarray | None = None
        self._merged: Any = None
        self._starts: np.ndarray | None = None
        #: hits take their passages from the dataset's corpus when it is the index's corpus (in memory already)
        self._from_corpus = False
        #: the base retriever, when the index folder holds the single index a run built in-process (same folder
        #: name, no shards): searched as one unit, with the scores a sharded build of it would give
        self._single: Retriever | None = None

    @property
    def name(self) -> str:
        """The index folder's name (before `__<corpus key>`): the base retriever's key for BM25 and flat dense."""
        return index_name(self.base, self.ann)

    @property
    def ann_type(self) -> str:
        return self.ann.get("type") or "flat"

    @property
    def key(self) -> str:
        probe = f"-nprobe{int(self.ann['nprobe'])}" if self.ann_type != "flat" else ""
        where = f"-at{stable_hash(str(Path(self.index_dir).expanduser().resolve()), 8)}" if self.index_dir else ""
        return slug(f"sharded-{self.name}{probe}")[:70] + where

    @property
    def stores_text(self) -> bool:
        return self._single.stores_text if self._single is not None else True

    def capacity(self) -> int | None:
        if self._single is not None:
            return self._single.capacity()
        return int(self.manifest["passages"]) if self.manifest else super().capacity()

    # -- loading ------------------------------------------------------------------------------------------------
    def prepare(self, corpus: Corpus | None, cache_dir: str | Path) -> None:
        self.corpus = corpus
        if self.index_dir:
            folder = Path(self.index_dir).expanduser()
        elif corpus is not None:
            folder = Path(cache_dir) / "index" / f"{self.name}__{corpus.key}"
        else:
            raise ConfigError("retriever=sharded needs a dataset with a corpus or retriever.index_dir")
        if (folder / "COMPLETE").is_file() and not (folder / MANIFEST).is_file() and corpus is not None \
                and not self.index_dir:
            # `retriever=bm25` (or dense) built its single index of this corpus here in a run: `python -m rag.index`
            # then finds the folder complete and builds nothing, so the shards never come; the single index is the
            # same ranking (every score bitwise the base retriever's), searched through the base retriever
            log.info("sharded: %s holds the single %s index a run built of this corpus; searched as one unit",
                     folder, self.base.kind)
            self.base.prepare(corpus, cache_dir)
            self._single, self.folder = self.base, folder
            return
        if not (folder / "COMPLETE").is_file() or not (folder / MANIFEST).is_file():
            source = corpus.file() if corpus is not None and not self.index_dir else "<files or glob>"
            raise MissingDataError(
                f"no sharded index at {folder}; build it: python -m rag.index corpus={source} "
                f"retriever={self.base.kind} index.num_shards=N" +
                (f" index.ann.type={self.ann_type} index.ann.nlist={self.ann.get('nlist')}"
                 + (f" index.ann.pq_m={self.ann.get('pq_m')}" if self.ann_type == "ivfpq" else "")
                 if self.ann_type != "flat" else ""))
        manifest = read_manifest(folder)
        self._check(manifest, folder)
        self.close()
        self.folder, self.manifest = folder, manifest
        self.units = [self._open_unit(folder / u["dir"], int(u["passages"])) for u in manifest["units"]]
        self._from_corpus = corpus is not None and corpus.key == manifest["corpus_key"]
        counts = np.array([u.passages for u in self.units], dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(counts)])
        if manifest["kind"] == "bm25":
            self._vocab = StringTable(folder, VOCAB, int(manifest["bm25"]["vocab_size"]))
            if (folder / NONOCCURRENCE).exists():
                self._nonoccurrence = load_array(folder / NONOCCURRENCE, length=len(self._vocab))
        elif self.ann_type != "flat" and self.layout != "units" and (folder / IVF).exists():
            self._merged = self._read_ivf(folder / IVF, merged=True)
        elif self.layout == "merged" and self.ann_type != "flat":
            raise MissingDataError(f"{folder / IVF}: no on-disk merge in this index (built with "
                                   f"index.ann.merge=units); use retriever.layout=units")
        log.info("sharded %s index %s: %d passages in %d unit(s)%s", manifest["kind"], folder,
                 manifest["passages"], len(self.units), " (on-disk IVF merge)" if self._merged is not None else "")

    def _check(self, manifest: dict[str, Any], folder: Path) -> None:
        kind = manifest.get("kind")
        if kind != self.base.kind:
            raise ConfigError(f"{folder}: holds a {kind} index, but retriever.base is {self.base.kind}")
        if kind == "bm25":
            mine = {"k1": self.base.k1, "b": self.base.b, "method": self.base.method,
                    "stemmer": self.base.stemmer_lang, "stopwords": self.base.stopwords}
            theirs = {k: manifest["bm25"].get(k) for k in BM25_SETTINGS}
            if mine != theirs:
                diff = ", ".join(f"{k}={theirs[k]!r} (retriever: {mine[k]!r})" for k in BM25_SETTINGS
                                 if mine[k] != theirs[k])
                raise ConfigError(f"{folder}: built with other BM25 settings: {diff}")
            return
        dense = manifest["dense"]
        if dense["vector_key"] != self.base.embedder.vector_key:
            raise ConfigError(f"{folder}: vectors of {dense['vector_key']}, but retriever.base.embedder makes "
                              f"{self.base.embedder.vector_key}; queries must be embedded by the index's model")
        built = dense.get("ann", {}).get("type", "flat")
        if built != self.ann_type:
            raise ConfigError(f"{folder}: built with ann.type={built}, but retriever.ann.type={self.ann_type}")

    def _open_unit(self, folder: Path, passages: int) -> Unit:
        unit = Unit(folder, passages, load_array(folder / PID_RANK, length=passages), PassageStore(folder, passages),
                    StringTable(folder, PIDS, passages))
        if self.manifest_kind == "bm25":
            terms = load_array(folder / TERMS)
            data, indices, indptr = (load_array(folder / name) for name in SCORES)
            if len(indptr) != len(terms) + 1 or len(data) != len(indices) or int(indptr[-1]) != len(data):
                raise DataError(f"{folder}: corrupt shard files (scores and terms disagree); rebuild this index")
            unit.scores, unit.terms = (data, indices, indptr), terms
        elif self.ann_type == "flat":
            import faiss

            vectors = load_array(folder / VECTORS, mmap_mode=None, length=passages)
            unit.faiss_index = faiss.IndexFlatIP(int(self.manifest["dense"]["dim"]))
            if passages:
                unit.faiss_index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        elif self.layout == "units" or not (self.folder_of(folder) / IVF).exists():
            unit.faiss_index = self._read_ivf(folder / IVF)
        return unit

    @property
    def manifest_kind(self) -> str:
        return self.manifest.get("kind", "")

    @staticmethod
    def folder_of(unit_folder: Path) -> Path:
        return unit_folder.parent.parent

    def _read_ivf(self, path: Path, merged: bool = False) -> Any:
        import faiss

        flags = faiss.IO_FLAG_ONDISK_SAME_DIR if merged else faiss.IO_FLAG_MMAP
        try:
            index = faiss.read_index(str(path), flags)
        except RuntimeError as err:
            raise DataError(f"{path}: corrupt shard file ({' '.join(str(err).split())[:200]}); rebuild this "
                            f"index") from None
        faiss.extract_index_ivf(index).nprobe = int(self.ann["nprobe"])
        return index

    def close(self) -> None:
        if self._single is not None:
            self._single.close()
        for unit in self.units:
            unit.store.close()
        self.units, self._merged = [], None

    # -- search -------------------------------------------------------------------------------------------------
    def search(self, queries: list[str], k: int) -> list[list[ScoredPassage]]:
        if self._single is not None:
            return self._single.search(queries, k)
        if not self.manifest:
            raise RuntimeError("ShardedRetriever.prepare() must run before search()")
        if not queries:
            return []
        k = min(k, int(self.manifest["passages"]))
        if k < 1:
            return [[] for _ in queries]
        if self.manifest_kind == "bm25":
            hits = self._bm25_candidates(queries, k)
        else:
            hits = self._dense_candidates(queries, k)
        out = []
        for scores, units, rows in hits:
            ranks = np.empty(len(rows), dtype=np.int64)
            for u in np.unique(units):
                mine = units == u
                ranks[mine] = self.units[int(u)].pid_rank[rows[mine]]
            best = np.lexsort((ranks, -scores.astype(np.float64)))[:k]
            out.append([ScoredPassage(self._passage(int(units[i]), int(rows[i])), float(scores[i]), rank)
                        for rank, i in enumerate(best, start=1)])
        return out

    def _passage(self, unit: int, row: int) -> Any:
        """A hit's passage: from the dataset's corpus when it is the index's (no disk read), else the unit's store."""
        if self._from_corpus:
            return self.passage(self.units[unit].pids[row])
        return self.units[unit].store.passage(row)

    def query_terms(self, queries: list[str]) -> list[np.ndarray]:
        """Each query's global term ids in query order, duplicates kept, unknown terms dropped (as bm25s)."""
        tokenized = self.base.tokenize(queries)
        words = {i: w for w, i in tokenized.vocab.items()}
        out = []
        for ids in tokenized.ids:
            found = [self._vocab.find(words[i]) for i in ids]
            out.append(np.array([g for g in found if g >= 0], dtype=np.int64))
        return out

    def _bm25_candidates(self, queries: list[str], k: int) -> list[Candidates]:
        terms_of = self.query_terms(queries)
        hits = [_Collector() for _ in queries]
        for u, unit in enumerate(self.units):
            if not unit.passages:
                continue
            data, indices, indptr = unit.scores
            for q, gids in enumerate(terms_of):
                scores = np.zeros(unit.passages, dtype=np.float32)
                if len(gids) and len(unit.terms):
                    cols = np.searchsorted(unit.terms, gids)
                    for g, c in zip(gids, cols):
                        if c < len(unit.terms) and unit.terms[c] == g:
                            start, stop = int(indptr[c]), int(indptr[c + 1])
                            scores[indices[start:stop]] += data[start:stop]
                if self._nonoccurrence is not None and len(gids):
                    scores += self._nonoccurrence[gids].sum()
                rows = top_rows(scores, k, unit.pid_rank)
                hits[q].add(scores[rows], u, rows)
        return [h.arrays() for h in hits]

    def _dense_candidates(self, queries: list[str], k: int) -> list[Candidates]:
        vectors = self.base.embedder.encode_queries(queries)
        if self._merged is not None:
            scores, ids = deep_search(self._merged, vectors, k, int(self.manifest["passages"]))
            out = []
            for q in range(len(queries)):
                valid = ids[q] >= 0
                units = np.searchsorted(self._starts, ids[q][valid], side="right") - 1
                out.append((scores[q][valid], units, ids[q][valid] - self._starts[units]))
            return out
        hits = [_Collector() for _ in queries]
        for u, unit in enumerate(self.units):
            if not unit.passages:
                continue
            scores, rows = deep_search(unit.faiss_index, vectors, k, unit.passages)
            for q in range(len(queries)):
                kept, kept_scores = cut_ties(rows[q], scores[q], k, unit.pid_rank)
                hits[q].add(kept_scores, u, kept)
        return [h.arrays() for h in hits]


#: one query's candidates: scores, unit numbers, rows within the units
Candidates = tuple[np.ndarray, np.ndarray, np.ndarray]


class _Collector:
    """One query's candidates from unit after unit, concatenated once at the end."""

    def __init__(self) -> None:
        self.scores: list[np.ndarray] = []
        self.units: list[np.ndarray] = []
        self.rows: list[np.ndarray] = []

    def add(self, scores: np.ndarray, unit: int, rows: np.ndarray) -> None:
        self.scores.append(np.asarray(scores, dtype=np.float32))
        self.units.append(np.full(len(rows), unit, dtype=np.int64))
        self.rows.append(np.asarray(rows, dtype=np.int64))

    def arrays(self) -> Candidates:
        if not self.scores:
            return np.zeros(0, np.float32), np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(self.scores), np.concatenate(self.units), np.concatenate(self.rows)


def deep_search(index: Any, vectors: np.ndarray, k: int, total: int) -> tuple[np.ndarray, np.ndarray]:
    """faiss top-k, searched deeper (the same query batch, so the same scores) until every row tied with the k-th
    score is in: the caller then breaks those ties by passage id instead of by faiss's heap order."""
    depth = min(k + 1, total)
    while True:
        scores, rows = index.search(vectors, depth)
        if depth >= total or k >= depth:
            return scores, rows
        last, kth = scores[:, depth - 1], scores[:, k - 1]
        open_ended = (rows[:, depth - 1] >= 0) & (last == kth)
        if not open_ended.any():
            return scores, rows
        depth = min(total, depth * 2)
