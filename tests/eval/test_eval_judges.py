"""Judges with a scripted engine: parse failures, batched re-asks, schemas, missing gold answers, reports, cost."""

from __future__ import annotations

import logging

import pytest
from evaltools import ScriptedEngine, factory_with, judge_root, prompt_text, synthetic_records
from omegaconf import OmegaConf

from rag.core.errors import ConfigError
from rag.judge.run import build_judge, evaluate_records

GOOD = '{"correctness": 2, "faithfulness": 1}'


def _judge(config_name: str, **overrides):
    """A judge built from its project YAML (conf/judge/<name>.yaml), as the hook builds it."""
    node = judge_root(config_name, **{config_name: overrides}).judge[config_name]
    return build_judge(config_name, OmegaConf.to_container(node, resolve=True))


def test_malformed_outputs_become_counted_parse_failures():
    engine = ScriptedEngine(lambda r: "I think this answer is quite good overall.")
    judge = _judge("liverag", max_retries=2)
    records = synthetic_records(3)
    results = judge.judge(engine, records)
    assert all(r["parse_failed"] and r["attempts"] == 3 for r in results)
    assert [len(b) for b in engine.batches] == [3, 3, 3]  # one batch per round, all three re-asked
    seeds = [{r.params.seed for r in batch} for batch in engine.batches]
    assert len(set.union(*seeds)) == 3  # a new seed each round, so the cache cannot replay the bad output
    assert all(r.params.temperature >= 0.2 for r in engine.batches[1])
    for record, result in zip(records, results):
        record.judges["liverag"] = result
    metrics = judge.summary(records)
    assert metrics["judge/liverag/parse_failures"] == 3
    assert metrics["judge/liverag/correctness/all"] is None  # never 0 or NaN for unparsable outputs
    assert metrics["judge/liverag/correctness_n"] == 0


@pytest.mark.parametrize("bad", ['{"correctness": 1.5, "faithfulness": 1}', "correctness: 0.9\nfaithfulness: 1"])
def test_non_integer_scores_are_reasked_then_counted(bad):
    """1.5 and 0.9 are never truncated to 1 and 0: re-asked, and counted when they stay."""
    engine = ScriptedEngine(lambda r: bad)
    judge = _judge("liverag", max_retries=1)
    results = judge.judge(engine, synthetic_records(2))
    assert [len(b) for b in engine.batches] == [2, 2]
    assert all(r["parse_failed"] and r["raw"] == bad for r in results)
    fixed = ScriptedEngine(lambda r: bad if r.params.seed == 0 else "Correctness score: 2\nFaithfulness score: 0")
    results = judge.judge(fixed, synthetic_records(2))
    assert results == [{"correctness": 2, "faithfulness": 0, "attempts": 2}] * 2


def test_only_failed_items_are_reasked():
    def respond(request):
        text = prompt_text(request)
        if "fact 1" in text and request.params.seed == 0:
            return "correctness=great"  # bad on the first try only
        return GOOD if "fact 0" in text else '{"correctness": 1, "faithfulness": 0}'

    engine = ScriptedEngine(respond)
    results = _judge("liverag").judge(engine, synthetic_records(2))
    assert [len(b) for b in engine.batches] == [2, 1]
    assert results[0] == {"correctness": 2, "faithfulness": 1, "attempts": 1}
    assert results[1] == {"correctness": 1, "faithfulness": 0, "attempts": 2}


@pytest.mark.parametrize("supports", [True, False])
def test_schema_only_where_supported(supports):
    engine = ScriptedEngine(lambda r: GOOD, supports_json_schema=supports)
    _judge("liverag").judge(engine, synthetic_records(1))
    schema = engine.batches[0][0].params.json_schema
    if supports:
        assert schema["properties"]["correctness"] == {"type": "integer", "enum": [2, 1, 0, -1]}
        assert schema["properties"]["faithfulness"]["enum"] == [1, 0, -1]
        assert "minimum" not in str(schema)
    else:
        assert schema is None


def test_judge_sampling_params_are_its_own():
    engine = ScriptedEngine(lambda r: GOOD)
    _judge("liverag", params={"temperature": 0.0, "max_tokens": 17}).judge(engine, synthetic_records(1))
    params = engine.batches[0][0].params
    assert (params.temperature, params.max_tokens) == (0.0, 17)


def test_crag_and_pairwise_scores():
    def respond(request):
        text = prompt_text(request)
        if "Grade the generated answer" in text:
            return 'Explanation first. {"explanation": "close", "grade": "acceptable"}'
        return '{"explanation": "same facts", "verdict": "tie"}'

    engine = ScriptedEngine(respond)
    crag = _judge("crag").judge(engine, synthetic_records(1))[0]
    pair = _judge("pairwise").judge(engine, synthetic_records(1))[0]
    assert (crag["grade"], crag["score"]) == ("acceptable", 0.5)
    assert (pair["verdict"], pair["score"], pair["explanation"]) == ("tie", 0.5, "same facts")


