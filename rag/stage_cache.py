"""Stage caches shared by every run and sweep cell: retrieval and reranking are computed once per key.

Retrieval runs at depth `cache.retrieval_depth` (at least the run's own k), so cells that differ only in k,
rerank.k, ordering or generator reuse one retrieval file and cut their own k. Reranking is cached per
(retrieval file, reranker). Files are named by their parameters; missing entries are computed and written under
a file lock so concurrent jobs never compute or write the same entry twice. Counters report work actually done.

Each stage file is an append-only JSONL journal (`<name>.jsonl`, one row per question) with an index beside it
(`<name>.jsonl.idx`, one `[offset, length, qid]` line per row), so a chunk of questions costs the rows it
appends and the rows it asks for, never the size of the file (the earlier format re-read and rewrote the whole
file for every 64-question chunk: quadratic in the questions, issue 52). A reader takes no lock: it reads the
index's new lines since its last look and `pread`s the rows it wants, verifying each (a complete line, valid
JSON, the qid asked for). A writer appends rows, then their index lines, under `<name>.jsonl.lock`; a writer
killed mid-row leaves an unterminated line that no reader returns and the next writer truncates; rows written
but not yet indexed are found by scanning the journal past the index's end (readers do this in memory, the
next writer adds them to the index). A file of the earlier format is such a journal without an index: it is
indexed on first use (in memory where the cache is read-only). Rows store passage ids and scores (base64 of
little-endian float64, exact and ~10x cheaper to write than JSON floats), with text only for retrievers whose
hits carry it; rows of the earlier `hits` format are still read. No fsync per chunk: a killed process loses
nothing, a power loss at worst loses the last rows, which are verified on read and computed again.

Why not SQLite in WAL mode (measured by `benchmarks/stage_cache.py --compare-sqlite`: 8,000 SQuAD rows of 100
hits, 2 vCPUs under load 3, docs/benchmarks.md "Stage caches"): appending them in 64-row chunks took 0.05 s here
against 0.18 s for SQLite (a transaction per chunk, synchronous=NORMAL), reading them all back chunk by chunk
0.11 s against 0.09 s, 28 MB against 34 MB; both are small beside the 2.4 s of retrieving those questions, so
speed did not decide. What did: WAL needs shared memory, so its documentation rules out network file systems,
where shared cluster caches live; reading a WAL database needs its `-shm` and `-wal` files, which a reader
without write access cannot create, so a read-only shared cache would serve readers only while a writer happens
to hold them open; and every file of the earlier format would have to be copied into a database. The journal keeps the file names, reads the earlier files as they are, and needs only the file lock
every other cache here already takes.
"""

from __future__ import annotations

import array
import base64
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from rag.core.errors import NO_SPACE_ERRNOS, disk_full
from rag.core.hashing import cap_name
from rag.core.io import atomic_write_bytes
from rag.records import Passage, ScoredPassage
from rag.rerank.base import Reranker
from rag.retrieve.base import Retriever

log = logging.getLogger(__name__)

_DECODER = json.JSONDecoder()
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # built once: `dumps` builds one per call


@dataclass
class StageCounters:
    retrieval_calls: int = 0
    rerank_calls: int = 0
    retrieval_cache_hits: int = 0
    rerank_cache_hits: int = 0


@dataclass
class StoreStats:
    """What a store read and wrote (bytes and rows): the proof that a chunk costs the chunk, not the file."""

    rows_read: int = 0
    rows_written: int = 0
    row_bytes_read: int = 0  # rows fetched by offset
    scan_bytes_read: int = 0  # journal scanned past the index's end (an unindexed file, rows of a killed writer)
    index_bytes_read: int = 0
    rebuilds: int = 0


def _pack(scores: list[float]) -> str:
    values = array.array("d", scores)
    if sys.byteorder == "big":
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii")


