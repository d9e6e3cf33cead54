"""Kendall tau (= scipy), tau_ap (known answers and a hand-computed case), undefined cases with their reasons,
run folders -> the judge x nugget matrix and the pair table."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
from scipy.stats import kendalltau

from eval.agreement import FEW_RUNS, Run, kendall_tau, main, pair_agreement, tau_ap
from rag.core.io import atomic_write_jsonl
from rag.records import AnswerRecord


@pytest.mark.parametrize("x,y", [
    ([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]),
    ([1, 2, 3, 4, 5], [5, 4, 3, 2, 1]),
    ([0.1, 0.4, 0.2, 0.9, 0.5], [0.3, 0.1, 0.2, 0.8, 0.7]),
    ([1, 1, 2, 3, 3, 4], [2, 1, 2, 4, 3, 3]),  # ties on both sides: tau-b
])
def test_kendall_tau_equals_scipy(x, y):
    assert kendall_tau(x, y) == pytest.approx(kendalltau(x, y).statistic, abs=1e-12)


def test_kendall_tau_and_tau_ap_undefined_for_constant():
    assert math.isnan(kendall_tau([1, 1, 1], [1, 2, 3]))
    # a constant side has no ranking: tau_ap is undefined too, never a perfect 1.0
    assert math.isnan(tau_ap([1, 1, 1], [1, 1, 1])) and math.isnan(tau_ap([3, 2, 1], [0.5, 0.5, 0.5]))


def test_tau_ap_known_answers():
    ref = [4.0, 3.0, 2.0, 1.0, 0.0]
    assert tau_ap(ref, ref) == pytest.approx(1.0)
    assert tau_ap(ref, [0.0, 1.0, 2.0, 3.0, 4.0]) == pytest.approx(-1.0)
    # swap of the top pair: candidate order B, A, C, D. C(2)=0, C(3)=2, C(4)=3
    # tau_ap = 2/3 * (0/1 + 2/2 + 3/3) - 1 = 1/3 (Kendall tau would be 2/3)
    assert tau_ap([4, 3, 2, 1], [3, 4, 2, 1]) == pytest.approx(1 / 3)
    # swap of the bottom pair: A, B, D, C. C(2)=1, C(3)=2, C(4)=2 -> 2/3 * (1 + 1 + 2/3) - 1 = 7/9
    assert tau_ap([4, 3, 2, 1], [4, 3, 1, 2]) == pytest.approx(7 / 9)
    assert kendall_tau([4, 3, 2, 1], [3, 4, 2, 1]) == pytest.approx(kendall_tau([4, 3, 2, 1], [4, 3, 1, 2]))


def test_tau_ap_ties_identical_is_one():
    assert tau_ap([3, 3, 1, 0], [3, 3, 1, 0]) == pytest.approx(1.0)


def _runs(n_runs: int, n_topics: int, transform) -> list[Run]:
    rng = np.random.default_rng(1)
    runs = []
    for r in range(n_runs):
        topics = {}
        for t in range(n_topics):
            a = float(r + rng.uniform(0, 0.5) + t % 3)
            topics[f"t{t}"] = {"A": a, "B": transform(a)}
        runs.append(Run(name=f"run{r}", path=None, topics=topics))
    return runs


def test_pair_agreement_identical_and_reversed():
    same = pair_agreement(_runs(4, 6, lambda a: 2 * a + 1), "A", "B", n_boot=200, seed=3)
    assert same.tau_b == pytest.approx(1.0) and same.tau_ap == pytest.approx(1.0) and same.reason == ""
    assert same.tau_topic == pytest.approx(1.0) and same.n_topics_defined == 6
    assert same.tau_b_ci == pytest.approx((1.0, 1.0))
    rev = pair_agreement(_runs(4, 6, lambda a: -a), "A", "B", n_boot=200, seed=3)
    assert rev.tau_b == pytest.approx(-1.0) and rev.tau_ap == pytest.approx(-1.0)
    assert rev.tau_topic == pytest.approx(-1.0)


def test_pair_agreement_needs_three_runs_and_is_seeded():
    two = pair_agreement(_runs(2, 5, lambda a: a), "A", "B", n_boot=50)
    assert math.isnan(two.tau_b) and math.isnan(two.tau_ap) and two.n_runs == 2 and two.reason == FEW_RUNS
    assert all(math.isnan(v) for v in (*two.tau_b_ci, *two.tau_ap_ci))
    noisy = _runs(5, 8, lambda a: a)
    rng = np.random.default_rng(7)
    for run in noisy:
        for values in run.topics.values():
            values["B"] = values["A"] + float(rng.normal(0, 1.5))
    first = pair_agreement(noisy, "A", "B", n_boot=300, seed=11)
    again = pair_agreement(noisy, "A", "B", n_boot=300, seed=11)
    assert first.tau_b_ci == again.tau_b_ci and first.tau_topic_ci == again.tau_topic_ci
    assert first.tau_b_ci[0] <= first.tau_b <= first.tau_b_ci[1]
    # per-topic tau is the mean of the taus computed topic by topic
    expected = np.mean([kendalltau([r.topics[t]["A"] for r in noisy], [r.topics[t]["B"] for r in noisy]).statistic
                        for t in noisy[0].topics])
    assert first.tau_topic == pytest.approx(expected)


def test_constant_side_is_undefined_with_reason():
    runs = _runs(4, 5, lambda a: 1.0)  # B is the same for every run and topic
    pair = pair_agreement(runs, "A", "B", n_boot=100)
    assert math.isnan(pair.tau_b) and math.isnan(pair.tau_ap) and pair.reason == "constant: B"
    assert all(math.isnan(v) for v in (*pair.tau_b_ci, *pair.tau_ap_ci))
    assert pair.n_topics_defined == 0 and math.isnan(pair.tau_topic)
    both = pair_agreement(_runs(4, 5, lambda a: 1.0), "B", "B", n_boot=10)
    assert both.reason == "constant: B and B"


def test_ties_between_runs_match_scipy():
    """Two runs with equal means: tau-b handles the tie exactly as scipy does."""
    means_a, means_b = [0.2, 0.5, 0.5, 0.9, 0.1], [1.0, 0.0, 2.0, 2.0, 0.5]
    runs = [Run(name=f"r{i}", path=None, topics={"t0": {"A": a, "B": b}}) for i, (a, b) in
            enumerate(zip(means_a, means_b))]
    pair = pair_agreement(runs, "A", "B", n_boot=20)
    assert pair.tau_b == pytest.approx(kendalltau(means_a, means_b).statistic, abs=1e-12)
    assert pair.tau_ap == pytest.approx(tau_ap(means_a, means_b))


def test_question_values_skip_failures_and_bookkeeping():
    record = AnswerRecord.from_json({"id": 1, "scores": {"f1": 0.5, "em": True}, "judges": {
        "liverag": {"correctness": 2, "faithfulness": 1, "attempts": 1},
        "bad": {"parse_failed": True, "raw": "??", "attempts": 3},
        "pairwise": {"verdict": "tie", "score": 0.5}},
        "nuggets": {"vital_strict": 0.25, "all_strict": 0.5, "vital": 0.5, "all": 0.75, "n_nuggets": 4}})
    assert record.evaluation_values() == {"scores/f1": 0.5, "scores/em": 1.0, "judge/liverag/correctness": 2.0,
                                          "judge/liverag/faithfulness": 1.0, "judge/pairwise/score": 0.5,
                                          "nuggets/vital_strict": 0.25, "nuggets/all_strict": 0.5,
                                          "nuggets/vital": 0.5, "nuggets/all": 0.75}


def test_cli_reads_sweep_and_writes_tables(tmp_path):
    sweep = tmp_path / "sweep"
    for r in range(4):
        run = sweep / f"cell{r}"
        rows = [{"id": f"q{t}", "scores": {"f1": r / 10 + t / 100},
                 "judges": {"liverag": {"correctness": (r + t) % 4 - 1, "faithfulness": 1}},
                 "nuggets": {"vital_strict": r / 4, "all_strict": 0.1, "vital": 0.1, "all": 0.1}} for t in range(5)]
        atomic_write_jsonl(run / "answers.jsonl", rows)
        (run / "metrics.json").write_text(json.dumps({"scores/f1": r / 10}))
    out = tmp_path / "agree"
    assert main([str(sweep), "--out", str(out), "--metrics", "scores/f1", "nuggets/vital_strict",
                 "--bootstrap", "100"]) == 0
    rows = list(csv.DictReader((out / "agreement.csv").open()))
    assert len(rows) == 1
    row = rows[0]
    assert (row["eval_a"], row["eval_b"], row["n_runs"], row["n_topics"]) == ("scores/f1", "nuggets/vital_strict",
                                                                             "4", "5")
    assert float(row["tau_b"]) == pytest.approx(1.0) and row["reason"] == ""
    assert float(row["tau_ap"]) == pytest.approx(1.0)
    md = (out / "agreement.md").read_text()
    assert "| scores/f1 | nuggets/vital_strict | 4 | 5 | 1.000" in md
    assert not list(out.glob(".*.tmp"))  # atomic writes leave no temporary files
