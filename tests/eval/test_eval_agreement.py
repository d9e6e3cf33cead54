"""Kendall tau (= scipy), tau_ap and its tie-aware variants (known answers, hand-computed cases, an independent
implementation, the definition by expectation), the reference named and used as tau_ap_a's truth, undefined cases
with their reasons, run folders -> the judge x nugget matrix and the pair table."""

from __future__ import annotations

import csv
import importlib.util
import itertools
import json
import math
from importlib.metadata import distribution

import numpy as np
import pytest
from scipy.stats import kendalltau

from eval.agreement import (
    FEW_RUNS,
    Run,
    choose_reference,
    kendall_tau,
    main,
    pair_agreement,
    tau_ap,
    tau_ap_a,
    tau_ap_b,
)
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


def test_tau_ap_needs_no_ties_and_the_variants_take_them():
    # Yilmaz et al.'s tau_ap assumes no ties: with ties it is undefined, never our own tie rule
    assert math.isnan(tau_ap([3, 3, 1, 0], [3, 3, 1, 0]))
    assert tau_ap_b([3, 3, 1, 0], [3, 3, 1, 0]) == pytest.approx(1.0)
    # tau_ap_a: the reference may not tie, the candidate may
    assert math.isnan(tau_ap_a([3, 3, 1, 0], [4, 3, 2, 1]))
    # hand-worked: reference A>B>C, candidate ties A and B at the top. Term I for C: both above it are concordant,
    # mean of 1/(pos-1) over pos 3 = 1/2 -> 2 * 1/2 = 1; term II for the top group {A, B}: k=1 -> 1/1, / (2*2) per
    # item, twice -> 1/2. tau = 2/2 * (1 + 1/2) - 1 = 1/2
    assert tau_ap_a([3, 2, 1], [5, 5, 1]) == pytest.approx(0.5)


