"""Stage caches that stay linear (issue 52, item 3): retrieval through `StageCache` against the same retrieval in
one chunk without a cache.

Usage: `RAG_DATA_DIR=../shared/data python benchmarks/stage_cache.py [--sizes 500 2000 8000] [--chunk 64]
[--depth 100] [--repeats 5] [--old-up-to 2000] [--compare-sqlite] [--out f.json] 2>/dev/null` (stderr: bm25s's
progress bars).

The first n SQuAD v1.1 dev questions (10,570) over its 2,067 paragraphs (2,069 passages of at most 512 words),
BM25 (the index is built once into a temporary cache). For each n, in rounds (one of each, in this order, so that
a burst of load on a shared machine falls on every column alike; each figure is the best of `--repeats` rounds):
- one chunk: `BM25Retriever.search(all n questions, depth)`, no cache;
- chunked: the same in chunks of `--chunk` (the pipeline's `generation.chunk_size`), no cache;
- fresh: a new `StageCache` over an empty folder, called chunk by chunk as a run calls it: every row computed
  and appended;
- warm: a new `StageCache` (a rerun's new process) over the folder the fresh pass filled: every row served.
`--old-up-to N` also times the earlier implementation (rag/stage_cache.py at `--old-ref`, which rewrote the whole
file per chunk), fresh and warm once, for n <= N. The load average is read before each size.
`--compare-sqlite` times the journal store against SQLite in WAL mode on the same encoded rows of the largest size
(appending chunk by chunk under the lock; then reading every row back chunk by chunk from a new process's view).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from filelock import FileLock  # noqa: E402

from rag.data.corpus import SquadCorpus  # noqa: E402
from rag.data.questions import SquadQuestions  # noqa: E402
from rag.retrieve.bm25 import BM25Retriever  # noqa: E402
from rag.stage_cache import RowStore, StageCache, _encode  # noqa: E402

DATA = os.environ.get("RAG_DATA_DIR", str(ROOT.parent / "shared" / "data"))
SQUAD = "squad/dev-v1.1.json.gz"
#: the last rag/stage_cache.py that rewrote the whole file per chunk
OLD_REF = "1018eeff4a3906abea079b6479ecd615871d2a42"


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def old_stage_cache(ref: str) -> type:
    source = subprocess.run(["git", "show", f"{ref}:rag/stage_cache.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    module = types.ModuleType("old_stage_cache")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, "old_stage_cache.py", "exec"), module.__dict__)  # noqa: S102 - our own file at a commit
    return module.StageCache


def chunked(cache, retriever, qids: list[str], texts: list[str], depth: int, chunk: int) -> float:
    start = time.perf_counter()
    for at in range(0, len(qids), chunk):
        cache.retrieve(retriever, "squad_v1", "bench", qids[at: at + chunk], texts[at: at + chunk], depth)
    return time.perf_counter() - start


def measure(cache_class, retriever, qids, texts, depth, chunk, repeats, work: Path,
            baselines: bool = True) -> dict[str, float]:
    """Best of `repeats` rounds, each round one chunk, chunked without a cache, fresh and warm in a row (so that a
    burst of load on the shared machine falls on every column alike)."""
    times: dict[str, list[float]] = {"one_chunk_s": [], "chunked_s": [], "fresh_s": [], "warm_s": []}
    size = 0
    for _ in range(repeats):
        if baselines:
            times["one_chunk_s"].append(_timed(retriever.search, texts, depth))
            times["chunked_s"].append(chunked(_NoCache(), retriever, qids, texts, depth, chunk))
        folder = Path(tempfile.mkdtemp(dir=work, prefix="stage-"))
        times["fresh_s"].append(chunked(cache_class(folder), retriever, qids, texts, depth, chunk))
        times["warm_s"].append(chunked(cache_class(folder), retriever, qids, texts, depth, chunk))
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        shutil.rmtree(folder)
    return {k: round(min(v), 3) for k, v in times.items() if v} | {"store_mb": round(size / 1e6, 1)}


class _NoCache:
    """The pipeline's chunked calls straight to the retriever."""

    def retrieve(self, retriever, corpus_key, questions_key, qids, texts, depth):
        return retriever.search(texts, depth)


