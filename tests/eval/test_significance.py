"""Paired significance between sweep cells (rag.metrics.stats, eval.significance): our numbers against scipy,
exact enumeration, statsmodels-independent corrections and Krippendorff's published example; a noise-only
difference marked tied while a planted one is significant after correction; nugget-set and judge-noise columns;
intervals that cannot exist say why."""

from __future__ import annotations

import csv
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.stats import bootstrap, false_discovery_control, nct, permutation_test
from scipy.stats import t as student_t

from eval.summary import summarize
from rag.core.io import atomic_write_jsonl
from rag.metrics.stats import (
    adjust_pvalues,
    min_detectable_difference,
    paired_comparison,
    percentile_interval,
    self_agreement,
    single_run_sensitivity,
)


# -- the statistics against independent computations ---------------------------------------------------------
def _exact_p(diff: np.ndarray) -> float:
    """Smucker et al.'s randomization test by enumeration: the share of all 2^n sign assignments whose |mean|
    reaches the observed one."""
    observed = abs(diff.mean())
    flips = np.array(list(itertools.product((1.0, -1.0), repeat=len(diff))))
    return float(np.mean(np.abs((flips * diff).mean(axis=1)) >= observed - 1e-12))


def test_paired_comparison_against_exact_enumeration_and_scipy():
    rng = np.random.default_rng(7)
    a = rng.random(12)
    b = a - 0.08 + rng.normal(0, 0.15, 12)
    ours = paired_comparison(a, b, permutations=10000, bootstrap=3000, seed=3)
    assert ours.test == "exact (12 differing questions)"
    assert ours.p_value == pytest.approx(_exact_p(a - b), abs=1e-12)
    diff = a - b
    assert ours.difference == pytest.approx(diff.mean()) and ours.mean_a == pytest.approx(a.mean())
    assert ours.effect_size == pytest.approx(diff.mean() / diff.std(ddof=1))
    # the interval: scipy's paired percentile bootstrap on the same scores and seed
    ref = bootstrap((a, b), lambda x, y, axis: x.mean(axis) - y.mean(axis), paired=True, vectorized=True,
                    n_resamples=3000, method="percentile", rng=np.random.default_rng(3))
    assert (ours.interval.low, ours.interval.high) == pytest.approx(
        (ref.confidence_interval.low, ref.confidence_interval.high), abs=1e-12)

    # many questions: the randomized test, scipy's own call on the same scores and seed
    a, b = rng.random(60), rng.random(60)
    ours = paired_comparison(a, b, permutations=5000, seed=11)
    ref = permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples",
                           vectorized=True, n_resamples=5000, rng=np.random.default_rng(11))
    assert ours.test == "randomized (5000 resamples)" and ours.p_value == pytest.approx(ref.pvalue, abs=1e-12)


def test_ties_drop_out_of_the_test_and_identical_scores_give_p_one():
    # exact match scores: questions where both score alike add nothing under any swap
    a = np.array([1, 0, 1, 1, 0, 1, 0, 0] * 5, dtype=float)
    b = a.copy()
    b[[0, 2, 3]] = 0.0
    r = paired_comparison(a, b)
    assert r.test == "exact (3 differing questions)"
    assert r.p_value == pytest.approx(_exact_p(np.array([1.0, 1.0, 1.0])))  # 2/8: all + or all -
    same = paired_comparison(a, a)
    assert same.p_value == 1.0 and math.isnan(same.effect_size) and math.isnan(same.mdd)


def test_a_zero_width_interval_says_why():
    """Issue 51: identical cells, or a constant paired difference, give a one-point interval: it says why (the
    reason significance.csv writes as `ci_note`), where it used to be a bare [d, d]."""
    a = np.array([1, 0, 1, 1, 0, 1, 0, 0] * 5, dtype=float)
    same = paired_comparison(a, a).interval
    assert (same.low, same.high, same.reason) == (0.0, 0.0, "identical per-question scores")
    shifted = paired_comparison(a + 0.25, a).interval
    assert (shifted.low, shifted.high, shifted.reason) == (0.25, 0.25, "constant paired difference")
    assert shifted.text() == "[0.250, 0.250]"  # still an interval where intervals are printed
    varied = paired_comparison(a, a[::-1], bootstrap=200).interval
    assert varied.low < varied.high and varied.reason == ""


