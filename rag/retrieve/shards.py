"""The on-disk layout of a sharded index (written by `rag.index`, read by `rag.retrieve.sharded`), and its readers.

An index folder `<cache>/index/<index name>__<corpus key>/` holds `manifest.json` and one folder per unit (a part
of a shard, in corpus order) under `units/`. Every unit keeps its passages (`passages.jsonl` with byte offsets),
its passage ids as a string table and each id's rank among the unit's sorted ids (ties are broken by passage id).
BM25 units hold their final scores as a CSC matrix (rows: the unit's passages, columns: the unit's terms, given
as ascending ids of the index's global vocabulary `vocab.*`), computed from global statistics so that every unit
scores as one index would. Dense units hold their vectors (flat) or an IVF index built on the one trained
quantizer; an on-disk merge of the IVF units may sit beside them (`ivf.faiss` + `ivf.ivfdata`).

Arrays are memory-mapped: an index larger than memory is searched through the page cache. A file that cannot be
read, or whose length disagrees with the manifest, ends in one DataError naming it.
"""

from __future__ import annotations

import json
import mmap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag.core.errors import DataError
from rag.core.hashing import slug
from rag.records import Passage

FORMAT = "rag-sharded-index"
VERSION = 1
MANIFEST = "manifest.json"
UNITS = "units"
VOCAB = "vocab"
NONOCCURRENCE = "nonoccurrence.npy"
PASSAGES = "passages.jsonl"
PASSAGE_OFFSETS = "passages.offsets.npy"
PIDS = "pids"
PID_RANK = "pid_rank.npy"
PID_HASH = "pid_hash.npy"
SOURCES = "sources.npy"
SCORES = ("scores.data.npy", "scores.indices.npy", "scores.indptr.npy")
TERMS = "terms.npy"
VECTORS = "vectors.npy"
IVF = "ivf.faiss"
IVF_DATA = "ivf.ivfdata"
ANN_TYPES = ("flat", "ivf", "ivfpq")


def index_name(base: Any, ann: dict[str, Any] | None = None) -> str:
    """The index's cache name: the retriever's own key (so `rag.main` with that retriever finds a flat or BM25
    index built by `rag.index`), and for an IVF index the embedding and the quantizer's shape instead."""
    ann = dict(ann or {})
    kind = ann.get("type") or "flat"
    if kind not in ANN_TYPES:
        raise ValueError(f"ann.type must be one of {ANN_TYPES}, got {kind!r}")
    if kind == "flat" or getattr(base, "kind", "") != "dense":
        return base.key
    nbits = int(ann.get("pq_nbits") or 8)
    shape = f"ivf{int(ann['nlist'])}" + (f"pq{int(ann['pq_m'])}" + (f"x{nbits}" if nbits != 8 else "")
                                         if kind == "ivfpq" else "")
    return slug(f"dense-{base.embedder.vector_key}-{shape}")


def load_array(path: Path, mmap_mode: str | None = "r", length: int | None = None) -> np.ndarray:
    """A .npy file, memory-mapped; a damaged or truncated file (or one of the wrong length) names itself."""
    try:
        array = np.load(path, mmap_mode=mmap_mode, allow_pickle=False)
    except FileNotFoundError:
        raise DataError(f"{path}: shard file missing; rebuild this index (rag.index)") from None
    except (ValueError, OSError, EOFError) as err:
        raise DataError(f"{path}: corrupt shard file ({type(err).__name__}: {err}); rebuild this index") from None
    if length is not None and len(array) != length:
        raise DataError(f"{path}: corrupt shard file ({len(array)} rows, the manifest says {length}); rebuild "
                        f"this index")
    return array


def write_string_table(folder: Path, name: str, strings: Sequence[str]) -> None:
    """Strings as one UTF-8 blob plus int64 offsets: compact, memory-mappable, binary-searchable when sorted."""
    encoded = [s.encode("utf-8") for s in strings]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    if encoded:
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
    (folder / f"{name}.bin").write_bytes(b"".join(encoded))
    np.save(folder / f"{name}.offsets.npy", offsets)


