"""A real Hydra multirun through `python -m rag.main -m`: a 2x2 sweep writes 4 complete run folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def test_two_by_two_multirun_writes_four_folders(data_dir, shared_cache, tmp_path):
    env = {**os.environ, "RAG_DATA_DIR": str(data_dir), "RAG_CACHE_DIR": str(shared_cache),
           "RAG_OUTPUT_DIR": str(tmp_path)}
    cmd = [sys.executable, "-m", "rag.main", "-m", "dataset=hotpotqa", "dataset.limit=2", "logger=none",
           "generator.max_tokens=16", "rerank.k=2,3", "ordering=inverted,as_ranked"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cells = sorted(p for p in (tmp_path / "multirun").glob("*/*/*") if (p / ".hydra").is_dir())  # not report/
    assert len(cells) == 4, cells
    seen = set()
    for cell in cells:
        metrics = json.loads((cell / "metrics.json").read_text())
        assert metrics["n_questions"] == 2
        lines = (cell / "answers.jsonl").read_text().splitlines()
        assert len(lines) == 2
        overrides = (cell / ".hydra" / "overrides.yaml").read_text()
        seen.add(tuple(sorted(line for line in overrides.splitlines() if "rerank.k" in line or "ordering" in line)))
        k = 2 if "rerank.k=2" in overrides else 3
        assert all(len(json.loads(line)["passages"]) == k for line in lines)
    assert len(seen) == 4
    # all cells share one retrieval: only the first cell to run paid for it
    assert sum(json.loads((c / "metrics.json").read_text())["retrieval_calls"] for c in cells) <= 2
