"""BM25 index build: our BM25Retriever.prepare vs plain bm25s with the same tokenizer settings, in one run.

Usage: `python benchmarks/bm25_build_bench.py [--repeats 2] [--profile] [--out f.json]` (RAG_DATA_DIR set).
Both sides index the same passages (LiveRAG FineWeb sample, 512-word chunks, loaded once beforehand):
plain = `bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer("english"))` + `BM25(k1=1.5, b=0.75,
method="lucene").index(...)`; ours = `BM25Retriever().prepare(corpus, fresh cache dir)`, which also saves the
index and reloads it. The best of `--repeats` runs of each is reported with the load average.
`--profile` prints the top functions of one `prepare` under cProfile.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag.data.corpus import JsonlCorpus  # noqa: E402
from rag.retrieve.bm25 import BM25Retriever  # noqa: E402

DATA = os.environ.get("RAG_DATA_DIR", str(ROOT.parent / "shared" / "data"))


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def plain_bm25s(texts: list[str]) -> None:
    import bm25s
    import Stemmer

    tokens = bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), show_progress=False)
    bm25s.BM25(k1=1.5, b=0.75, method="lucene").index(tokens, show_progress=False)


def ours(corpus) -> None:
    BM25Retriever().prepare(corpus, tempfile.mkdtemp(prefix="bm25-bench-"))


def best_of(fn, repeats: int) -> tuple[float, str]:
    times, before = [], load_average()
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), before


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    corpus = JsonlCorpus("liverag_dm/fineweb_docs.jsonl.gz", DATA, chunk_words=512, name="fineweb_docs")
    start = time.perf_counter()
    texts = [p.text for p in corpus.passages]
    load_s = time.perf_counter() - start
    results: dict = {"passages": len(texts), "corpus_load_and_chunk_s": round(load_s, 2)}
    for name, fn in (("plain_bm25s", lambda: plain_bm25s(texts)), ("ours_prepare", lambda: ours(corpus)),
                     ("plain_bm25s_again", lambda: plain_bm25s(texts))):
        seconds, before = best_of(fn, args.repeats)
        results[name] = {"seconds": round(seconds, 2), "load_before": before, "load_after": load_average()}
        print(name, results[name], flush=True)
    plain = min(results["plain_bm25s"]["seconds"], results["plain_bm25s_again"]["seconds"])
    results["ours_over_plain"] = round(results["ours_prepare"]["seconds"] / plain, 3)
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(ours, corpus)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    print(json.dumps(results, indent=2))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