class StringTable:
    """Read side of `write_string_table`: `table[i]` and, for a sorted table, `find(s)` (binary search)."""

    def __init__(self, folder: Path, name: str, length: int | None = None):
        self.path = folder / f"{name}.bin"
        self.offsets = load_array(folder / f"{name}.offsets.npy",
                                  length=None if length is None else length + 1)
        try:
            with open(self.path, "rb") as handle:
                size = self.path.stat().st_size
                self._blob = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        except OSError as err:
            raise DataError(f"{self.path}: shard file unreadable ({err})") from None
        if int(self.offsets[-1]) != len(self._blob):
            raise DataError(f"{self.path}: corrupt shard file ({len(self._blob)} bytes, offsets say "
                            f"{int(self.offsets[-1])}); rebuild this index")

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def raw(self, i: int) -> bytes:
        return self._blob[int(self.offsets[i]):int(self.offsets[i + 1])]

    def __getitem__(self, i: int) -> str:
        return self.raw(i).decode("utf-8")

    def find(self, text: str) -> int:
        """Position of `text` in a table sorted by code point (UTF-8 byte order is code point order), or -1."""
        key = text.encode("utf-8")
        lo, hi = 0, len(self)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.raw(mid) < key:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < len(self) and self.raw(lo) == key else -1


class PassageStore:
    """A unit's passages: one JSON line each, found by byte offset in the memory-mapped file (only hits are read)."""

    def __init__(self, folder: Path, length: int):
        self.path = folder / PASSAGES
        self.offsets = load_array(folder / PASSAGE_OFFSETS, length=length + 1)
        self._map: Any = None

    def passage(self, row: int) -> Passage:
        if self._map is None:
            try:
                with open(self.path, "rb") as handle:
                    self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if int(self.offsets[-1]) \
                        else b""
            except (OSError, ValueError) as err:
                raise DataError(f"{self.path}: shard file unreadable ({err})") from None
            if len(self._map) != int(self.offsets[-1]):
                raise DataError(f"{self.path}: corrupt shard file ({len(self._map)} bytes, offsets say "
                                f"{int(self.offsets[-1])}); rebuild this index")
        start, stop = int(self.offsets[row]), int(self.offsets[row + 1])
        line = self._map[start:stop]
        try:
            data = json.loads(line)
            return Passage(data["id"], data["doc_id"], data["text"], data.get("title", ""))
        except (ValueError, KeyError, TypeError):
            raise DataError(f"{self.path}: corrupt shard file at row {row} (byte {start}); rebuild this "
                            f"index") from None

    def close(self) -> None:
        if isinstance(self._map, mmap.mmap):
            self._map.close()
        self._map = None


def top_rows(scores: np.ndarray, k: int, pid_rank: np.ndarray) -> np.ndarray:
    """Rows of the k best scores of one unit, ties broken by passage id (its rank in the unit): every row with a
    better score than the k-th, then the tied rows with the smallest ids. Best first."""
    n = len(scores)
    if k >= n:
        rows = np.arange(n)
    else:
        kth = np.partition(scores, n - k)[n - k]
        above = np.flatnonzero(scores > kth)
        tied = np.flatnonzero(scores == kth)
        if len(above) + len(tied) > k:
            tied = tied[np.argsort(pid_rank[tied], kind="stable")[: k - len(above)]]
        rows = np.concatenate([above, tied])
    order = np.lexsort((pid_rank[rows], -scores[rows].astype(np.float64)))
    return rows[order]


def cut_ties(rows: np.ndarray, scores: np.ndarray, k: int, pid_rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """faiss's ranked rows of one unit, re-ordered by (score, passage id) and cut to k. `rows` must hold every
    row tied with the k-th score (the caller searches deeper until they do)."""
    keep = rows >= 0
    rows, scores = rows[keep], scores[keep]
    order = np.lexsort((pid_rank[rows], -scores.astype(np.float64)))
    return rows[order][:k], scores[order][:k]


def read_manifest(folder: Path) -> dict[str, Any]:
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: corrupt index manifest ({type(err).__name__}); rebuild this index") from None
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise DataError(f"{path}: not a {FORMAT} v{VERSION} manifest (got {manifest.get('format')!r} "
                        f"v{manifest.get('version')!r})")
    return manifest
