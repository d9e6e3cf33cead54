"""Sweep benchmarks: launcher overhead per cell, cache hit ratios of a repeated sweep, sweep time vs cells.

    python benchmarks/sweep_bench.py overhead --launchers basic local slurm [--cells 4]
    python benchmarks/sweep_bench.py cache [--questions 3]
    python benchmarks/sweep_bench.py scaling --cells 1 2 4 8 [--questions 3]
    ... [--out results.json]

overhead: a sweep of cheap cells (LLM answers already cached) under each launcher; per cell, from the sweep's
launch (Hydra's "Launching"/"Submitit ... sweep output dir" log line) to the submitit job starting (scheduling +
process start) and to the pipeline starting on its questions (`rag.pipeline` "dataset ..." log line, after
imports, Hydra composition and component construction). slurm needs a running controller (.ci/slurm/setup.sh).
cache: the same 2x2 sweep run twice on one cache; hit ratio per stage = hits / (hits + calls), summed over cells.
scaling: sweeps whose cells differ only in generator.temperature (retrieval shared, every LLM call new), run
with the in-process basic launcher; total wall time per number of cells.

RAG_DATA_DIR must point at the shared data folder. Figures go to docs/benchmarks.md by hand, with the machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DATA = os.environ.get("RAG_DATA_DIR", str(ROOT.parent / "shared" / "data"))
CHEAP = ["dataset=hotpotqa", "retriever.k=5", "generator.max_tokens=8", "logger=none"]
SLURM_CPU = ["hydra.launcher.gpus_per_node=0", "hydra.launcher.mem_gb=2", "hydra.launcher.cpus_per_task=1",
             "hydra.launcher.timeout_min=30"]
TS = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")
SUBMITIT_TS = re.compile(r"submitit INFO \((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\) - Starting with JobEnvironment")


def _ts(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def _sweep(args: list[str], cache: Path, out: Path) -> tuple[float, Path, str]:
    env = {**os.environ, "RAG_DATA_DIR": DATA, "RAG_CACHE_DIR": str(cache), "RAG_OUTPUT_DIR": str(out),
           "WANDB_MODE": "offline"}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rag.main", "-m", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=3600)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    sweeps = sorted((out / "multirun").glob("*/*"))
    return wall, sweeps[-1], proc.stdout + proc.stderr


def _cells(sweep: Path) -> list[Path]:
    return sorted((p for p in sweep.iterdir() if (p / "metrics.json").is_file()),
                  key=lambda p: int(p.name.split("_")[0]))


def bench_overhead(launchers: list[str], n_cells: int, work: Path) -> dict:
    cache = work / "cache"
    ks = ",".join(str(k) for k in range(1, n_cells // 2 + 1)) if n_cells > 1 else "1"
    sweep_args = [*CHEAP, "dataset.limit=2", f"rerank.k={ks}", "ordering=inverted,as_ranked" if n_cells > 1
                  else "ordering=inverted"]
    _sweep(sweep_args, cache, work / "warm")  # fill the index, retrieval and LLM caches
    out = {}
    for launcher in launchers:
        extra = {"basic": [], "local": ["hydra/launcher=local"], "slurm": ["hydra/launcher=slurm", *SLURM_CPU]}
        wall, sweep, log = _sweep([*extra[launcher], *sweep_args], cache, work / launcher)
        marks = [_ts(m.group(1)) for line in log.splitlines() if (m := TS.match(line))
                 and ("Launching" in line or "sweep output dir" in line)]
        launched = min(marks)
        job_start, pipeline_start = [], []
        for cell in _cells(sweep):
            first = next(_ts(m.group(1)) for line in (cell / "main.log").read_text().splitlines()
                         if (m := TS.match(line)) and "rag.pipeline" in line and "dataset " in line)
            pipeline_start.append(first - launched)
            if launcher != "basic":
                job_id = str(yaml.safe_load((cell / ".hydra" / "hydra.yaml").read_text())["hydra"]["job"]["id"])
                m = SUBMITIT_TS.search((sweep / ".submitit" / job_id / f"{job_id}_0_log.out").read_text())
                job_start.append(_ts(m.group(1)) - launched)
        out[launcher] = {"cells": len(pipeline_start), "sweep_wall_s": round(wall, 1),
                         "launch_to_job_start_s_mean": round(statistics.mean(job_start), 2) if job_start else None,
                         "launch_to_first_question_s": [round(x, 2) for x in pipeline_start],
                         "launch_to_first_question_s_min": round(min(pipeline_start), 2)}
    return out


def _counters(sweep: Path) -> dict:
    metrics = [json.loads((c / "metrics.json").read_text()) for c in _cells(sweep)]
    out = {}
    for stage in ("retrieval", "rerank", "llm"):
        calls = sum(m[f"{stage}_calls"] for m in metrics)
        hits = sum(m[f"{stage}_cache_hits"] for m in metrics)
        out[stage] = {"calls": calls, "hits": hits, "hit_ratio": round(hits / (hits + calls), 3) if hits + calls
                      else None}
    return out


def bench_cache(questions: int, work: Path) -> dict:
    args = [*CHEAP, f"dataset.limit={questions}", "rerank=dense", "cache.retrieval_depth=5",
            "retriever=bm25,dense", "rerank.k=1,2", "ordering=inverted,as_ranked"]
    out = {}
    for attempt in ("first", "repeat"):
        wall, sweep, _ = _sweep(args, work / "cache", work / attempt)
        out[attempt] = {"wall_s": round(wall, 1), "cells": len(_cells(sweep)), **_counters(sweep)}
    return out


def bench_scaling(cells: list[int], questions: int, work: Path) -> dict:
    cache = work / "cache"
    _sweep([*CHEAP, f"dataset.limit={questions}", "rerank.k=2", "generator.temperature=0.05"], cache,
           work / "warm")  # index + retrieval cached; temperature 0.05 is never reused below
    out, used = {}, 0
    for n in cells:
        temps = ",".join(f"{0.1 + 0.01 * (used + i):.2f}" for i in range(n))  # fresh LLM calls every time
        used += n
        wall, sweep, _ = _sweep([*CHEAP, f"dataset.limit={questions}", "rerank.k=2",
                                 f"generator.temperature={temps}"], cache, work / f"n{n}")
        counters = _counters(sweep)
        out[n] = {"wall_s": round(wall, 1), "per_cell_s": round(wall / n, 1),
                  "llm_calls": counters["llm"]["calls"], "retrieval_calls": counters["retrieval"]["calls"]}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", type=Path, default=None, help="also write the JSON result here")
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("overhead", parents=[common])
    p.add_argument("--launchers", nargs="+", default=["basic", "local", "slurm"])
    p.add_argument("--cells", type=int, default=4)
    p = sub.add_parser("cache", parents=[common])
    p.add_argument("--questions", type=int, default=3)
    p = sub.add_parser("scaling", parents=[common])
    p.add_argument("--cells", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--questions", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix=f"sweep-bench-{args.what}-"))
    if args.what == "overhead":
        result = bench_overhead(args.launchers, args.cells, work)
    elif args.what == "cache":
        result = bench_cache(args.questions, work)
    else:
        result = bench_scaling(args.cells, args.questions, work)
    result = {"benchmark": args.what, "cpus": os.cpu_count(), "work_dir": str(work), "result": result}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
