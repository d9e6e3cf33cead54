"""AutoNuggetizer score formulas: hand-worked cases and equality with nuggetizer 0.0.5's own metric code."""

from __future__ import annotations

import json
import random

import pytest
from nuggetizer.core.metrics import calculate_global_metrics, calculate_nugget_scores

from eval.nuggets import SCORE_NAMES, nugget_scores, read_nugget_file, score_assign_records

OURS_TO_THEIRS = {"vital_strict": "strict_vital_score", "all_strict": "strict_all_score", "vital": "vital_score",
                  "all": "all_score"}


def _n(importance: str, assignment: str) -> dict[str, str]:
    return {"text": f"{importance}-{assignment}", "importance": importance, "assignment": assignment}


def test_hand_worked_answer():
    # 3 vital (support, partial, not) + 2 okay (support, partial)
    nuggets = [_n("vital", "support"), _n("vital", "partial_support"), _n("vital", "not_support"),
               _n("okay", "support"), _n("okay", "partial_support")]
    scores = nugget_scores(nuggets)
    assert scores["vital_strict"] == pytest.approx(1 / 3)
    assert scores["all_strict"] == pytest.approx(2 / 5)
    assert scores["vital"] == pytest.approx(1.5 / 3)
    assert scores["all"] == pytest.approx(3.0 / 5)


def test_no_vital_nuggets_and_failed_labels():
    scores = nugget_scores([_n("okay", "support"), _n("failed", "partial_support")])
    assert scores["vital_strict"] == 0.0 and scores["vital"] == 0.0
    assert scores["all_strict"] == pytest.approx(0.5)
    assert scores["all"] == pytest.approx(0.75)
    # a "failed" assignment counts as no support but stays in the denominator, as in nuggetizer
    assert nugget_scores([_n("vital", "support"), _n("vital", "failed")])["vital_strict"] == pytest.approx(0.5)


def test_run_score_is_mean_over_topics():
    records = [{"qid": "a", "nuggets": [_n("vital", "support")]},
               {"qid": "b", "nuggets": [_n("vital", "not_support"), _n("vital", "partial_support")]}]
    per, run = score_assign_records(records)
    assert [p["qid"] for p in per] == ["a", "b"]
    assert run["vital_strict"] == pytest.approx((1.0 + 0.0) / 2)
    assert run["vital"] == pytest.approx((1.0 + 0.25) / 2)


def _random_records(seed: int, n: int) -> list[dict]:
    rng = random.Random(seed)
    labels = ["support", "partial_support", "not_support", "failed"]
    records = []
    for i in range(n):
        k = rng.randint(0, 22)
        records.append({"qid": str(i), "query": f"q{i}", "answer_text": "x", "run_id": "r",
                        "nuggets": [{"text": f"n{j}", "importance": rng.choice(["vital", "okay", "failed"]),
                                     "assignment": rng.choice(labels)} for j in range(k)]})
    return records


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equal_to_nuggetizer_metric_code(seed):
    records = _random_records(seed, 60)
    per, run = score_assign_records(records)
    for ours, record in zip(per, records):
        theirs = calculate_nugget_scores(record["qid"], record["nuggets"])
        for name in SCORE_NAMES:
            assert ours[name] == pytest.approx(getattr(theirs, OURS_TO_THEIRS[name]), abs=1e-9)
    theirs_global = calculate_global_metrics(records)
    for name in SCORE_NAMES:
        assert run[name] == pytest.approx(theirs_global[OURS_TO_THEIRS[name]], abs=1e-9)


def test_reads_nuggetizer_create_and_assign_files(tmp_path):
    create = tmp_path / "nuggets.jsonl"
    create.write_text(json.dumps({"query": "q", "qid": "7", "nuggets": [
        {"text": "a", "importance": "vital"}, {"text": "b", "importance": "okay"}]}) + "\n")
    assign = tmp_path / "final_assignments.jsonl"
    assign.write_text(json.dumps({"query": "q", "qid": "7", "answer_text": "a", "response_length": 1,
                                  "run_id": "ragnarok", "nuggets": [
                                      {"text": "a", "importance": "vital", "assignment": "support"},
                                      {"text": "b", "importance": "okay", "assignment": "not_support"}]}) + "\n")
    nuggets = read_nugget_file(create)
    assert nuggets["7"]["nuggets"] == [{"text": "a", "importance": "vital"}, {"text": "b", "importance": "okay"}]
    assert read_nugget_file(assign)["7"]["nuggets"] == nuggets["7"]["nuggets"]  # assign files carry nuggets too
    from rag.core.io import read_jsonl

    _, run = score_assign_records(read_jsonl(assign))
    assert run == {"vital_strict": 1.0, "all_strict": 0.5, "vital": 1.0, "all": 0.5}
