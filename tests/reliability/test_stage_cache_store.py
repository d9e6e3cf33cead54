"""Issue 52, item 3: stage caches that stay linear (rag/stage_cache.py).

A stage file is an append-only JSONL journal with an index beside it. These tests check that it serves what
computing serves, that two processes writing one store end with every row once, that a writer killed mid-write
leaves only complete rows to read, that files of the earlier format (whole-file JSONL, `hits` rows) are read,
and that a chunk reads and writes bytes in proportion to the chunk, not to the store.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from rag.core.hashing import cap_name, stable_hash
from rag.core.io import atomic_write_jsonl
from rag.records import Passage, ScoredPassage
from rag.retrieve.base import Retriever
from rag.stage_cache import RowStore, StageCache

PASSAGES = [Passage(f"doc{i // 3:02d}#{i % 3}", f"doc{i // 3:02d}", f"text of passage {i} \u00e9\n\"quoted\"", f"T{i // 3}")
            for i in range(60)]
DEPTH = 20
CHUNK = 64


class TableRetriever(Retriever):
    """Deterministic rankings with scores that JSON would print with 17 digits; `with_text` plays a retriever
    whose hits carry their text (no local corpus)."""

    kind = "table"

    def __init__(self, with_text: bool = False):
        super().__init__(k=5)
        self.corpus = None if with_text else SimpleNamespace(passages=PASSAGES)
        self.searched: list[str] = []

    @property
    def key(self) -> str:
        return "table"

    def search(self, queries: list[str], k: int) -> list[list[ScoredPassage]]:
        self.searched.extend(queries)
        out = []
        for query in queries:
            seed = int(stable_hash(query, 8), 16)
            order = sorted(range(len(PASSAGES)), key=lambda i: (seed * (i + 7)) % 1009)[:k]
            out.append([ScoredPassage(PASSAGES[i], math.sqrt(seed % 997 + i) / 3 - rank, rank)
                        for rank, i in enumerate(order, start=1)])
        return out


def _qids(n: int, prefix: str = "q") -> list[str]:
    return [f"{prefix}{i:05d}" for i in range(n)]  # one width: rows of one size


def _retrieve(cache: StageCache, retriever: Retriever, qids: list[str]) -> list[list[ScoredPassage]]:
    out = []
    for start in range(0, len(qids), CHUNK):
        chunk = qids[start: start + CHUNK]
        out.extend(cache.retrieve(retriever, "corpus", "questions", chunk, [f"query {q}" for q in chunk], DEPTH))
    return out


def _flat(lists: list[list[ScoredPassage]]) -> list[list[tuple]]:
    return [[(p.passage.passage_id, p.passage.doc_id, p.passage.text, p.passage.title, p.score, p.rank)
             for p in ranked] for ranked in lists]


def _journal(root: Path) -> Path:
    [path] = (root / "retrieval").glob("*.jsonl")
    return path


def _journal_qids(path: Path) -> list[str]:
    return [json.loads(line)["qid"] for line in path.read_bytes().splitlines()]


@pytest.mark.parametrize("with_text", [False, True])
def test_served_rows_equal_computed_ones(tmp_path, with_text):
    retriever = TableRetriever(with_text)
    qids = _qids(150)
    direct = retriever.search([f"query {q}" for q in qids], DEPTH)
    cache = StageCache(tmp_path)
    first = _retrieve(cache, retriever, qids)
    assert _flat(first) == _flat(direct)
    assert cache.counters.retrieval_calls == 150 and cache.counters.retrieval_cache_hits == 0
    # the same process, known and new qids mixed, one repeated: only the new ones are computed
    mixed = ["q00003", "q00149", "new1", "q00003", "new2"]
    retriever.searched.clear()
    again = cache.retrieve(retriever, "corpus", "questions", mixed, [f"query {q}" for q in mixed], DEPTH)
    assert retriever.searched == ["query new1", "query new2"]
    assert _flat(again) == _flat(retriever.search([f"query {q}" for q in mixed], DEPTH))
    # a fresh process: everything from the store, exactly as computed (scores to the last bit)
    fresh = StageCache(tmp_path)
    retriever.searched.clear()
    assert _flat(_retrieve(fresh, retriever, qids)) == _flat(direct)
    assert retriever.searched == [] and fresh.counters.retrieval_cache_hits == 150
    assert sorted(_journal_qids(_journal(tmp_path))) == sorted([*qids, "new1", "new2"])


def _writer(root: str, qids: list[str], out: str) -> None:
    cache = StageCache(root)
    _retrieve(cache, TableRetriever(), qids)
    Path(out).write_text(json.dumps(cache.counters.retrieval_calls))


def test_two_processes_write_one_store(tmp_path):
    qids = _qids(640)
    ctx = multiprocessing.get_context("spawn")
    jobs = [ctx.Process(target=_writer, args=(str(tmp_path), order, str(tmp_path / f"calls{i}.json")))
            for i, order in enumerate((qids, qids[::-1]))]
    for job in jobs:
        job.start()
    for job in jobs:
        job.join(120)
        assert job.exitcode == 0
    calls = [json.loads((tmp_path / f"calls{i}.json").read_text()) for i in range(2)]
    assert sum(calls) == len(qids)  # each row computed once, by whichever process got there first
    journal = _journal(tmp_path)
    assert sorted(_journal_qids(journal)) == sorted(qids)  # every row once
    index = [json.loads(line) for line in journal.with_name(journal.name + ".idx").read_text().splitlines()]
    assert sorted(qid for _, _, qid in index) == sorted(qids)
    retriever = TableRetriever()
    direct = _flat(retriever.search([f"query {q}" for q in qids], DEPTH))
    retriever.searched.clear()
    assert _flat(_retrieve(StageCache(tmp_path), retriever, qids)) == direct
    assert retriever.searched == []


def _killed_writer(root: str, when: str) -> None:
    """Writes one chunk, then dies inside the second: mid-row, or after the rows and before their index."""
    cache = StageCache(root)
    _retrieve(cache, TableRetriever(), _qids(CHUNK, "a"))

    def dying_append(self: RowStore, rows: list[tuple[str, bytes]]) -> None:
        data = b"".join(line for _, line in rows)
        with open(self.path, "ab") as handle:
            handle.write(data[: len(data) // 2 + 7] if when == "mid-row" else data)
        os._exit(3)

    RowStore.append = dying_append
    _retrieve(cache, TableRetriever(), _qids(CHUNK, "b"))


@pytest.mark.parametrize("when", ["mid-row", "before-index"])
def test_killed_writer_leaves_only_complete_rows(tmp_path, when):
    ctx = multiprocessing.get_context("spawn")
    job = ctx.Process(target=_killed_writer, args=(str(tmp_path), when))
    job.start()
    job.join(120)
    assert job.exitcode == 3
    journal = _journal(tmp_path)
    assert journal.read_bytes().endswith(b"\n") == (when == "before-index")
    retriever = TableRetriever()
    everything = _qids(CHUNK, "a") + _qids(CHUNK, "b")
    direct = {q: r for q, r in zip(everything, _flat(retriever.search([f"query {q}" for q in everything], DEPTH)))}

    whole_lines = journal.read_bytes().split(b"\n")[:-1]
    complete = [json.loads(line)["qid"] for line in whole_lines]
    assert complete[:CHUNK] == _qids(CHUNK, "a")
    assert len(complete) < 2 * CHUNK if when == "mid-row" else len(complete) == 2 * CHUNK

    reader = RowStore(journal)  # a reader takes no lock and writes nothing
    assert reader.refresh()
    served = reader.lookup(everything, lambda row: row["qid"])
    assert sorted(served) == sorted(complete) and not reader.invalid  # never the torn row

    cache = StageCache(tmp_path)  # the next writer cuts the torn row and indexes the unindexed ones
    retriever.searched.clear()
    got = _retrieve(cache, retriever, everything)
    assert [direct[q] for q in everything] == _flat(got)
    assert sorted(retriever.searched) == sorted(f"query {q}" for q in everything if q not in complete)
    assert sorted(_journal_qids(journal)) == sorted(everything)  # whole lines only, every row once


def test_earlier_jsonl_files_are_read(tmp_path):
    """A file of the earlier format (whole-file JSONL, one object per hit) serves as it is, without a lock or an
    index; its first write appends new-format rows and indexes the old ones."""
    retriever = TableRetriever()
    qids = _qids(100)
    direct = retriever.search([f"query {q}" for q in qids], DEPTH)
    name = StageCache.retrieval_name(retriever, "corpus", "questions", DEPTH)
    path = tmp_path / "retrieval" / f"{cap_name(name)}.jsonl"
    rows = []
    for qid, ranked in zip(qids, direct):  # as the earlier `_to_rows`: text only where a hit carries it
        hits = [{"passage_id": p.passage.passage_id, "doc_id": p.passage.doc_id, "score": p.score}
                for p in ranked]
        if qid == "q00007":
            for hit, p in zip(hits, ranked):
                hit.update(text=p.passage.text, title=p.passage.title)
        rows.append({"qid": qid, "hits": hits})
    atomic_write_jsonl(path, rows)
    before = sorted(p.name for p in path.parent.iterdir())
    cache = StageCache(tmp_path)
    retriever.searched.clear()
    assert _flat(_retrieve(cache, retriever, qids)) == _flat(direct)
    assert retriever.searched == [] and cache.counters.retrieval_cache_hits == 100
    assert sorted(p.name for p in path.parent.iterdir()) == before  # a reader wrote nothing

    _retrieve(cache, retriever, _qids(10, "new"))
    assert retriever.searched == [f"query {q}" for q in _qids(10, "new")]
    index = path.with_name(path.name + ".idx").read_text().splitlines()
    assert len(index) == 110  # the old rows were indexed with the first write
    fresh = StageCache(tmp_path)
    retriever.searched.clear()
    assert _flat(_retrieve(fresh, retriever, qids)) == _flat(direct)
    assert retriever.searched == []
    assert fresh.store(path).stats.scan_bytes_read == 0  # found by the index, not by reading the journal


def test_an_index_of_another_journal_is_rebuilt(tmp_path):
    retriever = TableRetriever()
    _retrieve(StageCache(tmp_path), retriever, _qids(50))
    journal = _journal(tmp_path)
    index = journal.with_name(journal.name + ".idx")
    stale = index.read_bytes()
    journal.unlink()  # the journal deleted by hand, its index left: a new journal starts a new index
    _retrieve(StageCache(tmp_path), retriever, _qids(50, "x"))
    assert len(index.read_text().splitlines()) == 50
    index.write_bytes(stale + index.read_bytes())  # the old index put back in front
    cache = StageCache(tmp_path)
    both = _qids(50, "x") + _qids(50)
    direct = _flat(retriever.search([f"query {q}" for q in both], DEPTH))
    retriever.searched.clear()
    assert _flat(_retrieve(cache, retriever, both)) == direct
    assert retriever.searched[:50] == [f"query {q}" for q in _qids(50)]  # the q rows are gone: computed again
    assert cache.store(journal).stats.rebuilds == 1
    assert sorted(_journal_qids(journal)) == sorted(both)


def _chunk_cost(tmp_path: Path, stored: int) -> dict[str, int]:
    """Bytes a chunk of 64 known and 64 new questions reads and writes, in a store of `stored` rows, from a
    process that has looked at the store before (a run's second chunk) and from a fresh one."""
    root = tmp_path / str(stored)
    retriever = TableRetriever()
    cache = StageCache(root)
    _retrieve(cache, retriever, _qids(stored))
    journal = _journal(root)
    store = cache.store(journal)
    inode, size = journal.stat().st_ino, journal.stat().st_size
    before = dict(vars(store.stats))
    known, new = _qids(stored)[:: stored // CHUNK][:CHUNK], _qids(CHUNK, "new")
    _retrieve(cache, retriever, known + new)
    after = vars(store.stats)
    assert journal.stat().st_ino == inode  # appended to, never rewritten
    fresh = StageCache(root)
    _retrieve(fresh, retriever, known + _qids(CHUNK, "new"))
    cold = vars(fresh.store(journal).stats)
    return {"grown": journal.stat().st_size - size, "read": after["row_bytes_read"] - before["row_bytes_read"],
            "scanned": after["scan_bytes_read"] + after["index_bytes_read"] - before["scan_bytes_read"]
            - before["index_bytes_read"],
            "rows_read": after["rows_read"] - before["rows_read"],
            "rows_written": after["rows_written"] - before["rows_written"],
            "cold_rows_read": cold["rows_read"], "cold_row_bytes": cold["row_bytes_read"],
            "cold_scan": cold["scan_bytes_read"], "cold_index_per_row": cold["index_bytes_read"] // (stored + CHUNK)}


def test_a_chunk_costs_the_chunk_not_the_store(tmp_path):
    small, large = _chunk_cost(tmp_path, 128), _chunk_cost(tmp_path, 2048)
    for cost in (small, large):
        assert cost["rows_read"] == CHUNK and cost["rows_written"] == CHUNK and cost["cold_rows_read"] == 2 * CHUNK
        assert cost["cold_scan"] == 0
    # the same chunk costs the same bytes in a store 16 times larger: rows read, rows appended, index lines
    assert large["read"] == small["read"] and large["grown"] == small["grown"]
    assert large["cold_row_bytes"] == small["cold_row_bytes"]
    row = large["grown"] / CHUNK
    assert large["scanned"] < 2 * CHUNK * 40 < row * CHUNK  # only the new index lines, tens of bytes each
    assert large["cold_index_per_row"] < 40  # a fresh process reads the index once: tens of bytes per row


def test_capped_names_leave_room_for_the_index_and_the_lock(tmp_path):
    retriever = TableRetriever()
    cache = StageCache(tmp_path)
    cache.retrieve(retriever, "c" * 300, "questions", ["q1"], ["query q1"], DEPTH)
    names = [p.name for p in (tmp_path / "retrieval").iterdir()]
    assert all(len(n.encode()) <= 255 for n in names)
    assert {n.rsplit(".jsonl", 1)[1] for n in names} >= {"", ".idx"}
