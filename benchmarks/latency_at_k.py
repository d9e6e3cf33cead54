"""Runtime per question against k: each retriever for k = 1..600, each reranker for 1..300 candidates (p50/p95).

The data behind RAGtifier's Fig. 5, written as JSON that `python -m rag.report` plots (put the file in a sweep
folder as `latency_at_k*.json`, or pass `--latency FILE`).

    python benchmarks/latency_at_k.py [--questions 30] [--rerank-questions 5] [--corpus-docs 300] [--out FILE]

Components are built from the project's own configs (`conf/retriever/*.yaml`, `conf/rerank/*.yaml`), so a
measured retriever is exactly what `retriever=<name>` runs. Here: bm25, dense and the dense reranker over a
sample of the LiveRAG FineWeb corpus (the first `--corpus-docs` documents, indexed once into the cache). Where
their environment exists: pinecone (PINECONE_API_KEY) and opensearch (OPENSEARCH_HOST) on their own full
indexes, and the BGE reranker on a GPU (or with --with-bge on CPU); otherwise each is skipped with the reason
printed and written to the JSON. Each question is timed alone (one query per call), after one warm-up call.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hydra import compose, initialize_config_dir  # noqa: E402
from hydra.utils import instantiate  # noqa: E402

from rag.core.io import atomic_write_json, iter_jsonl  # noqa: E402
from rag.data.corpus import JsonlCorpus  # noqa: E402
from rag.data.questions import DataMorganaQA  # noqa: E402

DATA = os.environ.get("RAG_DATA_DIR", str(ROOT.parent / "shared" / "data"))
KS = [1, 10, 50, 100, 200, 300, 400, 500, 600]
CANDIDATES = [1, 10, 50, 100, 200, 300]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def component(group: str, name: str, cache_dir: Path):
    """A retriever or reranker built from its YAML, exactly as `python -m rag.main group=name` builds it."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"{group}={name}", f"paths.data_dir={DATA}",
                                                       f"paths.cache_dir={cache_dir}"])
    return instantiate(cfg[group])


def corpus_sample(n_docs: int, cache_dir: Path) -> JsonlCorpus:
    """The first n documents of the FineWeb sample as their own corpus file (indexed once, then cached)."""
    path = cache_dir / "bench" / f"fineweb_docs_first{n_docs}.jsonl.gz"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with gzip.open(tmp, "wt", encoding="utf-8") as out:
            for i, row in enumerate(iter_jsonl(Path(DATA) / "liverag_dm" / "fineweb_docs.jsonl.gz")):
                if i >= n_docs:
                    break
                out.write(json.dumps(row) + "\n")
        tmp.replace(path)
    return JsonlCorpus(str(path), name=f"fineweb_first{n_docs}")


def time_calls(call, queries: list[str]) -> list[float]:
    call(queries[0])  # warm-up (lazy loads, caches)
    out = []
    for q in queries:
        start = time.perf_counter()
        call(q)
        out.append(time.perf_counter() - start)
    return out


def curve(times_by_k: dict[int, list[float]], x: str, n: int, **extra) -> dict:
    ks = sorted(times_by_k)
    return {x: ks, "p50_s": [round(statistics.median(times_by_k[k]), 5) for k in ks],
            "p95_s": [round(percentile(times_by_k[k], 0.95), 5) for k in ks],
            "mean_s": [round(statistics.fmean(times_by_k[k]), 5) for k in ks], "n_questions": n, **extra}


def machine() -> dict:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "system": platform.system()}


