"""In-process sweep cells reuse loaded corpora, indexes and models whose configs match (issue 14)."""

from __future__ import annotations

import pytest

from rag.pipeline import Pipeline
from rag.reuse import LOADED
from tests.conftest import compose_config

pytestmark = pytest.mark.slow


def _cell(cache, *extra: str) -> Pipeline:
    return Pipeline(compose_config([f"paths.cache_dir={cache}", "dataset=hotpotqa", "dataset.limit=3",
                                    "generator=none", "retriever.k=10", "rerank=dense", "logger=none",
                                    "cache.reuse_loaded=true", "cache.stages=false", *extra]))


def test_cells_with_the_same_configs_load_each_model_once(data_dir, tmp_path):
    LOADED.clear()
    try:
        first = _cell(tmp_path, "ordering=as_ranked")
        m1 = first.run(tmp_path / "a")
        first.close()
        assert m1["model_loads"] == 1  # the dense reranker's embedder

        second = _cell(tmp_path, "ordering=inverted")  # only a generation-side setting differs
        assert second.retriever is first.retriever and second.dataset.corpus is first.dataset.corpus
        assert second.reranker is first.reranker
        m2 = second.run(tmp_path / "b")
        second.close()
        assert m2["model_loads"] == 0 and "time/index_s" not in m2  # the kept index is not loaded again
        assert m2["rerank/vectors_from_cache"] == 3 * 10 and m2["rerank/vectors_encoded"] == 0

        third = _cell(tmp_path, "rerank.embedder.max_seq_length=128")  # another reranker model setting
        assert third.retriever is first.retriever and third.reranker is not first.reranker
        assert third.run(tmp_path / "c")["model_loads"] == 1
        third.close()
    finally:
        LOADED.clear()


def test_reuse_is_off_outside_a_sweep_by_default(data_dir, tmp_path):
    cfg = compose_config([f"paths.cache_dir={tmp_path}", "dataset=hotpotqa", "generator=none", "logger=none"])
    assert cfg.cache.reuse_loaded == "auto"
    a, b = Pipeline(cfg), Pipeline(cfg)
    assert a.retriever is not b.retriever