def test_holm_and_benjamini_hochberg_against_their_definitions():
    p = [0.01, 0.04, 0.03, 0.005, 0.2, math.nan]
    holm = adjust_pvalues(p, "holm")
    tested = np.array(p[:5])
    order = np.argsort(tested)
    m = len(tested)
    expected = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):  # Holm (1979): step-down, running maximum of (m - rank) * p_(rank)
        running = max(running, min(1.0, (m - rank) * tested[i]))
        expected[i] = running
    assert holm[:5] == pytest.approx(expected.tolist()) and math.isnan(holm[5])
    assert adjust_pvalues(p, "bh")[:5] == pytest.approx(false_discovery_control(tested, method="bh").tolist())
    with pytest.raises(ValueError, match="correction 'bonf'"):
        adjust_pvalues(p, "bonf")


def test_minimum_detectable_difference_has_the_stated_power():
    sd, n = 0.2, 20
    mdd = min_detectable_difference(sd, n, alpha=0.05, power=0.8)
    # power of the two-sided paired t-test at that difference, from the noncentral t directly
    crit = student_t.ppf(0.975, n - 1)
    delta = mdd / sd * math.sqrt(n)
    power = nct.sf(crit, n - 1, delta) + nct.cdf(-crit, n - 1, delta)
    assert power == pytest.approx(0.8, abs=1e-6)
    assert mdd > (1.959964 + 0.841621) * sd / math.sqrt(n)  # the t version is above the normal approximation
    single = single_run_sensitivity([0.1, 0.5, 0.3, 0.9, 0.0, 0.4])
    assert single.sd_difference == pytest.approx(math.sqrt(2) * np.std([0.1, 0.5, 0.3, 0.9, 0.0, 0.4], ddof=1))
    assert single.mdd == pytest.approx(min_detectable_difference(single.sd_difference, 6))


def test_krippendorff_alpha_reproduces_the_published_example():
    """Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": 4 observers x 12 units."""
    n = math.nan
    data = np.array([[1, 2, 3, 3, 2, 1, 4, 1, 2, n, n, n], [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, n, 3],
                     [n, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, n], [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, n]])
    published = {"nominal": 0.743, "ordinal": 0.815, "interval": 0.849, "ratio": 0.797}
    for level, value in published.items():
        assert self_agreement(data, level, [1, 2, 3, 4, 5])[0] == pytest.approx(value, abs=5e-4)
    alpha, reason = self_agreement(np.array([[2.0, 2.0], [2.0, 2.0]]), "ordinal", [-1, 0, 1, 2])
    assert math.isnan(alpha) and reason == "every verdict is 2: no variation to agree on"


def test_an_interval_over_one_unit_is_none_with_the_reason():
    one = percentile_interval([-0.249] * 50, n_units=1, unit="topic")
    assert not one.defined and one.reason.startswith("1 topic: a bootstrap over fewer than 2 topics")
    assert one.text() == f"[no interval: {one.reason}]"
    r = paired_comparison([0.4], [0.1])
    assert r.p_value == 1.0 and not r.interval.defined and r.interval.reason.startswith("1 question")

    from eval.agreement import Run, pair_agreement
    from eval.leaderboard import leaderboard_correlation
    from rag.report.stats import bootstrap_means

    # eval.meta's leaderboard on one topic: the coefficient, no interval, and the note says why
    judge = {("s1", "t1"): 0.1, ("s2", "t1"): 0.5, ("s3", "t1"): 0.3, ("s4", "t1"): 0.9}
    human = {("s1", "t1"): 0.2, ("s2", "t1"): 0.1, ("s3", "t1"): 0.6, ("s4", "t1"): 0.7}
    run_row = leaderboard_correlation("judge/x", "human", judge, human, n_boot=50)[0]
    assert not math.isnan(run_row.values["tau_b"])
    assert all(math.isnan(lo) and math.isnan(hi) for lo, hi in run_row.intervals.values())
    assert "no interval: 1 topic" in run_row.reason
    runs = [Run(f"r{i}", None, topics={"t1": {"a": float(i), "b": float(i * i % 5)}}) for i in range(4)]
    pair = pair_agreement(runs, "a", "b", n_boot=20)
    assert not math.isnan(pair.tau_b) and math.isnan(pair.tau_b_ci[0]) and pair.ci_reason.startswith("1 topic")
    mean, lo, hi = bootstrap_means(np.array([[0.5, 1.0]]), n_boot=20)
    assert mean.tolist() == [0.5, 1.0] and np.isnan(lo).all() and np.isnan(hi).all()


# -- a hand-made sweep with known differences -----------------------------------------------------------------
N = 30


