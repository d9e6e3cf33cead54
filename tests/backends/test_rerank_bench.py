"""The BGE-size reranking benchmark (run by benchmarks/gpu_check.sh on a GPU) works end to end on CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_decoder_throughput_bench_runs_on_cpu():
    """benchmarks/decoder_throughput.py (the live-day generator's budget on a lent GPU) in its reduced shape; the
    full shape is Falcon3-10B's 10.3 B parameters, checked on the meta device (no memory)."""
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "decoder_throughput.py"), "--reduced"],
                          capture_output=True, text=True, timeout=300, check=True)
    result = json.loads(done.stdout)
    assert [r["batch"] for r in result["runs"]] == [1, 2] and result["env"]["shape"] == "reduced"
    for r in result["runs"]:
        assert r["total_s"] > 0
        assert r["live_day_questions_in_2h"] == pytest.approx(7200 / r["seconds_per_question"], rel=0.01)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import torch
    from decoder_throughput import FALCON3_10B
    from transformers import LlamaConfig, LlamaForCausalLM

    with torch.device("meta"):
        model = LlamaForCausalLM(LlamaConfig(**FALCON3_10B))
    assert round(sum(p.numel() for p in model.parameters()) / 1e9, 1) == 10.3