def _unpack(text: str) -> list[float]:
    values = array.array("d", base64.b64decode(text))
    if sys.byteorder == "big":
        values.byteswap()
    return values.tolist()


def _encode(qid: str, ranked: list[ScoredPassage], with_text: bool) -> bytes:
    """One journal line; `qid` first, so a scan reads a row's qid from its first bytes."""
    row: dict[str, Any] = {"qid": qid, "ids": [p.passage.passage_id for p in ranked],
                           "scores_f64": _pack([p.score for p in ranked])}
    if with_text:
        row.update(docs=[p.passage.doc_id for p in ranked], texts=[p.passage.text for p in ranked],
                   titles=[p.passage.title for p in ranked])
    return (_ENCODER.encode(row) + "\n").encode("utf-8")


def _decode(row: dict[str, Any], retriever: Retriever) -> list[ScoredPassage]:
    if "hits" in row:  # the earlier format: one object per hit
        ranked = []
        for rank, hit in enumerate(row["hits"], start=1):
            if "text" in hit:
                passage = Passage(hit["passage_id"], hit["doc_id"], hit["text"], hit.get("title", ""))
            else:
                passage = retriever.passage(hit["passage_id"])
            ranked.append(ScoredPassage(passage, float(hit["score"]), rank))
        return ranked
    ids, scores = row["ids"], _unpack(row["scores_f64"])
    if "texts" in row:
        passages = [Passage(i, d, t, ti) for i, d, t, ti in zip(ids, row["docs"], row["texts"], row["titles"])]
    else:
        passages = [retriever.passage(i) for i in ids]
    return [ScoredPassage(p, s, rank) for rank, (p, s) in enumerate(zip(passages, scores), start=1)]


def _qid_of(line: bytes) -> str | None:
    """The qid of a complete journal line, read from its first bytes (a row is `{"qid": ..., ...}`)."""
    if line.startswith(b'{"qid":'):
        head = line[7:1031].decode("utf-8", errors="ignore").lstrip()
        try:
            qid, _ = _DECODER.raw_decode(head)
        except ValueError:
            qid = None
        if isinstance(qid, str):
            return qid
    try:  # another key order, or a qid longer than the head
        row = json.loads(line)
    except ValueError:
        return None
    qid = row.get("qid") if isinstance(row, dict) else None
    return qid if isinstance(qid, str) else None


