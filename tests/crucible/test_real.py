"""Crucible, Crucible-Verified and GINGER end to end: the real pipeline (BM25 on the LiveRAG dev corpus), the
real small model (Gemma 3 270M on llama.cpp, its log-probabilities) and one real dev question each; then Crucible's
metrics on the runs' records with the same model as judge.

The 270M base model writes poor nuggets; the assertions are about what must hold whatever it writes: one
batched step each, one citation per Crucible sentence among the passages it retrieved, confidences from
log-probabilities, parse failures counted, metrics in range.
"""

from __future__ import annotations

import json

import pytest

from rag.core.io import read_jsonl
from tests.conftest import compose_config

pytestmark = pytest.mark.slow

COMMON = ["dataset.limit=1", "retriever.k=10", "rerank.k=3", "llm.n_ctx=2048", "logger=none"]
SMALL = {
    "crucible": ["generator.max_docs=3", "generator.nuggets_per_doc=3", "generator.bank.size=4",
                 "generator.bank.max_llm_checks=3", "generator.passages_per_nugget=1",
                 "generator.summary_max_tokens=48", "generator.nuggets_max_tokens=64",
                 "generator.extract_max_tokens=40", "generator.max_passage_words=120"],
    "ginger": ["generator.max_passages=3", "generator.facts_per_passage=3", "generator.max_clusters=3",
               "generator.detect_max_tokens=64", "generator.summarize_max_tokens=40",
               "generator.fluency_max_tokens=96", "generator.max_passage_words=120"],
}
SMALL["crucible_verified"] = SMALL["crucible"]


@pytest.fixture(scope="module")
def runs(data_dir, shared_cache, tmp_path_factory):
    """The three generators on one loaded engine and one BM25 index."""
    import llama_cpp  # noqa: F401  (installed by `make setup`: missing fails, never skips)

    from rag.pipeline import Pipeline

    out, engine, root = {}, None, tmp_path_factory.mktemp("crucible-runs")
    for name in ("crucible", "crucible_verified", "ginger"):
        cfg = compose_config([f"paths.cache_dir={shared_cache}", *COMMON, f"generator={name}", *SMALL[name]])
        pipe = Pipeline(cfg)
        if engine is None:
            engine = pipe.engine
        else:
            pipe._engine = engine  # one model load for all three runs
        metrics = pipe.run(root / name)
        out[name] = (metrics, read_jsonl(root / name / "answers.jsonl"), root / name)
        pipe.retriever.close()
    out["engine"] = engine
    yield out
    engine.close()


@pytest.mark.parametrize("name", ["crucible", "crucible_verified"])
def test_crucible_sentences_cite_one_retrieved_passage(runs, name):
    metrics, records, _ = runs[name]
    assert len(records) == 1 and metrics["llm_calls"] + metrics["llm_cache_hits"] > 0
    for r in records:
        steps = r["steps"]
        assert r["generator"] == name and json.dumps(steps)
        assert len(steps["summaries"]) == 3 and len(steps["ideation"]) == 3
        assert 1 <= len(steps["bank"]) <= 4 and steps["ranking"]["mode"] == "unsupervised"
        assert steps["retrieval"] == "run retriever"
        assert isinstance(steps["parse_failures"], dict) and steps["llm_calls"] >= 6
        extracted = {e["passage_id"] for e in steps["extraction"]}
        assert len(steps["extraction"]) <= len(steps["bank"])  # passages_per_nugget=1
        assert len(r["answer"].split()) <= 200
        assert r["answer"] == " ".join(s["text"] for s in r["sentences"])
        cited_ids = {p["doc_IDs"][0] for p in r["passages"]}
        for s in r["sentences"]:
            assert len(s["citations"]) == 1 and s["citations"][0] in cited_ids
            assert s["passage_id"] in extracted and s["passage_id"] in r["context"]
            assert 0.0 < s["confidence"] <= 1.0 and s["nugget"]
        assert r["parse_failed"] == (r["fallback"] is not None)
    if name == "crucible_verified":
        for r in records:
            checks = r["steps"]["verification"]
            assert r["steps"]["dropped"] == sum(1 for c in checks if not c["kept"])
            assert {c["label"] for c in checks} <= {"support", "partial", "none", None}


def test_ginger_sentences_cite_their_cluster_passages(runs):
    metrics, records, _ = runs["ginger"]
    assert len(records) == 1
    for r in records:
        steps = r["steps"]
        assert len(steps["detected"]) == 3 and steps["llm_calls"] >= 3
        used = {p["doc_IDs"][0] for p in r["passages"]}
        assert len(r["sentences"]) <= 3
        for s in r["sentences"]:
            assert s["citations"] and set(s["citations"]) <= used
        assert r["parse_failed"] == (r["fallback"] is not None)


def test_crucible_metrics_on_real_records(runs, shared_cache, tmp_path):
    from eval.crucible_metrics import METRICS, CrucibleJudge
    from eval.nuggets import AutoNuggetizer
    from rag.judge.base import EvalContext
    from rag.records import AnswerRecord

    records = [runs["crucible"][1][0], {**runs["ginger"][1][0]}]
    uncited = {**records[0], "id": "uncited", "answer": "Plain text without markers.", "sentences": None}
    uncited.pop("sentences")
    records.append(uncited)
    nuggetizer = AutoNuggetizer(window_size=10, max_nuggets=6, keep_top=6, nuggets_per_call=10, max_passages=2,
                                max_passage_chars=1200, create_params={"temperature": 0.0, "max_tokens": 160},
                                label_params={"temperature": 0.0, "max_tokens": 96}, max_retries=1)
    typed = [AnswerRecord.from_json(r) for r in records]
    # what rag.judge.run.evaluate_records hands a nugget judge: the run's one set, made once
    ctx = EvalContext(tmp_path, shared_cache, nuggetizer.nugget_set(typed, runs["engine"], shared_cache), nuggetizer)
    metrics = CrucibleJudge().evaluate(typed, runs["engine"], ctx)
    records = [r.to_json() for r in typed]
    scored = [r for r in records if not r["judges"]["crucible"].get("skipped")]
    assert scored, [r["judges"]["crucible"] for r in records]
    for r in scored:
        for m in METRICS:
            assert 0.0 <= r["judges"]["crucible"][m] <= 1.0
    third = records[2]["judges"]["crucible"]
    assert third.get("skipped") or (third["uncited"] and third["citation_support"] == 0.0)
    assert f"crucible/{METRICS[0]}/all" in metrics and metrics["crucible/n_scored"] == len(scored)
    assert (tmp_path / "crucible" / "scores.jsonl").is_file() and (tmp_path / "crucible" / "nuggets.jsonl").is_file()
