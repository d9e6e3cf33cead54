"""A part's passages on disk, written as they stream by: text lines with byte offsets, ids, and where each came from.

The text store is what the sharded searcher reads hits from (so an index of a corpus too large for memory still
returns text); the ids' ranks break ties by passage id; their 64-bit hashes let the merge find a passage id that
two shards both hold without a set of every id in memory; the sources (file, row) name such a duplicate's rows.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np

from rag.index.sources import SourcePassage
from rag.retrieve.shards import (
    PASSAGE_OFFSETS,
    PASSAGES,
    PID_HASH,
    PID_RANK,
    PIDS,
    SOURCES,
    write_string_table,
)

#: files of a part that the index folder takes over unchanged (hard links where the filesystem allows); the
#: unit's `pid_rank.npy` is written by the merge: ranks among every passage id of the index, not the part's
STORE_FILES = (PASSAGES, PASSAGE_OFFSETS, f"{PIDS}.bin", f"{PIDS}.offsets.npy")


def pid_hash(passage_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(passage_id.encode("utf-8"), digest_size=8).digest(), "little")


class PartWriter:
    """Collects one part's passages; `close()` writes the id tables next to the streamed text. Ingestion into a
    service keeps the ids only (`with_text=False`): the service holds the text."""

    def __init__(self, folder: Path, with_text: bool = True):
        self.folder = folder
        self._text = open(folder / PASSAGES, "wb") if with_text else None  # noqa: SIM115 - closed by close()
        self.offsets = [0]
        self.pids: list[str] = []
        self.sources: list[tuple[int, int]] = []

    def add(self, item: SourcePassage) -> None:
        p = item.passage
        if self._text is not None:
            line = (json.dumps({"id": p.passage_id, "doc_id": p.doc_id, "text": p.text, "title": p.title},
                               ensure_ascii=False) + "\n").encode("utf-8")
            self._text.write(line)
            self.offsets.append(self.offsets[-1] + len(line))
        self.pids.append(p.passage_id)
        self.sources.append((item.file_index, item.row))

    def __len__(self) -> int:
        return len(self.pids)

    def close(self) -> int:
        n = len(self.pids)
        if self._text is not None:
            self._text.flush()
            os.fsync(self._text.fileno())
            self._text.close()
            np.save(self.folder / PASSAGE_OFFSETS, np.asarray(self.offsets, dtype=np.int64))
        write_string_table(self.folder, PIDS, self.pids)
        rank = np.empty(n, dtype=np.int64)
        if n:
            rank[np.argsort(np.asarray(self.pids), kind="stable")] = np.arange(n)
        np.save(self.folder / PID_RANK, rank)
        np.save(self.folder / PID_HASH, np.fromiter((pid_hash(p) for p in self.pids), dtype=np.uint64, count=n))
        np.save(self.folder / SOURCES, np.asarray(self.sources, dtype=np.int64).reshape(n, 2))
        return n


def link_files(source: Path, target: Path, names: tuple[str, ...]) -> None:
    """Hard-link (else copy) files into an index folder: the build folder keeps its parts for a rerun."""
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        try:
            os.link(source / name, target / name)
        except OSError:
            shutil.copy2(source / name, target / name)
