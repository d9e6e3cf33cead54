"""Judges with a scripted engine: parse failures, batched re-asks, schemas, missing gold answers, reports."""

from __future__ import annotations

import logging

import pytest
from evaltools import ScriptedEngine, prompt_text, synthetic_records
from omegaconf import OmegaConf

from eval.engines import llm_key
from eval.hook import evaluate_records
from eval.judges import build_judge
from eval.report import judge_summary

GOOD = '{"correctness": 2, "faithfulness": 1}'


def test_malformed_outputs_become_counted_parse_failures():
    engine = ScriptedEngine(lambda r: "I think this answer is quite good overall.")
    judge = build_judge({"name": "lr", "kind": "liverag", "max_retries": 2})
    records = synthetic_records(3)
    results = judge.judge(engine, records)
    assert all(r["parse_failed"] and r["attempts"] == 3 for r in results)
    assert [len(b) for b in engine.batches] == [3, 3, 3]  # one batch per round, all three re-asked
    seeds = [{r.params.seed for r in batch} for batch in engine.batches]
    assert len(set.union(*seeds)) == 3  # a new seed each round, so the cache cannot replay the bad output
    assert all(r.params.temperature >= 0.2 for r in engine.batches[1])
    for record, result in zip(records, results):
        record["judges"] = {"lr": result}
    metrics = judge_summary("lr", "liverag", records)
    assert metrics["judge/lr/parse_failures"] == 3
    assert metrics["judge/lr/correctness_mean"] is None  # never 0 or NaN for unparsable outputs
    assert metrics["judge/lr/correctness_n"] == 0


def test_only_failed_items_are_reasked():
    def respond(request):
        text = prompt_text(request)
        if "fact 1" in text and request.params.seed == 0:
            return "correctness=great"  # bad on the first try only
        return GOOD if "fact 0" in text else '{"correctness": 1, "faithfulness": 0}'

    engine = ScriptedEngine(respond)
    results = build_judge({"name": "lr", "kind": "liverag"}).judge(engine, synthetic_records(2))
    assert [len(b) for b in engine.batches] == [2, 1]
    assert results[0] == {"correctness": 2, "faithfulness": 1, "attempts": 1}
    assert results[1] == {"correctness": 1, "faithfulness": 0, "attempts": 2}


@pytest.mark.parametrize("supports", [True, False])
def test_schema_only_where_supported(supports):
    engine = ScriptedEngine(lambda r: GOOD, supports_json_schema=supports)
    build_judge({"name": "lr", "kind": "liverag"}).judge(engine, synthetic_records(1))
    schema = engine.batches[0][0].params.json_schema
    if supports:
        assert schema["properties"]["correctness"] == {"type": "integer", "enum": [2, 1, 0, -1]}
        assert schema["properties"]["faithfulness"]["enum"] == [1, 0, -1]
        assert "minimum" not in str(schema)
    else:
        assert schema is None


def test_crag_and_pairwise_scores():
    def respond(request):
        text = prompt_text(request)
        if "Grade the generated answer" in text:
            return 'Explanation first. {"explanation": "close", "grade": "acceptable"}'
        return '{"explanation": "same facts", "verdict": "tie"}'

    engine = ScriptedEngine(respond)
    crag = build_judge({"name": "crag", "kind": "crag"}).judge(engine, synthetic_records(1))[0]
    pair = build_judge({"name": "pw", "kind": "pairwise"}).judge(engine, synthetic_records(1))[0]
    assert (crag["grade"], crag["score"]) == ("acceptable", 0.5)
    assert (pair["verdict"], pair["score"], pair["explanation"]) == ("tie", 0.5, "same facts")


