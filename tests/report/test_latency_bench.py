"""benchmarks/latency_at_k.py on a tiny real setting: its JSON has every k and candidate count, says what it
skipped, and is what `rag.report` draws as Fig. 5."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rag.report.latency import benchmark_curves
from tests.cluster.helpers import rag_env
from tests.conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def test_latency_benchmark_writes_what_the_report_plots(data_dir, tmp_path):
    out = tmp_path / "latency_at_k.json"
    proc = subprocess.run([sys.executable, "benchmarks/latency_at_k.py", "--questions", "3", "--rerank-questions", "2",
                           "--corpus-docs", "20", "--ks", "1,5,50", "--candidates", "1,3",
                           "--retrievers", "bm25,pinecone", "--rerankers", "dense,bge", "--cache-dir",
                           str(tmp_path / "cache"), "--out", str(out)],
                          cwd=ROOT, env={**rag_env(tmp_path), "PINECONE_API_KEY": ""}, capture_output=True, text=True,
                          timeout=1100)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "skip pinecone: PINECONE_API_KEY not set" in proc.stdout
    data = json.loads(out.read_text())
    assert data["retrievers"]["bm25"]["k"] == [1, 5, 50] and data["retrievers"]["bm25"]["n_questions"] == 3
    assert data["rerankers"]["dense"]["candidates"] == [1, 3] and data["rerankers"]["dense"]["n_questions"] == 2
    for entry in (data["retrievers"]["bm25"], data["rerankers"]["dense"]):
        assert all(0 < p50 <= p95 for p50, p95 in zip(entry["p50_s"], entry["p95_s"]))
    assert data["skipped"]["pinecone"] == "PINECONE_API_KEY not set" and "bge" in data["skipped"]
    assert "load average" in data["load"] and data["machine"]["cores"]
    curves, header = benchmark_curves(out)
    assert {(c.kind, c.name) for c in curves} == {("retriever", "bm25"), ("reranker", "dense")}
    assert header["skipped"] == data["skipped"]
