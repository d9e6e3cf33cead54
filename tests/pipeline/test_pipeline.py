"""The spine end to end on real data with the real small model, composed from the real configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag.core.io import read_jsonl
from rag.data.questions import HotpotQAQuestions
from rag.fingerprint import fingerprint
from rag.main import run
from tests.conftest import compose_config

pytestmark = pytest.mark.slow

LIVERAG_FIELDS = {"id", "question", "answer", "passages", "final_prompt"}


def _overrides(cache: Path, *extra: str) -> list[str]:
    return [f"paths.cache_dir={cache}", "generator.max_tokens=24", *extra]


def test_liverag_run_writes_submission_records_metrics_and_wandb(data_dir, shared_cache, tmp_path):
    cfg = compose_config(_overrides(shared_cache, "dataset=liverag_dev", "dataset.limit=2", "retriever.k=10",
                                    "rerank.k=2", "logger=wandb", f"logger.dir={tmp_path}"))
    run_dir = tmp_path / "run"
    metrics = run(cfg, run_dir, name="liverag-2", group="test-group", tags=["retriever=bm25"])

    records = read_jsonl(run_dir / "answers.jsonl")
    assert [r["id"] for r in records] == ["1", "2"]
    for r in records:
        assert set(r) >= LIVERAG_FIELDS
        assert len(r["passages"]) == 2 and set(r["passages"][0]) == {"doc_IDs", "passage"}
        assert len(r["retrieved"]) == 10 and len(r["reranked"]) == 2
        # inverted ordering: the best passage is the last one in the prompt, right before the question
        assert r["context"][-1] == r["reranked"][0]["passage_id"]
        assert r["final_prompt"].rstrip().endswith("Answer:")
        assert r["question"] in r["final_prompt"]
        assert 0.0 <= r["scores"]["f1"] <= 1.0
    assert json.loads((run_dir / "metrics.json").read_text()) == metrics
    assert metrics["n_questions"] == 2 and metrics["llm_calls"] + metrics["llm_cache_hits"] == 2
    assert {"recall/retrieval@10/all", "recall/rerank@2/multi", "answer/f1/single", "time/generate_s",
            "prompt_tokens", "retrieval_calls"} <= set(metrics)
    assert not (run_dir / "answers.partial.jsonl").exists()
    assert not list(run_dir.glob(".*.tmp"))
    assert (run_dir / "config.json").exists()
    offline = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(offline) == 1 and list(offline[0].glob("*.wandb"))

    # a second run of the same config in a new folder pays for nothing: stage and response caches
    again = run(cfg, tmp_path / "run2")
    assert again["llm_calls"] == 0 and again["llm_cache_hits"] == 2
    assert again["retrieval_calls"] == 0 and again["retrieval_cache_hits"] == 2
    assert [r["answer"] for r in read_jsonl(tmp_path / "run2" / "answers.jsonl")] == [r["answer"] for r in records]


def test_dense_retrieval_and_dense_rerank_on_hotpotqa(data_dir, shared_cache, tmp_path):
    cfg = compose_config(_overrides(shared_cache, "dataset=hotpotqa", "dataset.limit=3", "retriever=dense",
                                    "retriever.k=20", "rerank=dense", "rerank.k=3", "ordering=as_ranked",
                                    "logger=none"))
    metrics = run(cfg, tmp_path / "run")
    records = read_jsonl(tmp_path / "run" / "answers.jsonl")
    assert metrics["rerank_calls"] + metrics["rerank_cache_hits"] == 3
    assert metrics["recall/retrieval@20_any/all"] > 0.5
    for r in records:
        assert r["context"] == [p["passage_id"] for p in r["reranked"]]  # as_ranked keeps best first
        scores = [p["score"] for p in r["reranked"]]
        assert scores == sorted(scores, reverse=True)


def test_resume_skips_answers_already_journalled(data_dir, shared_cache, tmp_path):
    cfg = compose_config(_overrides(shared_cache, "dataset=hotpotqa", "dataset.limit=3", "logger=none",
                                    "rerank.k=2"))
    ids = [q.id for q in HotpotQAQuestions("hotpotqa_musique/hotpotqa_train.json", str(data_dir)).load()[:3]]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # a killed run left one complete line (for the second question) and a torn one
    done = {"id": ids[1], "question": "q", "answer": "kept", "passages": [], "final_prompt": "", "hop": "multi",
            "scores": {}, "parse_failed": False}
    (run_dir / "answers.partial.jsonl").write_text(json.dumps(done) + "\n" + '{"id": "torn')
    # ... and, like every run since issue 9, the fingerprint of its config, written before any work
    (run_dir / "fingerprint.json").write_text(json.dumps(fingerprint(cfg)))
    metrics = run(cfg, run_dir)
    records = read_jsonl(run_dir / "answers.jsonl")
    assert [r["id"] for r in records] == ids
    assert records[1]["answer"] == "kept"
    assert metrics["llm_calls"] + metrics["llm_cache_hits"] == 2


def test_index_is_loaded_once_per_run_not_per_chunk(data_dir, shared_cache, tmp_path, monkeypatch):
    from rag.retrieve.bm25 import BM25Retriever

    calls = []
    original = BM25Retriever.prepare
    monkeypatch.setattr(BM25Retriever, "prepare", lambda self, *a, **k: (calls.append(1), original(self, *a, **k)))
    cfg = compose_config(_overrides(shared_cache, "dataset=hotpotqa", "dataset.limit=3", "logger=none",
                                    "rerank.k=2", "generation.chunk_size=1"))
    metrics = run(cfg, tmp_path / "run")
    assert metrics["n_questions"] == 3
    assert len(calls) == 1