def test_missing_gold_skips_fields_with_count_and_warning(caplog, tmp_path):
    records = synthetic_records(4)
    for r in records[:3]:
        r["gold_answer"] = None
        r["gold_docs"] = []
    engine = ScriptedEngine(lambda r: GOOD + ' {"explanation": "x", "verdict": "worse"}')
    cfg = OmegaConf.create({"llm": {"_target_": "scripted"}, "judge": {"enabled": True, "judges": [
        {"name": "liverag", "kind": "liverag", "llm": "${llm}"},
        {"name": "pairwise", "kind": "pairwise", "llm": "${llm}"}]}})
    with caplog.at_level(logging.WARNING):
        metrics = evaluate_records(cfg.judge, records, run_dir=tmp_path, cache_dir=tmp_path / "cache",
                                   engines={llm_key(cfg.llm): engine})
    lr = [r["judges"]["liverag"] for r in records]
    assert all("correctness" not in x and x["faithfulness"] == 1 and x["skipped"] == ["correctness"] for x in lr[:3])
    assert lr[3]["correctness"] == 2
    assert all(r["judges"]["pairwise"]["skip_reason"] == "no gold answer" for r in records[:3])
    assert records[3]["judges"]["pairwise"]["verdict"] == "worse"
    # pairwise was asked only for the record that has a gold answer
    pairwise_prompts = [r for b in engine.batches for r in b if "Compare the generated answer" in prompt_text(r)]
    assert len(pairwise_prompts) == 1
    # the ground-truth sections are left out of the LiveRAG prompt when there is no gold answer
    assert all("Ground truth answer" not in prompt_text(r) for r in engine.batches[0][:3])
    assert metrics["judge/liverag/skipped_no_gold"] == 3 and metrics["judge/pairwise/skipped_no_gold"] == 3
    assert metrics["judge/liverag/correctness_n"] == 1 and metrics["judge/liverag/faithfulness_n"] == 4
    assert metrics["judge/pairwise/score_mean"] == 0.0
    warnings = [m for m in caplog.messages if "no gold answer" in m]
    assert any("liverag" in m and "3 of 4" in m for m in warnings)
    assert any("pairwise" in m and "3 of 4" in m for m in warnings)


def test_table1_distribution_by_hop():
    records = synthetic_records(6)  # hops: single, multi, single, multi, single, multi
    values = [(2, 1), (2, 1), (1, 0), (-1, -1), (2, 1), None]
    for record, v in zip(records, values):
        record["judges"] = {"lr": {"parse_failed": True} if v is None
                            else {"correctness": v[0], "faithfulness": v[1]}}
    m = judge_summary("lr", "liverag", records)
    assert m["judge/lr/n"] == 6 and m["judge/lr/parse_failures"] == 1
    assert m["judge/lr/correctness_mean"] == pytest.approx((2 + 2 + 1 - 1 + 2) / 5)
    assert m["judge/lr/correctness_mean_single"] == pytest.approx((2 + 1 + 2) / 3)
    assert m["judge/lr/correctness_mean_multi"] == pytest.approx((2 - 1) / 2)
    assert m["judge/lr/correctness_share_2_single"] == pytest.approx(2 / 3)
    assert m["judge/lr/correctness_share_1_single"] == pytest.approx(1 / 3)
    assert m["judge/lr/correctness_share_-1_multi"] == pytest.approx(1 / 2)
    assert m["judge/lr/faithfulness_share_0"] == pytest.approx(1 / 5)
    for hop in ("single", "multi"):
        assert sum(m[f"judge/lr/correctness_share_{v}_{hop}"] for v in (2, 1, 0, -1)) == pytest.approx(1.0)


def test_hook_writes_report_and_reuses_given_engine(tmp_path):
    engine = ScriptedEngine(lambda r: GOOD)
    cfg = OmegaConf.create({"llm": {"_target_": "not.built.Engine"}, "judge": OmegaConf.load(
        "conf/judge/liverag.yaml")})
    records = synthetic_records(2)
    metrics = evaluate_records(cfg.judge, records, tmp_path, tmp_path / "cache", engines={llm_key(cfg.llm): engine})
    assert records[0]["judges"]["liverag"]["correctness"] == 2
    assert metrics["judge/liverag/correctness_mean"] == 2 and metrics["judge/liverag/parse_failures"] == 0
    report = (tmp_path / "eval_report.md").read_text()
    assert "Judge `liverag`" in report and "correctness 2" in report and "| single |" in report
    assert evaluate_records(OmegaConf.load("conf/judge/none.yaml"), records, tmp_path, tmp_path) == {}


def test_duplicate_judge_names_are_refused(tmp_path):
    engine = ScriptedEngine(lambda r: GOOD)
    cfg = OmegaConf.create({"llm": {"_target_": "x"}, "judge": {"enabled": True, "judges": [
        {"name": "a", "kind": "liverag", "llm": "${llm}"}, {"name": "a", "kind": "crag", "llm": "${llm}"}]}})
    with pytest.raises(ValueError, match="two judges are named"):
        evaluate_records(cfg.judge, synthetic_records(1), tmp_path, tmp_path, engines={llm_key(cfg.llm): engine})
