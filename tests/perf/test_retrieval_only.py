"""`generator=none`: retrieval-only runs on real questions with BM25, recall at every cutoff (issue 14)."""

from __future__ import annotations

import json
from statistics import mean

import pytest

from rag.core.io import read_jsonl
from rag.metrics.retrieval import cutoff_metrics, recall_at_cutoffs
from rag.pipeline import Pipeline
from tests.conftest import compose_config

CUTOFFS = [1, 5, 10, 20, 50, 100]


def test_recall_at_cutoffs_counts_a_document_once_at_its_best_rank():
    ranked = ["d3", "d1", "d3", "d9", "d2"]
    scores = recall_at_cutoffs(["d1", "d2"], ranked, [1, 2, 5, 10], "retrieval")
    assert scores["recall_retrieval@1"] == 0.0 and scores["recall_retrieval@2"] == 0.5
    assert scores["recall_retrieval@2_any"] == 1.0 and scores["recall_retrieval@2_all"] == 0.0
    assert scores["recall_retrieval@5_all"] == 1.0 and scores["recall_retrieval@10"] == 1.0
    assert recall_at_cutoffs([], ranked, [1], "retrieval") == {}
    rows = [{"scores": scores}, {"scores": recall_at_cutoffs(["d9"], ranked, [1, 2, 5, 10], "retrieval")}]
    m = cutoff_metrics({"all": rows, "single": rows[1:]})
    assert m["recall/retrieval@5/all"] == 1.0 and m["recall/retrieval@2/all"] == 0.25
    assert m["recall/retrieval@5_all/single"] == 1.0 and m["recall/retrieval@2/single"] == 0.0


@pytest.mark.slow
def test_generator_none_on_500_live_questions_loads_no_model(data_dir, shared_cache, tmp_path):
    # an llm config that cannot even be built proves no engine is made
    cfg = compose_config([f"paths.cache_dir={shared_cache}", "dataset=liverag_live", "generator=none",
                          "retriever.k=100", "llm.model_package=no_such_model_package", "logger=none"])
    pipeline = Pipeline(cfg)
    metrics = pipeline.run(tmp_path / "live")
    assert pipeline._engine is None
    records = read_jsonl(tmp_path / "live" / "answers.jsonl")
    assert len(records) == 500 and metrics["n_questions"] == 500
    assert all(len(r["retrieved"]) == 100 and r["answer"] == "" and r["final_prompt"] == "" for r in records)
    assert all(r["passages"] == [] for r in records)  # no prompt used any passage text
    assert [p["rank"] for p in records[0]["retrieved"]] == list(range(1, 101))
    assert metrics["llm_calls"] == 0 and not any(k.startswith("answer/") for k in metrics)
    assert not any(k.startswith("recall/") for k in metrics)  # no gold documents on live day


@pytest.mark.slow
def test_generator_none_reports_recall_at_every_cutoff_on_the_dev_set(data_dir, shared_cache, tmp_path):
    cfg = compose_config([f"paths.cache_dir={shared_cache}", "dataset=liverag_dev", "generator=none",
                          "retriever.k=100", "rerank.k=10", "logger=none", f"metrics.recall_at={CUTOFFS}"])
    pipeline = Pipeline(cfg)
    metrics = pipeline.run(tmp_path / "dev")
    records = read_jsonl(tmp_path / "dev" / "answers.jsonl")
    assert len(records) == 295 == metrics["n_questions"]
    assert json.loads((tmp_path / "dev" / "metrics.json").read_text()) == metrics
    for k in CUTOFFS:  # every cutoff, from the 100-deep lists written to answers.jsonl
        for split in ("all", "single", "multi"):
            rows = [r for r in records if split == "all" or r["hop"] == split]
            ranked = [[p["doc_id"] for p in r["retrieved"]][:k] for r in rows]
            frac = mean(mean(g in top for g in r["gold_doc_ids"]) for r, top in zip(rows, ranked))
            assert metrics[f"recall/retrieval@{k}/{split}"] == pytest.approx(frac, abs=1e-6)
            both = mean(all(g in top for g in r["gold_doc_ids"]) for r, top in zip(rows, ranked))
            assert metrics[f"recall/retrieval@{k}_all/{split}"] == pytest.approx(both, abs=1e-6)
            assert f"recall/retrieval@{k}_any/{split}" in metrics
            assert f"recall/rerank@{k}/{split}" in metrics  # rerank=none keeps the order: same figures
    values = [metrics[f"recall/retrieval@{k}/all"] for k in CUTOFFS]
    assert values == sorted(values) and values[0] < values[-1]
    assert metrics["recall/rerank@10/all"] == metrics["recall/retrieval@10/all"]
    assert metrics["retrieval_calls"] + metrics["retrieval_cache_hits"] == 295 and metrics["llm_calls"] == 0