def test_missing_gold_skips_fields_with_count_and_warning(caplog, tmp_path):
    records = synthetic_records(4)
    for r in records[:3]:
        r.gold_answer = None
        r.gold_docs = []
    engine = ScriptedEngine(lambda r: GOOD + ' {"explanation": "x", "verdict": "worse"}')
    root = judge_root("liverag", "pairwise")
    with caplog.at_level(logging.WARNING):
        metrics = evaluate_records(root.judge, records, tmp_path, tmp_path / "cache", factory_with(engine, root))
    lr = [r.judges["liverag"] for r in records]
    assert all("correctness" not in x and x["faithfulness"] == 1 and x["skipped"] == ["correctness"] for x in lr[:3])
    assert lr[3]["correctness"] == 2
    assert all(r.judges["pairwise"]["skip_reason"] == "no gold answer" for r in records[:3])
    assert records[3].judges["pairwise"]["verdict"] == "worse"
    # pairwise was asked only for the record that has a gold answer
    pairwise_prompts = [r for b in engine.batches for r in b if "Compare the generated answer" in prompt_text(r)]
    assert len(pairwise_prompts) == 1
    # the ground-truth sections are left out of the LiveRAG prompt when there is no gold answer
    assert all("Ground truth answer" not in prompt_text(r) for r in engine.batches[0][:3])
    assert metrics["judge/liverag/skipped_no_gold"] == 3 and metrics["judge/pairwise/skipped_no_gold"] == 3
    assert metrics["judge/liverag/correctness_n"] == 1 and metrics["judge/liverag/faithfulness_n"] == 4
    assert metrics["judge/pairwise/score/all"] == 0.0
    warnings = [m for m in caplog.messages if "no gold answer" in m]
    assert any("liverag" in m and "3 of 4" in m for m in warnings)
    assert any("pairwise" in m and "3 of 4" in m for m in warnings)


def test_table1_distribution_by_hop():
    records = synthetic_records(6)  # hops: single, multi, single, multi, single, multi
    values = [(2, 1), (2, 1), (1, 0), (-1, -1), (2, 1), None]
    for record, v in zip(records, values):
        record.judges = {"lr": {"parse_failed": True} if v is None
                         else {"correctness": v[0], "faithfulness": v[1]}}
    m = _judge("liverag", name="lr").summary(records)
    assert m["judge/lr/n_judged"] == 6 and m["judge/lr/parse_failures"] == 1
    assert m["judge/lr/correctness/all"] == pytest.approx((2 + 2 + 1 - 1 + 2) / 5)
    assert m["judge/lr/correctness/single"] == pytest.approx((2 + 1 + 2) / 3)
    assert m["judge/lr/correctness/multi"] == pytest.approx((2 - 1) / 2)
    assert m["judge/lr/correctness_share_2/single"] == pytest.approx(2 / 3)
    assert m["judge/lr/correctness_share_1/single"] == pytest.approx(1 / 3)
    assert m["judge/lr/correctness_share_-1/multi"] == pytest.approx(1 / 2)
    assert m["judge/lr/faithfulness_share_0/all"] == pytest.approx(1 / 5)
    for hop in ("single", "multi"):
        assert sum(m[f"judge/lr/correctness_share_{v}/{hop}"] for v in (2, 1, 0, -1)) == pytest.approx(1.0)


def test_hook_writes_report_counts_eval_cost_and_reuses_given_engine(tmp_path):
    engine = ScriptedEngine(lambda r: GOOD)
    root = judge_root("liverag")
    records = synthetic_records(2)
    factory = factory_with(engine, root)
    metrics = evaluate_records(root.judge, records, tmp_path, tmp_path / "cache", factory)
    assert factory.engines == {next(iter(factory.engines)): engine}  # the run's engine, nothing loaded
    assert records[0].judges["liverag"]["correctness"] == 2
    assert metrics["judge/liverag/correctness/all"] == 2 and metrics["judge/liverag/parse_failures"] == 0
    assert metrics["eval/llm_calls"] == 2 and metrics["eval/prompt_tokens"] == 2
    assert metrics["eval/completion_tokens"] == 2 and metrics["eval/llm_retries"] == 0
    report = (tmp_path / "eval_report.md").read_text()
    assert "Judge `liverag`" in report and "correctness 2" in report and "| single |" in report
    assert "LLM calls: 2" in report
    assert evaluate_records(judge_root().judge, records, tmp_path, tmp_path) == {}


def test_duplicate_judge_names_and_bad_nodes_are_refused(tmp_path):
    root = judge_root("liverag", "crag", crag={"name": "liverag"})
    with pytest.raises(ConfigError, match="two judges are named 'liverag'"):
        evaluate_records(root.judge, synthetic_records(1), tmp_path, tmp_path)
    bad = OmegaConf.create({"llm": {"_target_": "x"}, "judge": {"llm": "${llm}", "typo": {"kind": "liverag"}}})
    with pytest.raises(ConfigError, match="judge.typo: not a judge"):
        evaluate_records(bad.judge, synthetic_records(1), tmp_path, tmp_path)
    with pytest.raises(ConfigError, match="fields.correctness: scales are integers or labels"):
        _judge("liverag", fields={"correctness": [1.5, 0.5]})


def test_misspelt_judge_settings_fail_when_built():
    with pytest.raises(ConfigError, match="judge.nuggets: .*max_nugets"):
        _judge("nuggets", max_nugets=3)
    with pytest.raises(ConfigError, match="judge.liverag: .*temprature"):
        _judge("liverag", temprature=0.0)