def gpu_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=30, help="LiveRAG dev questions timed per k")
    parser.add_argument("--rerank-questions", type=int, default=5, help="questions timed per candidate count")
    parser.add_argument("--corpus-docs", type=int, default=300, help="FineWeb documents in the local indexes")
    parser.add_argument("--ks", default=",".join(map(str, KS)))
    parser.add_argument("--candidates", default=",".join(map(str, CANDIDATES)))
    parser.add_argument("--retrievers", default="bm25,dense,pinecone,opensearch")
    parser.add_argument("--rerankers", default="dense,bge")
    parser.add_argument("--with-bge", action="store_true", help="run the BGE reranker without a GPU too")
    parser.add_argument("--cache-dir", type=Path, default=Path(os.environ.get("RAG_CACHE_DIR", ROOT / "cache")))
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("RAG_OUTPUT_DIR", ROOT / "outputs"))
                        / "benchmarks" / "latency_at_k.json")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    ks = [int(k) for k in args.ks.split(",")]
    candidates = [int(c) for c in args.candidates.split(",")]
    load_before = os.getloadavg()
    questions = DataMorganaQA("liverag_dm/dev_qa.tsv", data_dir=DATA).load()
    queries = [q.question for q in questions[: args.questions]]
    corpus = corpus_sample(args.corpus_docs, args.cache_dir)
    result: dict = {"benchmark": "latency_at_k", "command": "python benchmarks/latency_at_k.py " + " ".join(sys.argv[1:]),
                    "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": machine(),
                    "n_questions": len(queries), "corpus": {"documents": args.corpus_docs,
                                                            "passages": len(corpus.passages)},
                    "retrievers": {}, "rerankers": {}, "skipped": {},
                    "load": f"1-min load average {load_before[0]:.2f} at the start ({os.cpu_count()} cores)"}
    needs = {"pinecone": "PINECONE_API_KEY", "opensearch": "OPENSEARCH_HOST"}
    bm25 = None
    for name in args.retrievers.split(","):
        if name in needs and not os.environ.get(needs[name]):
            result["skipped"][name] = f"{needs[name]} not set"
            print(f"skip {name}: {needs[name]} not set", flush=True)
            continue
        retriever = component("retriever", name, args.cache_dir)
        remote = name in needs
        start = time.perf_counter()
        retriever.prepare(None if remote else corpus, args.cache_dir)
        prepare_s = time.perf_counter() - start
        times = {k: time_calls(lambda q, k=k, r=retriever: r.search([q], k), queries) for k in ks}
        result["retrievers"][name] = curve(times, "k", len(queries), index_prepare_s=round(prepare_s, 2),
                                           note="full remote index" if remote else
                                           f"local index over {len(corpus.passages)} passages")
        print(f"{name}: " + ", ".join(f"k={k} p50 {result['retrievers'][name]['p50_s'][i] * 1000:.1f} ms"
                                      for i, k in enumerate(ks)), flush=True)
        atomic_write_json(args.out, result)  # partial results survive an interrupted run
        if name == "bm25":
            bm25 = retriever
    if bm25 is None:
        bm25 = component("retriever", "bm25", args.cache_dir)
        bm25.prepare(corpus, args.cache_dir)
    rerank_queries = queries[: args.rerank_questions]
    pools = [bm25.search([q], max(candidates))[0] for q in rerank_queries]
    for name in args.rerankers.split(","):
        if name in ("bge", "bge_m3") and not (gpu_available() or args.with_bge):
            result["skipped"][name] = "no GPU (pass --with-bge to time it on CPU)"
            print(f"skip {name}: no GPU", flush=True)
            continue
        reranker = component("rerank", name, args.cache_dir)
        by_q = dict(zip(rerank_queries, pools))
        times = {c: time_calls(lambda q, c=c, r=reranker, b=by_q: r.rerank([q], [b[q][:c]]), rerank_queries)
                 for c in candidates}
        result["rerankers"][name] = curve(times, "candidates", len(rerank_queries),
                                          note="candidates from bm25 over the local sample")
        print(f"rerank {name}: " + ", ".join(f"{c} cand p50 {result['rerankers'][name]['p50_s'][i]:.3f} s"
                                             for i, c in enumerate(candidates)), flush=True)
        atomic_write_json(args.out, result)
    load_after = os.getloadavg()
    result["load"] = (f"1-min load average {load_before[0]:.2f} before, {load_after[0]:.2f} after "
                      f"({os.cpu_count()} cores)")
    atomic_write_json(args.out, result)
    print(f"written {args.out}; load: {result['load']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