def _cell(sweep: Path, num: int, name: str, f1: np.ndarray, correctness: np.ndarray,
          nugget_sets: list[str] | None = None, repeats: list[np.ndarray] | None = None) -> None:
    cell = sweep / f"{num}_generator={name}"
    (cell / ".hydra").mkdir(parents=True)
    (cell / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"generator={name}"]))
    rows = []
    for i in range(N):
        judges = {"liverag": {"correctness": int(correctness[i]), "faithfulness": 1, "attempts": 1}}
        if repeats is not None:
            judges["liverag"]["repeats"] = [{"repeat": r, "values": {"judge/liverag/correctness": float(v[i])}}
                                            for r, v in enumerate(repeats)]
        if nugget_sets is not None:
            judges["nuggets"] = {"vital_strict": float(f1[i]), "all_strict": 0.5, "vital": 0.5, "all": 0.5,
                                 "nugget_set": nugget_sets[i],
                                 "_values": {"prefix": "nuggets/", "fields": ["vital_strict", "all_strict", "vital",
                                                                              "all"], "reference": True}}
        rows.append({"id": f"q{i}", "question": f"Q{i}", "answer": "a", "hop": "single" if i % 3 else "multi",
                     "scores": {"f1": float(f1[i])}, "judges": judges})
    atomic_write_jsonl(cell / "answers.jsonl", rows)
    metrics = {"n_questions": N}
    for split, keep in (("all", lambda i: True), ("single", lambda i: i % 3), ("multi", lambda i: not i % 3)):
        idx = [i for i in range(N) if keep(i)]
        metrics[f"answer/f1/{split}"] = float(np.mean(f1[idx]))
        metrics[f"judge/liverag/correctness/{split}"] = float(np.mean(correctness[idx]))
    (cell / "metrics.json").write_text(json.dumps(metrics))


def _sweep(root: Path, nugget_sets: bool = False, repeats: bool = False) -> Path:
    """Four cells: b and d are a plus noise (F1 +-0.05, correctness re-drawn alike), c has F1 planted +0.3."""
    rng = np.random.default_rng(0)
    sweep = root / "multirun" / "2025-03-03" / "10-00-00"
    base = rng.uniform(0.1, 0.6, N)
    correctness = rng.integers(-1, 3, N)
    for num, (name, shift) in enumerate((("a", 0.0), ("b", 0.0), ("c", 0.3), ("d", 0.0))):
        f1 = np.clip(base + shift + (rng.normal(0, 0.05, N) if num else 0), 0, 1)
        noisy = np.clip(correctness + (rng.random(N) < 0.15) * rng.choice([-1, 1], N), -1, 2)
        sets = [f"set{i}" if not (name == "b" and i < 4) else f"other{i}" for i in range(N)] if nugget_sets else None
        rep = [np.clip(noisy + (rng.random(N) < 0.3) * rng.choice([-1, 1], N), -1, 2) for _ in range(3)] \
            if repeats else None
        _cell(sweep, num, name, f1, noisy if num else correctness, sets, rep)
    return sweep


def _csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open()))


def test_planted_difference_is_significant_and_noise_is_tied(tmp_path):
    sweep = _sweep(tmp_path)
    summary = summarize(sweep, wandb=False, significance={"permutations": 4000, "bootstrap": 500})
    rows = _csv(sweep / "significance.csv")
    assert len(rows) == 6 * 3 * 3  # every pair of 4 cells x (F1, correctness, faithfulness) x 3 splits
    by = {(r["label_a"], r["label_b"], r["metric"], r["split"]): r for r in rows}
    f1 = {k[:2]: r for k, r in by.items() if k[2:] == ("answer/f1", "all")}
    assert f1[("generator=a", "generator=c")]["significant"] == "True"  # planted: significant after Holm
    assert float(f1[("generator=a", "generator=c")]["difference"]) == pytest.approx(-0.3, abs=0.03)
    assert f1[("generator=a", "generator=b")]["significant"] == "False"
    assert f1[("generator=b", "generator=d")]["significant"] == "False"
    for r in rows:  # one family per metric: 6 pairs x 3 splits, corrected together
        assert int(r["family_size"]) == 18 and r["correction"] == "holm"
        assert float(r["p"]) <= float(r["p_adjusted"]) <= 1.0
        assert float(r["ci_low"]) <= float(r["difference"]) <= float(r["ci_high"])

    # the table's numbers are scipy's on the per-question scores read back from the answers
    def scores(cell: str) -> np.ndarray:
        folder = next(sweep.glob(f"*_generator={cell}"))
        return np.array([json.loads(line)["scores"]["f1"] for line in (folder / "answers.jsonl").open()])

    a, b = scores("a"), scores("b")
    ref = permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples",
                           vectorized=True, n_resamples=4000, rng=np.random.default_rng(0))
    assert float(f1[("generator=a", "generator=b")]["p"]) == pytest.approx(ref.pvalue, abs=1e-6)

    marks = json.loads((sweep / "significance.json").read_text())["marks"]
    assert marks["answer/f1/all"] == {"best": [next(sweep.glob("2_*")).name], "tied": []}  # a lone, real bold
    tied = marks["judge/liverag/correctness/all"]  # correctness: four noisy copies of one verdict set
    assert len(tied["best"]) + len(tied["tied"]) == 4
    md = (sweep / "summary.md").read_text()
    table = md.split("## Cells")[1].split("## Best")[0].splitlines()

    def shown(value: float) -> str:
        return f"{value:.4f}".rstrip("0").rstrip(".")

    for i, row in enumerate(summary.rows):
        line = next(x for x in table if x.startswith(f"| {i} |"))
        f1_text, corr_text = shown(row["answer/f1/all"]), shown(row["judge/liverag/correctness/all"])
        assert (f"**{f1_text}**" in line) == (i == 2)  # only the planted cell, alone
        assert f"**{corr_text}**" in line  # every noisy copy is tied with the best
    assert "statistically tied with the best" in md and "cannot be told from noise" in md
    mdd = json.loads((sweep / "significance.json").read_text())["mdd"]["answer/f1/all"]
    assert mdd["n"] == N and mdd["mdd"] == pytest.approx(min_detectable_difference(mdd["sd_difference"], N))


