"""The dense reranker encodes no passage the dense index already holds, nor one it encoded before (issue 14)."""

from __future__ import annotations

import numpy as np
import pytest

from rag.pipeline import Pipeline
from tests.conftest import compose_config

pytestmark = pytest.mark.slow


def _pipeline(cache, *extra: str) -> Pipeline:
    return Pipeline(compose_config([f"paths.cache_dir={cache}", "dataset=hotpotqa", "dataset.limit=5",
                                    "generator=none", "retriever.k=20", "rerank=dense", "rerank.k=5",
                                    "logger=none", *extra]))


def test_dense_rerank_reads_vectors_from_the_dense_index(data_dir, shared_cache, tmp_path):
    pipeline = _pipeline(shared_cache, "retriever=dense", "cache.stages=false")
    metrics = pipeline.run(tmp_path / "run")
    reranker = pipeline.reranker
    assert reranker.embedder.encoded_passages == 0  # every candidate vector came from the index
    assert reranker.embedder.encoded_queries == 5
    assert metrics["rerank/vectors_from_index"] == 5 * 20 and metrics.get("rerank/vectors_encoded", 0) == 0

    # the stored vectors are the ones encoding would give: same scores as re-encoding the candidates
    question = pipeline.dataset.questions[0]
    retrieved, _ = pipeline.rank([question])
    cands = retrieved[0]
    stored = reranker.score([question.question], [cands])[0]
    fresh = reranker.embedder.encode_passages([c.passage.text for c in cands])
    recomputed = fresh @ reranker.embedder.encode_queries([question.question])[0]
    # bfloat16 (`dtype: auto` on AMX/AVX512-BF16 CPUs) rounds differently in other batches: 1e-3 there
    np.testing.assert_allclose(stored, recomputed, atol=1e-4 if reranker.embedder.dtype == "float32" else 2e-3)
    pipeline.close()


def test_dense_rerank_of_bm25_candidates_encodes_each_passage_once_across_runs(data_dir, tmp_path):
    extra = ("retriever=bm25", "cache.stages=false")
    first = _pipeline(tmp_path / "cache", *extra)
    first.run(tmp_path / "first")
    encoded = first.reranker.embedder.encoded_passages
    assert 0 < encoded <= 5 * 20
    first.close()

    second = _pipeline(tmp_path / "cache", *extra)  # a new process would see the same cache on disk
    metrics = second.run(tmp_path / "second")
    assert second.reranker.embedder.encoded_passages == 0
    assert metrics["rerank/vectors_from_cache"] == 5 * 20
    second.close()


def test_static_int8_reranker_calibrates_on_the_retrievers_corpus(data_dir, tmp_path):
    """`quantize: static` needs passages to calibrate on; behind any retriever the reranker takes them from the
    run's corpus, so a whole run works from config alone and its vector cache is named by that sample."""
    pipeline = _pipeline(tmp_path / "cache", "retriever=bm25", "cache.stages=false",
                         "+rerank.embedder.backend=openvino", "+rerank.embedder.quantize=static",
                         "+rerank.embedder.calibration_size=8", f"+rerank.embedder.export_dir={tmp_path}/embed")
    metrics = pipeline.run(tmp_path / "run")
    embedder = pipeline.reranker.embedder
    assert "-openvino-qint8_static-c" in pipeline.reranker.key
    assert embedder.encoded_passages > 0 and metrics["rerank/vectors_encoded"] == embedder.encoded_passages
    assert (tmp_path / "cache" / "embeddings" / f"{embedder.vector_key}.sqlite").exists()
    pipeline.close()


def test_dense_rerank_behind_a_fusion_reads_vectors_from_its_dense_source(data_dir, shared_cache, tmp_path):
    """A fusion's dense source hands out its vectors as a hybrid's does (the LiveRAG pipelines rerank 2,000 fused
    candidates per question: re-encoding them cost minutes per run), and its embedder's load is counted."""
    pipeline = _pipeline(shared_cache, "retriever=fusion", "retriever.depth=20", "cache.stages=false")
    metrics = pipeline.run(tmp_path / "run")
    assert pipeline.reranker.embedder.encoded_passages == 0
    assert metrics["rerank/vectors_from_index"] == 5 * 20 and metrics.get("rerank/vectors_encoded", 0) == 0
    dense_source = pipeline.retriever.sources["dense"]
    embedders = {id(e): e for e in (dense_source.embedder, pipeline.reranker.embedder)}
    assert dense_source.embedder.model_loads == 1
    assert metrics["model_loads"] == sum(e.model_loads for e in embedders.values())
    pipeline.close()