class RowStore:
    """One stage file: an append-only JSONL journal and its index of `[offset, length, qid]` lines.

    `refresh` and `lookup` take no lock and write nothing (a read-only cache serves readers); `sync`, `append`
    and `rebuild` must run under the file's lock. Only offsets are kept in memory, never rows.
    """

    def __init__(self, path: Path):
        self.path = path
        self.index_path = path.with_name(path.name + ".idx")
        self.stats = StoreStats()
        self.invalid: set[str] = set()  # qids whose indexed row did not verify
        self.guard = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._where: dict[str, tuple[int, int]] = {}
        self._journal_ino: int | None = None
        self._index_ino: int | None = None
        self._index_pos = 0  # bytes of the index file read (complete lines)
        self._index_covers = 0  # journal bytes the index file describes
        self._end = 0  # journal bytes accounted for (indexed or scanned)
        self._unindexed: list[tuple[str, int, int]] = []  # rows found by scanning past the index's end
        self._index_stale = False

    # -- reading, without the lock -----------------------------------------------------------------------------
    def refresh(self) -> bool:
        """Catch up with what was appended since the last look; False when there is no journal."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._reset()
            return False
        if st.st_ino != self._journal_ino or st.st_size < self._end:  # replaced or cut: start over
            self._reset()
            self._journal_ino = st.st_ino
        if not self._index_stale:
            self._read_index()
            if self._index_covers > st.st_size:  # rows appended since the stat, or an index of another journal
                st = os.stat(self.path)
            if self._index_covers > st.st_size:  # another journal's index: ignored here, rebuilt by a writer
                self._reset()
                self._journal_ino, self._index_stale = st.st_ino, True
        if st.st_size > self._end:
            self._scan()
        return True

    def _read_index(self) -> None:
        try:
            handle = open(self.index_path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            if self._index_pos:  # the index went away: forget what it said
                self._forget_index()
            return
        with handle:
            st = os.fstat(handle.fileno())
            if st.st_ino != self._index_ino or st.st_size < self._index_pos:
                if self._index_pos:
                    self._forget_index()
                self._index_ino = st.st_ino
            handle.seek(self._index_pos)
            data = handle.read()
        cut = data.rfind(b"\n") + 1  # an unterminated last line is being written (or was torn): not yet
        if not cut:
            return
        self.stats.index_bytes_read += cut
        lines = data[:cut]
        try:
            entries = json.loads(b"[" + lines[:-1].replace(b"\n", b",") + b"]")
        except ValueError:  # a damaged line: take the others
            entries = []
            for line in lines.splitlines():
                try:
                    entries.append(json.loads(line))
                except ValueError:
                    continue
        for entry in entries:
            if isinstance(entry, list) and len(entry) == 3:
                offset, length, qid = entry
                self._where[qid] = (offset, length)
                self._index_covers = max(self._index_covers, offset + length)
        self._end = max(self._end, self._index_covers)
        self._index_pos += cut
        if self._unindexed:  # rows this process scanned that a writer has indexed since
            self._unindexed = [e for e in self._unindexed if e[1] >= self._index_covers]

    def _forget_index(self) -> None:
        ino = self._journal_ino
        self._reset()
        self._journal_ino = ino

    def _scan(self) -> None:
        """Index in memory the complete rows past `_end` (an unindexed file, or rows not yet indexed)."""
        pos = start = self._end
        with open(self.path, "rb") as handle:
            handle.seek(pos)
            for line in handle:
                if not line.endswith(b"\n"):  # being written, or torn by a killed writer
                    break
                qid = _qid_of(line)
                if qid is not None:
                    self._where[qid] = (pos, len(line))
                    self._unindexed.append((qid, pos, len(line)))
                pos += len(line)
        self.stats.scan_bytes_read += pos - start
        self._end = pos

    def lookup(self, qids: Iterable[str], decode: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
        """Decoded rows of the `qids` the store holds (read by offset, in file order); a row that does not
        verify is left out and its qid put in `invalid`."""
        wanted = sorted((self._where[q], q) for q in dict.fromkeys(qids) if q in self._where)
        found: dict[str, Any] = {}
        if not wanted:
            return found
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:  # deleted since the last look: nothing to serve
            return found
        with handle:
            fd = handle.fileno()
            for (offset, length), qid in wanted:
                data = os.pread(fd, length, offset)
                self.stats.row_bytes_read += len(data)
                row = None
                if len(data) == length and data.endswith(b"\n"):
                    try:
                        row = json.loads(data)
                    except ValueError:
                        row = None
                if not isinstance(row, dict) or row.get("qid") != qid:
                    self.invalid.add(qid)
                    continue
                self.stats.rows_read += 1
                found[qid] = decode(row)
        return found

    # -- writing, under the lock -------------------------------------------------------------------------------
    def sync(self) -> None:
        """Catch up, cut what a killed writer left unterminated, and index the rows found past the index."""
        if not self.refresh():  # a new journal: an index left from a deleted one is emptied
            if os.path.exists(self.index_path) and os.path.getsize(self.index_path):
                atomic_write_bytes(self.index_path, b"")
            self._reset()
            return
        if self._index_stale:
            self.rebuild()
            return
        if os.path.getsize(self.path) > self._end:
            os.truncate(self.path, self._end)
        if os.path.exists(self.index_path) and os.path.getsize(self.index_path) > self._index_pos:
            os.truncate(self.index_path, self._index_pos)
        self._write_index([e for e in self._unindexed if e[1] >= self._index_covers])
        self._unindexed = []

    def rebuild(self) -> None:
        """Index the journal again from its start (an index that does not match its journal). The new index
        replaces the old one whole, so a reader that holds a position in the old one sees a new file."""
        self.stats.rebuilds += 1
        log.warning("stage cache %s: its index does not match the journal; indexing the journal again", self.path)
        self._reset()
        self.invalid.clear()
        try:
            self._journal_ino = os.stat(self.path).st_ino
        except FileNotFoundError:
            return
        self._scan()
        if os.path.getsize(self.path) > self._end:
            os.truncate(self.path, self._end)
        data = self._index_lines(self._unindexed)
        atomic_write_bytes(self.index_path, data)
        self._index_ino = os.stat(self.index_path).st_ino
        self._index_pos, self._index_covers, self._unindexed = len(data), self._end, []

    def append(self, rows: list[tuple[str, bytes]]) -> None:
        if not rows:
            return
        data = b"".join(line for _, line in rows)
        try:
            with open(self.path, "ab") as handle:
                offset = handle.tell()
                handle.write(data)
        except OSError as err:  # a torn last row is cut by the next writer, never read
            if err.errno in NO_SPACE_ERRNOS:
                raise disk_full(err, self.path, len(data)) from None
            raise
        entries = []
        for qid, line in rows:
            entries.append((qid, offset, len(line)))
            self._where[qid] = (offset, len(line))
            self.invalid.discard(qid)
            offset += len(line)
        self._end = offset
        self._journal_ino = os.stat(self.path).st_ino
        self.stats.rows_written += len(rows)
        self._write_index(entries)

    def _write_index(self, entries: list[tuple[str, int, int]]) -> None:
        if not entries:
            return
        data = self._index_lines(entries)
        try:
            with open(self.index_path, "ab") as handle:
                handle.write(data)
                self._index_pos = handle.tell()
            self._index_ino = os.stat(self.index_path).st_ino
        except OSError as err:  # rows without index lines are found by the next scan
            if err.errno in NO_SPACE_ERRNOS:
                raise disk_full(err, self.index_path, len(data)) from None
            raise
        self._index_covers = max(self._index_covers, *(offset + length for _, offset, length in entries))

    @staticmethod
    def _index_lines(entries: list[tuple[str, int, int]]) -> bytes:
        return "".join(f"[{offset},{length},{_ENCODER.encode(qid)}]\n" for qid, offset, length in entries
                       ).encode("utf-8")


class StageCache:
    def __init__(self, cache_dir: str | Path, enabled: bool = True):
        self.root = Path(cache_dir)
        self.enabled = enabled
        self.counters = StageCounters()
        self._stores: dict[Path, RowStore] = {}

    def store(self, path: Path) -> RowStore:
        if path not in self._stores:
            self._stores[path] = RowStore(path)
        return self._stores[path]

    def _cached(self, path: Path, qids: list[str], compute, retriever: Retriever, hit_attr: str,
                call_attr: str, with_text: bool) -> list[list[ScoredPassage]]:
        """Serve qids from `path`, computing (under a lock) only those the file lacks."""
        if not self.enabled:
            result = compute(qids)
            setattr(self.counters, call_attr, getattr(self.counters, call_attr) + len(qids))
            return result
        store = self.store(path)
        with store.guard:
            return self._serve(store, qids, compute, lambda row: _decode(row, retriever), hit_attr, call_attr,
                               with_text)

    def _serve(self, store: RowStore, qids: list[str], compute, decode, hit_attr: str, call_attr: str,
               with_text: bool) -> list[list[ScoredPassage]]:
        # without the lock: rows are verified when read, so a read-only shared cache serves every reader
        known = store.lookup(qids, decode) if store.refresh() else {}
        if all(q in known for q in qids):
            setattr(self.counters, hit_attr, getattr(self.counters, hit_attr) + len(qids))
            return [known[q] for q in qids]
        store.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(store.path) + ".lock"):
            store.sync()
            rest = [q for q in dict.fromkeys(qids) if q not in known]
            known.update(store.lookup(rest, decode))
            if store.invalid:
                store.rebuild()
                known.update(store.lookup([q for q in rest if q not in known], decode))
            missing = [q for q in rest if q not in known]
            if missing:
                fresh = compute(missing)
                store.append([(q, _encode(q, ranked, with_text)) for q, ranked in zip(missing, fresh)])
                known.update(zip(missing, fresh))
                setattr(self.counters, call_attr, getattr(self.counters, call_attr) + len(missing))
            setattr(self.counters, hit_attr, getattr(self.counters, hit_attr) + len(qids) - len(missing))
        return [known[q] for q in qids]

    def retrieve(self, retriever: Retriever, corpus_key: str, questions_key: str, qids: list[str],
                 queries: list[str], depth: int) -> list[list[ScoredPassage]]:
        path = self.root / "retrieval" / f"{cap_name(self.retrieval_name(retriever, corpus_key, questions_key, depth))}.jsonl"
        by_qid = dict(zip(qids, queries))
        return self._cached(path, qids, lambda ids: retriever.search([by_qid[i] for i in ids], depth), retriever,
                            "retrieval_cache_hits", "retrieval_calls", retriever.stores_text)

    def rerank(self, reranker: Reranker, retrieval_name: str, retriever: Retriever, qids: list[str],
               queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[ScoredPassage]]:
        if reranker.is_identity:
            return candidates
        # a chain of rerankers behind a query stage names a file longer than file systems take: capped, still unique
        path = self.root / "rerank" / f"{cap_name(f'{retrieval_name}__{reranker.key}')}.jsonl"
        by_qid = {q: (text, cands) for q, text, cands in zip(qids, queries, candidates)}

        def compute(ids: list[str]) -> list[list[ScoredPassage]]:
            return reranker.rerank([by_qid[i][0] for i in ids], [by_qid[i][1] for i in ids])

        return self._cached(path, qids, compute, retriever, "rerank_cache_hits", "rerank_calls",
                            retriever.stores_text)

    def retrieve_queries(self, retriever: Retriever, corpus_key: str, queries: list[str],
                         depth: int) -> list[list[ScoredPassage]]:
        """Ad-hoc queries (IterDRAG sub-queries), cached by the hash of their text."""
        from rag.core.hashing import stable_hash

        ids = [stable_hash(q, length=16) for q in queries]
        path = self.root / "retrieval" / f"{cap_name(f'{retriever.key}__{corpus_key}__adhoc__depth{depth}')}.jsonl"
        by_id = dict(zip(ids, queries))
        return self._cached(path, ids, lambda xs: retriever.search([by_id[i] for i in xs], depth), retriever,
                            "retrieval_cache_hits", "retrieval_calls", retriever.stores_text)

    def rank_queries(self, retriever: Retriever, reranker: Reranker, corpus_key: str, queries: list[str],
                     depth: int) -> list[list[ScoredPassage]]:
        """Ad-hoc queries retrieved (`retrieve_queries`), cut to `retriever.k` and reranked, both stages cached by
        the hash of the query text, so a rerun of a search loop or IterDRAG serves its sub-queries' lists."""
        from rag.core.hashing import stable_hash

        deep = self.retrieve_queries(retriever, corpus_key, queries, depth)
        name = f"{retriever.key}__{corpus_key}__adhoc__depth{depth}__k{retriever.k}"
        return self.rerank(reranker, name, retriever, [stable_hash(q, length=16) for q in queries], queries,
                           [r[: retriever.k] for r in deep])

    @staticmethod
    def retrieval_name(retriever: Retriever, corpus_key: str, questions_key: str, depth: int) -> str:
        return f"{retriever.key}__{corpus_key}__{questions_key}__depth{depth}"
