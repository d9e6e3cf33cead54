"""A small real sweep made once per session: 2 cells (Simple vs the extractive no-LLM strategy), 2 LiveRAG dev
questions (one single-, one multi-hop), BM25 k=20 -> dense rerank k=2, Gemma 270M as generator and as LiveRAG
judge, W&B offline.

The report, notebook and W&B tests all read this one sweep folder. While developing, RAG_TEST_REPORT_SWEEP=<a sweep
folder made by this fixture before> skips making it again.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cluster.helpers import rag_env, rag_main, sweep_dirs

SWEEP_ARGS = ["-m", "dataset=liverag_dev", "dataset.limit=2", "retriever=bm25", "retriever.k=20", "rerank=dense",
              "rerank.k=2", "generator=simple,extractive", "generator.max_tokens=16", "judge=liverag",
              "logger=wandb"]


@pytest.fixture(scope="session")
def small_sweep_cache(tmp_path_factory) -> Path:
    """The sweep's cache (indexes, retrievals, responses): a test that reruns the sweep reuses it."""
    if os.environ.get("RAG_TEST_CACHE_DIR"):
        return Path(os.environ["RAG_TEST_CACHE_DIR"])
    return tmp_path_factory.mktemp("report-sweep-cache")


@pytest.fixture(scope="session")
def small_sweep(data_dir, small_sweep_cache, tmp_path_factory) -> Path:
    if os.environ.get("RAG_TEST_REPORT_SWEEP"):
        return Path(os.environ["RAG_TEST_REPORT_SWEEP"])
    tmp = tmp_path_factory.mktemp("report-sweep")
    env = rag_env(tmp, cache=small_sweep_cache)
    proc = rag_main(SWEEP_ARGS, env, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    [sweep] = sweep_dirs(tmp / "outputs")
    return sweep