def compare_sqlite(lines: list[tuple[str, bytes]], chunk: int, work: Path) -> dict[str, float]:
    """Append every row chunk by chunk, then read every row back chunk by chunk from a new view: journal vs WAL."""
    out = {}
    path = work / "compare.jsonl"
    store = RowStore(path)
    start = time.perf_counter()
    for at in range(0, len(lines), chunk):
        with FileLock(str(path) + ".lock"):
            store.sync()
            store.append(lines[at: at + chunk])
    out["journal_append_s"] = time.perf_counter() - start
    reader = RowStore(path)
    start = time.perf_counter()
    for at in range(0, len(lines), chunk):
        reader.refresh()
        reader.lookup([q for q, _ in lines[at: at + chunk]], lambda row: row)
    out["journal_read_s"] = time.perf_counter() - start

    db = work / "compare.sqlite"
    con = sqlite3.connect(db, timeout=60, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute("CREATE TABLE IF NOT EXISTS rows (qid TEXT PRIMARY KEY, row TEXT NOT NULL)")
    start = time.perf_counter()
    for at in range(0, len(lines), chunk):
        part = lines[at: at + chunk]
        con.execute("BEGIN IMMEDIATE")
        marks = ",".join("?" * len(part))
        have = {q for (q,) in con.execute(f"SELECT qid FROM rows WHERE qid IN ({marks})", [q for q, _ in part])}
        con.executemany("INSERT OR IGNORE INTO rows VALUES (?, ?)",
                        [(q, line.decode("utf-8")) for q, line in part if q not in have])
        con.execute("COMMIT")
    out["sqlite_append_s"] = time.perf_counter() - start
    con.close()
    con = sqlite3.connect(db, timeout=60)
    start = time.perf_counter()
    for at in range(0, len(lines), chunk):
        part = [q for q, _ in lines[at: at + chunk]]
        marks = ",".join("?" * len(part))
        for _, row in con.execute(f"SELECT qid, row FROM rows WHERE qid IN ({marks})", part):
            json.loads(row)
    out["sqlite_read_s"] = time.perf_counter() - start
    con.close()
    out["journal_mb"] = (path.stat().st_size + path.with_name(path.name + ".idx").stat().st_size) / 1e6
    out["sqlite_mb"] = sum(p.stat().st_size for p in work.glob("compare.sqlite*")) / 1e6
    return {k: round(v, 3) for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 2000, 8000])
    parser.add_argument("--chunk", type=int, default=64)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--old-up-to", type=int, default=2000)
    parser.add_argument("--old-ref", default=OLD_REF)
    parser.add_argument("--compare-sqlite", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="stage-cache-bench-"))
    corpus = SquadCorpus(SQUAD, DATA, name="squad_v1", chunk_words=512)
    questions = SquadQuestions(SQUAD, DATA).load()
    retriever = BM25Retriever(k=args.depth)
    retriever.prepare(corpus, work / "index-cache")
    old = old_stage_cache(args.old_ref) if args.old_up_to else None
    print(f"{len(corpus.passages)} passages, {len(questions)} questions, depth {args.depth}, chunk {args.chunk}",
          flush=True)
    results: dict = {"passages": len(corpus.passages), "depth": args.depth, "chunk": args.chunk, "sizes": {}}
    for n in args.sizes:
        if n > len(questions):
            raise SystemExit(f"SQuAD v1.1 dev has {len(questions)} questions, fewer than {n}")
        qids, texts = [q.id for q in questions[:n]], [q.question for q in questions[:n]]
        row: dict = {"load_before": load_average()}
        row.update(measure(StageCache, retriever, qids, texts, args.depth, args.chunk, args.repeats, work))
        for name in ("chunked", "fresh", "warm"):
            row[f"{name}_x"] = round(row[f"{name}_s"] / row["one_chunk_s"], 2)
        if old is not None and n <= args.old_up_to:
            before = measure(old, retriever, qids, texts, args.depth, args.chunk, 1, work, baselines=False)
            row.update(old_fresh_s=before["fresh_s"], old_warm_s=before["warm_s"])
        row["load_after"] = load_average()
        results["sizes"][n] = row
        print(n, json.dumps(row), flush=True)
    if args.compare_sqlite:
        n = max(args.sizes)
        ranked = retriever.search([q.question for q in questions[:n]], args.depth)
        lines = [(q.id, _encode(q.id, r, retriever.stores_text)) for q, r in zip(questions[:n], ranked)]
        results["sqlite_vs_journal"] = {"rows": n, **compare_sqlite(lines, args.chunk, work)}
        print("sqlite vs journal", json.dumps(results["sqlite_vs_journal"]), flush=True)
    shutil.rmtree(work)

    print("\n| questions | one chunk, no cache | chunked, no cache | fresh cache | warm cache | fresh / one chunk "
          "| warm / one chunk | earlier code: fresh / warm | store | load before |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n, row in results["sizes"].items():
        earlier = f"{row['old_fresh_s']} s / {row['old_warm_s']} s" if "old_fresh_s" in row else "not run"
        print(f"| {n:,} | {row['one_chunk_s']} s | {row['chunked_s']} s | {row['fresh_s']} s | {row['warm_s']} s "
              f"| {row['fresh_x']}x | {row['warm_x']}x | {earlier} | {row['store_mb']} MB | {row['load_before']} |")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


def _timed(fn, *fn_args) -> float:
    start = time.perf_counter()
    fn(*fn_args)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