def _pyircore():
    """pyircore's AP correlations as TREC AutoJudge's `autojudge-evaluate` ships them (Urbano & Marrero's ircor),
    loaded as one file: the package's own __init__ pulls in its command-line dependencies."""
    path = distribution("autojudge-evaluate").locate_file("autojudge_evaluate/pyircore.py")
    spec = importlib.util.spec_from_file_location("pyircore", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tau_ap_b_equals_autojudge_evaluate_on_tied_scores():
    pyircore = _pyircore()
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(300):
        n = int(rng.integers(3, 12))
        x, y = np.round(rng.uniform(0, 1, n), 1), np.round(rng.uniform(0, 1, n), 1)  # few-topic means tie
        if len(set(x)) < 2 or len(set(y)) < 2:
            continue
        assert tau_ap_b(x, y) == pytest.approx(pyircore.tauap_b(x, y), abs=1e-12)
        checked += 1
    assert checked > 250


def test_tau_ap_a_is_the_expected_tau_ap_over_random_tie_breaks():
    """Urbano & Marrero define tau_ap_a as tau_ap's expectation when the candidate's ties are broken at random."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(3, 7))
        reference = rng.permutation(n).astype(float)
        candidate = np.round(rng.uniform(0, 1, n), 1)
        if len(set(candidate)) < 2:
            continue
        breaks = [tau_ap(reference, candidate - 1e-9 * np.array(p)) for p in itertools.permutations(range(n))]
        assert tau_ap_a(reference, candidate) == pytest.approx(float(np.mean(breaks)), abs=1e-12)
        assert tau_ap(reference, reference) == pytest.approx(1.0)


def test_nugget_scores_are_the_reference_of_tau_ap_a():
    """Runs A..D: nuggets rank A>B>C>D, the judge ranks B>C>A>D. With the nuggets as truth tau_ap_a is 1/3
    (C(2)=1, C(3)=0, C(4)=3: 2/3 * (1 + 0 + 1) - 1); with the judge as truth it is 0 (0 + 1/2 + 1)."""
    nuggets, judge = [4.0, 3.0, 2.0, 1.0], [2.0, 4.0, 3.0, 1.0]
    runs = [Run(name=f"r{i}", path=None, topics={"t0": {"judge/j/c": j, "nuggets/vital_strict": v}})
            for i, (j, v) in enumerate(zip(judge, nuggets))]
    pair = pair_agreement(runs, "judge/j/c", "nuggets/vital_strict", n_boot=10)
    assert pair.reference == "nuggets/vital_strict" and pair.candidate == "judge/j/c"
    assert pair.tau_ap_a == pytest.approx(1 / 3) and pair.row()["reference"] == "nuggets/vital_strict"
    # the order of the pair does not change the reference, nor do the symmetric coefficients change
    turned = pair_agreement(runs, "nuggets/vital_strict", "judge/j/c", n_boot=10)
    assert turned.reference == "nuggets/vital_strict" and turned.tau_ap_a == pytest.approx(1 / 3)
    assert turned.tau_ap_b == pytest.approx(pair.tau_ap_b) == pytest.approx((1 / 3 + 0) / 2)
    judge_ref = pair_agreement(runs, "judge/j/c", "nuggets/vital_strict", n_boot=10, reference="judge")
    assert judge_ref.reference == "judge/j/c" and judge_ref.tau_ap_a == pytest.approx(0.0)
    # run folders carry no human labels: no name is taken for one (the human comparison is eval.meta's)
    assert choose_reference("nuggets/all", "human/vital_strict") == "nuggets/all"
    assert choose_reference("judge/j/c", "scores/f1") == "scores/f1"  # neither: the column


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
    assert same.tau_b == pytest.approx(1.0) and same.tau_ap_a == same.tau_ap_b == pytest.approx(1.0) and same.reason == ""
    assert same.tau_topic == pytest.approx(1.0) and same.n_topics_defined == 6
    assert same.tau_b_ci == pytest.approx((1.0, 1.0))
    rev = pair_agreement(_runs(4, 6, lambda a: -a), "A", "B", n_boot=200, seed=3)
    assert rev.tau_b == pytest.approx(-1.0) and rev.tau_ap_a == rev.tau_ap_b == pytest.approx(-1.0)
    assert rev.tau_topic == pytest.approx(-1.0)


def test_pair_agreement_needs_three_runs_and_is_seeded():
    two = pair_agreement(_runs(2, 5, lambda a: a), "A", "B", n_boot=50)
    assert math.isnan(two.tau_b) and math.isnan(two.tau_ap_a) and math.isnan(two.tau_ap_b) and two.n_runs == 2 and two.reason == FEW_RUNS
    assert all(math.isnan(v) for v in (*two.tau_b_ci, *two.tau_ap_a_ci, *two.tau_ap_b_ci))
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
    assert math.isnan(pair.tau_b) and math.isnan(pair.tau_ap_a) and pair.reason == "constant: B"
    assert all(math.isnan(v) for v in (*pair.tau_b_ci, *pair.tau_ap_a_ci, *pair.tau_ap_b_ci))
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
    # the reference (B, the column) ties: tau_ap_a is undefined and says so; tau_ap_b takes ties on both sides
    assert pair.reference == "B" and math.isnan(pair.tau_ap_a) and pair.reference_ties and pair.reason == ""
    assert pair.tau_ap_b == pytest.approx(tau_ap_b(means_a, means_b))


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
    assert float(row["tau_ap_a"]) == pytest.approx(1.0) and float(row["tau_ap_b"]) == pytest.approx(1.0)
    assert row["reference"] == "nuggets/vital_strict" and row["reference_ties"] == "False"
    md = (out / "agreement.md").read_text()
    assert "| scores/f1 | nuggets/vital_strict | nuggets/vital_strict | 4 | 5 (0) | 1.000" in md
    assert not list(out.glob(".*.tmp"))  # atomic writes leave no temporary files