def test_baseline_mode_marks_better_and_worse_and_a_bad_baseline_is_one_line(tmp_path, caplog):
    sweep = _sweep(tmp_path)
    summarize(sweep, wandb=False, significance={"compare": "baseline", "baseline": ["generator=c"],
                                                "permutations": 2000, "bootstrap": 200})
    rows = _csv(sweep / "significance.csv")
    assert {r["label_a"] for r in rows} == {"generator=c"} and len(rows) == 3 * 3 * 3
    marks = json.loads((sweep / "significance.json").read_text())["marks"]["answer/f1/all"]
    assert sorted(marks["worse"]) == sorted(p.name for p in sweep.glob("[013]_*")) and marks["better"] == []
    md = (sweep / "summary.md").read_text()
    assert "| 2 (baseline) |" in md and " ▼ |" in md
    summarize(sweep, wandb=False, significance={"compare": "baseline", "baseline": ["generator=zz"]})
    assert "significance.baseline=generator=zz: no complete cell of the sweep match" in caplog.text
    assert not (sweep / "significance.csv").exists()  # no tests: no stale file of an earlier summary


def test_nugget_scores_compare_only_over_the_same_nugget_set(tmp_path):
    sweep = _sweep(tmp_path, nugget_sets=True)
    summarize(sweep, wandb=False, significance={"permutations": 1000, "bootstrap": 100})
    rows = [r for r in _csv(sweep / "significance.csv") if r["metric"] == "nuggets/vital_strict" and r["split"] == "all"]
    with_b = [r for r in rows if "generator=b" in (r["label_a"], r["label_b"])]
    assert with_b and all(r["n"] == str(N - 4) and r["dropped_other_nugget_set"] == "4" for r in with_b)
    assert all(r["n"] == str(N) for r in rows if r not in with_b)


def test_judge_noise_says_when_a_difference_is_within_it(tmp_path):
    sweep = _sweep(tmp_path, repeats=True)
    summarize(sweep, wandb=False, significance={"permutations": 1000, "bootstrap": 100})
    rows = {(r["label_a"], r["label_b"], r["split"]): r for r in _csv(sweep / "significance.csv")
            if r["metric"] == "judge/liverag/correctness"}
    row = rows[("generator=a", "generator=b", "all")]

    def repeats(cell: str) -> np.ndarray:
        folder = next(sweep.glob(f"*_generator={cell}"))
        return np.array([[r["values"]["judge/liverag/correctness"] for r in json.loads(line)["judges"]["liverag"]
                          ["repeats"]] for line in (folder / "answers.jsonl").open()])

    expected = math.sqrt(repeats("a").var(axis=1, ddof=1).sum() + repeats("b").var(axis=1, ddof=1).sum()) / N
    assert float(row["judge_noise_sd"]) == pytest.approx(expected, abs=1e-6)
    assert row["within_judge_noise"] == str(abs(float(row["difference"])) < 1.959964 * expected)
    assert all(r["judge_noise_sd"] == "" for r in _csv(sweep / "significance.csv") if r["metric"] == "answer/f1")
