"""Work done by a sweep is counted, and shared: a 2 retrievers x 2 k x 2 rerank.k sweep over Q questions retrieves
exactly 2 x Q times in total (one deep retrieval per retriever, cut by every cell), reranks once per (retriever, k),
and running the same sweep again does no retrieval, reranking or LLM call at all. (The ordering is applied after
the rerank cut, like rerank.k; one ordering keeps the sweep to 8 cells.)

The 8 cells run in-process through the Hydra compose API (`rag.main.run`), as the launcher would run them,
with the real BM25, MiniLM dense retriever / reranker and Gemma model."""

from __future__ import annotations

import itertools
import json

import pytest

from rag.core.io import read_jsonl
from rag.main import run
from tests.conftest import compose_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

Q = 3
RETRIEVERS, KS, RERANK_KS, ORDERINGS = ("bm25", "dense"), (3, 5), (1, 2), ("inverted",)
CELLS = list(itertools.product(RETRIEVERS, KS, RERANK_KS, ORDERINGS))


def _sweep(cache, out) -> list[dict]:
    results = []
    for retriever, k, rerank_k, ordering in CELLS:
        cfg = compose_config([f"paths.cache_dir={cache}", "dataset=hotpotqa", f"dataset.limit={Q}", "rerank=dense",
                              f"cache.retrieval_depth={max(KS)}", "generator.max_tokens=8", "logger=none",
                              f"retriever={retriever}", f"retriever.k={k}", f"rerank.k={rerank_k}",
                              f"ordering={ordering}"])
        cell = out / f"{retriever}-k{k}-r{rerank_k}-{ordering}"
        metrics = run(cfg, cell)
        assert json.loads((cell / "metrics.json").read_text()) == metrics
        results.append(metrics | {"_answers": [r["answer"] for r in read_jsonl(cell / "answers.jsonl")]})
    return results


def test_sweep_retrieves_once_per_retriever_and_repeats_for_free(hotpot_data, tmp_path):
    cache = tmp_path / "cache"
    first = _sweep(cache, tmp_path / "first")
    assert len(first) == len(CELLS) == 8
    assert sum(m["retrieval_calls"] for m in first) == 2 * Q
    # every cell got all Q ranked lists: from its own retrieval or from the shared file
    assert all(m["retrieval_calls"] + m["retrieval_cache_hits"] == Q for m in first)
    # reranking is cached per (retrieval file, retriever k): 2 retrievers x 2 k, shared by rerank.k and ordering
    assert sum(m["rerank_calls"] for m in first) == len(RETRIEVERS) * len(KS) * Q
    assert sum(m["llm_calls"] for m in first) > 0
    assert all(m["llm_calls"] + m["llm_cache_hits"] == Q for m in first)

    second = _sweep(cache, tmp_path / "second")
    for key in ("retrieval_calls", "rerank_calls", "llm_calls"):
        assert sum(m[key] for m in second) == 0, key
    assert all(m["retrieval_cache_hits"] == Q and m["rerank_cache_hits"] == Q and m["llm_cache_hits"] == Q
               for m in second)
    assert [m["_answers"] for m in second] == [m["_answers"] for m in first]

    hits = {k: sum(m[f"{k}_cache_hits"] for m in first) / sum(m[f"{k}_cache_hits"] + m[f"{k}_calls"]
                                                              for m in first)
            for k in ("retrieval", "rerank", "llm")}
    print(f"\nfirst sweep cache hit ratios: {hits}")
