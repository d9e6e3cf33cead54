"""The BGE-size reranking benchmark (run by benchmarks/gpu_check.sh on a GPU) works end to end on CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_runs_and_writes_results(tmp_path):
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bge_rerank_bench.py"), "--reduced", "--device", "cpu",
           "--questions", "2", "--passages", "6", "--vocab", "1000", "--max-length", "64", "--batch-size", "4",
           "--lengths", "mixed"]
    done = subprocess.run(cmd, env={**os.environ, "OUT": str(tmp_path)}, capture_output=True, text=True,
                          timeout=300, check=True)
    printed = json.loads(done.stdout)
    saved = json.loads((tmp_path / "bge_rerank_bench_reduced.json").read_text())
    assert printed == saved
    assert saved["workload"]["passages_per_question"] == 6 and saved["model"]["layers"] == 2
    assert len(saved["per_question"]["all_s"]) == 2 and saved["per_question"]["mean_s"] > 0
    assert saved["cross_question"]["per_question_s"] > 0
    assert saved["best_s_per_question"] <= saved["per_question"]["mean_s"]
