"""Statistics over per-question scores: paired tests, intervals that can exist, corrections, the smallest
difference a comparison can see, and how well a judge agrees with itself.

Every function takes plain per-question numbers, so the sweep summary (`eval.significance`), the report, the
judges' repeats (`rag.judge.repeats`) and `python -m rag.main`'s closing lines share one implementation:

- `paired_comparison`: two systems on the same questions. The paired randomization (permutation) test of the
  mean difference, two-sided (Smucker, Allan & Carterette, CIKM 2007, recommend it for IR), is
  `scipy.stats.permutation_test(permutation_type="samples")`: each question's two scores swap sides at random
  (exactly, over all 2^n swaps, when 2^n is at most the number of resamples); scipy's two-sided p is twice the
  smaller tail. The 95% interval of the difference is `scipy.stats.bootstrap(paired=True, method="percentile")`
  over questions. The effect size is the paired Cohen's d_z, mean difference / standard deviation of the
  differences (ddof 1).
- `adjust_pvalues`: Holm-Bonferroni (step-down, family-wise error) or Benjamini-Hochberg (false discovery rate),
  `statsmodels.stats.multitest.multipletests`.
- `min_detectable_difference`: the difference a paired t-test at `alpha` (two-sided) finds with probability
  `power`, given n and the standard deviation of the paired differences: d_z solved from the noncentral t
  (`statsmodels.stats.power.TTestPower`) times that standard deviation.
- `bootstrap_means`: column means and their percentile bootstrap intervals over items (questions, answers), one
  set of resamples for every column (the report's tables and a run's closing block, `rag.metrics.console`).
- `percentile_interval` / `Interval`: a bootstrap over fewer than two units (one topic, one system, one answer)
  resamples the same value every time; its zero-width "interval" is reported as none, with the reason.
- `self_agreement`: Krippendorff's alpha (the `krippendorff` package) of repeated verdicts on the same answers,
  at the level of measurement of the judge's scale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: a bootstrap needs at least this many resampling units (questions, topics, systems) to have any spread
MIN_UNITS = 2
CORRECTIONS = ("holm", "bh")
_STATSMODELS_METHOD = {"holm": "holm", "bh": "fdr_bh"}
LEVELS = ("nominal", "ordinal", "interval", "ratio")


def plural(n: int, unit: str) -> str:
    return f"{n} {unit}" + ("" if n == 1 else "s")


# -- intervals ----------------------------------------------------------------------------------------------
#: why a paired interval is one point: every question scored alike by both, or every difference the same
IDENTICAL = "identical per-question scores"
CONSTANT = "constant paired difference"


@dataclass(frozen=True)
class Interval:
    """A confidence interval, or none with the reason it cannot be estimated (a zero-width one says why too)."""

    low: float = math.nan
    high: float = math.nan
    #: why there is none, or why a defined one has no width (`IDENTICAL`, `CONSTANT`)
    reason: str = ""

    @property
    def defined(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))

    def text(self, digits: int = 3, scale: float = 1.0, signed: bool = False) -> str:
        """`[lo, hi]`, or `[no interval: <reason>]`."""
        if not self.defined:
            return f"[no interval: {self.reason or 'undefined'}]"
        sign = "+" if signed else ""
        return f"[{scale * self.low:{sign}.{digits}f}, {scale * self.high:{sign}.{digits}f}]"


def too_few_units(n_units: int, unit: str) -> str:
    """Why no bootstrap interval exists over `n_units` units ("" when one does)."""
    if n_units >= MIN_UNITS:
        return ""
    return f"{plural(n_units, unit)}: a bootstrap over fewer than {MIN_UNITS} {unit}s has no spread"


#: an undefined interval (no defined resample)
NAN2 = (math.nan, math.nan)


def percentile_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The percentile bootstrap interval of `samples` at `confidence`, over the samples that are defined (a
    resample where a coefficient is undefined is NaN and left out); `NAN2` when none is."""
    values = np.asarray([s for s in samples if not math.isnan(s)], dtype=float)
    if len(values) == 0:
        return NAN2
    alpha = (1 - confidence) / 2
    return float(np.quantile(values, alpha)), float(np.quantile(values, 1 - alpha))


def percentile_interval(samples: Sequence[float], n_units: int, unit: str = "topic",
                        confidence: float = 0.95) -> Interval:
    """Percentile interval of bootstrap `samples` (NaNs, undefined resamples, left out) drawn over `n_units`
    units; none, with the reason, over fewer than `MIN_UNITS` units or when no resample is defined."""
    reason = too_few_units(n_units, unit)
    if reason:
        return Interval(reason=reason)
    low, high = percentile_ci(samples, confidence)
    return Interval(reason="undefined in every resample") if math.isnan(low) else Interval(low, high)


def bootstrap_means(matrix: np.ndarray, n_boot: int = 1000, seed: int = 0,
                    confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column means of a (items x columns) matrix and their percentile bootstrap CIs over items.

    Items (answers, questions) are resampled with replacement, the same resamples for every column, so the
    intervals of one row of a table come from one set of resamples. Over fewer than two items a resample is the
    data itself: the intervals are NaN (`too_few_units`), never a zero-width band.
    """
    matrix = np.asarray(matrix, dtype=float)
    if matrix.ndim == 1:
        matrix = matrix[:, None]
    n, cols = matrix.shape
    if n == 0:
        empty = np.full(cols, math.nan)
        return empty, empty.copy(), empty.copy()
    mean = matrix.mean(axis=0)
    if n_boot <= 0 or too_few_units(n, "item"):
        return mean, np.full(cols, math.nan), np.full(cols, math.nan)
    rng = np.random.default_rng(seed)
    boots = np.empty((n_boot, cols))
    for start in range(0, n_boot, 200):  # bounded memory: 200 resamples at a time
        idx = rng.integers(0, n, size=(min(200, n_boot - start), n))
        boots[start:start + len(idx)] = matrix[idx].mean(axis=1)
    alpha = (1 - confidence) / 2
    return mean, np.quantile(boots, alpha, axis=0), np.quantile(boots, 1 - alpha, axis=0)


# -- paired comparison --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PairedComparison:
    """System a against system b on the same `n` questions (difference = a - b)."""

    n: int
    mean_a: float
    mean_b: float
    difference: float
    interval: Interval
    #: two-sided p of the paired randomization test (NaN with `reason` when there is nothing to test)
    p_value: float
    #: paired Cohen's d_z: mean difference / sd of the differences (NaN when the differences do not vary)
    effect_size: float
    sd_difference: float
    #: minimum detectable difference at this n and sd (`min_detectable_difference`)
    mdd: float
    #: "exact (k differing questions)" (all 2^k swaps) or "randomized (N resamples)"
    test: str
    reason: str = ""


def _mean_difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x - y, axis=axis)


def _difference_of_means(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def paired_comparison(a: Sequence[float], b: Sequence[float], permutations: int = 10000, bootstrap: int = 2000,
                      seed: int = 0, confidence: float = 0.95, alpha: float = 0.05, power: float = 0.8,
                      unit: str = "question") -> PairedComparison:
    """Compare per-question scores `a` and `b` (same questions, same order); see the module docstring."""
    from scipy.stats import bootstrap as scipy_bootstrap
    from scipy.stats import permutation_test

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired scores need two equal-length lists, got {x.shape} and {y.shape}")
    n = len(x)
    if n == 0:
        return PairedComparison(0, math.nan, math.nan, math.nan, Interval(reason="no shared questions"),
                                math.nan, math.nan, math.nan, math.nan, "", reason="no shared questions")
    diff = x - y
    sd = float(np.std(diff, ddof=1)) if n >= 2 else math.nan
    effect = float(diff.mean() / sd) if n >= 2 and sd > 0 else math.nan
    # a question whose two scores are equal adds 0 under every swap: the test runs over the k that differ (the
    # same p, scaled statistic), exactly whenever 2^k swaps are at most `permutations` (binary scores: EM)
    differ = diff != 0
    k = int(differ.sum())
    test = f"exact ({plural(k, 'differing question')})" if 2 ** k <= permutations else \
        f"randomized ({permutations} resamples)"
    if k <= 1:  # the swaps give +d and -d (or 0): every one is as extreme as the observed, p = 1 (scipy needs 2)
        p_value = 1.0
    else:
        result = permutation_test((x[differ], y[differ]), _mean_difference, permutation_type="samples",
                                  vectorized=True, n_resamples=permutations, alternative="two-sided",
                                  rng=np.random.default_rng(seed))
        p_value = float(min(1.0, result.pvalue))
    reason = too_few_units(n, unit)
    if reason:
        interval = Interval(reason=reason)
    elif np.all(diff == diff[0]):  # one value resampled: scipy warns; the interval is that value, and says why
        interval = Interval(float(diff[0]), float(diff[0]), IDENTICAL if diff[0] == 0 else CONSTANT)
    else:
        boot = scipy_bootstrap((x, y), _difference_of_means, paired=True, vectorized=True, n_resamples=bootstrap,
                               confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed))
        interval = Interval(float(boot.confidence_interval.low), float(boot.confidence_interval.high))
    return PairedComparison(n=n, mean_a=float(x.mean()), mean_b=float(y.mean()), difference=float(diff.mean()),
                            interval=interval, p_value=p_value, effect_size=effect, sd_difference=sd,
                            mdd=min_detectable_difference(sd, n, alpha, power), test=test)


# -- corrections --------------------------------------------------------------------------------------------
def adjust_pvalues(pvalues: Sequence[float], method: str = "holm") -> list[float]:
    """Adjusted p-values of one family of comparisons (NaNs stay NaN and do not count as comparisons)."""
    if method not in CORRECTIONS:
        raise ValueError(f"correction {method!r}: expected one of {', '.join(CORRECTIONS)}")
    from statsmodels.stats.multitest import multipletests

    values = np.asarray(pvalues, dtype=float)
    out = np.full(len(values), math.nan)
    tested = ~np.isnan(values)
    if tested.any():
        out[tested] = multipletests(values[tested], method=_STATSMODELS_METHOD[method])[1]
    return [float(v) for v in out]


# -- power ----------------------------------------------------------------------------------------------------
def min_detectable_difference(sd_difference: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest mean paired difference a two-sided paired t-test at `alpha` detects with probability `power`
    over `n` questions whose differences have standard deviation `sd_difference`: d_z from the noncentral t
    distribution (statsmodels' TTestPower) times `sd_difference`. NaN for n < 2 or an sd that is undefined or 0
    (scores that never vary give no noise to measure a difference against)."""
    if n < 2 or sd_difference is None or math.isnan(sd_difference) or sd_difference == 0:
        return math.nan
    from statsmodels.stats.power import TTestPower

    d_z = TTestPower().solve_power(effect_size=None, nobs=n, alpha=alpha, power=power, alternative="two-sided")
    return float(np.asarray(d_z).item()) * sd_difference


@dataclass(frozen=True)
class SingleRunSensitivity:
    """What one run can tell apart: the MDD against a second system with this run's per-question variance whose
    scores are uncorrelated with this run's (sd of the differences sqrt(2) x this run's sd)."""

    n: int
    mean: float
    sd: float
    sd_difference: float
    mdd: float


def single_run_sensitivity(values: Sequence[float], alpha: float = 0.05, power: float = 0.8) -> SingleRunSensitivity:
    """See `SingleRunSensitivity`: two systems that agree question by question (the usual case: same questions,
    same retrieval) have a smaller sd of differences, so a real comparison can see smaller differences."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    sd = float(np.std(x, ddof=1)) if n >= 2 else math.nan
    sd_diff = math.sqrt(2) * sd if n >= 2 else math.nan
    return SingleRunSensitivity(n, float(x.mean()) if n else math.nan, sd, sd_diff,
                                min_detectable_difference(sd_diff, n, alpha, power))


def sensitivity_text(values: dict[str, Sequence[float]], alpha: float = 0.05, power: float = 0.8) -> str:
    """One line under a run's results (`rag.metrics.console`): per metric (name -> per-question values), the
    smallest difference from another system this many questions can see (`single_run_sensitivity`: against a
    second system whose scores have this run's variance and are uncorrelated with it, so sd of the differences is
    sqrt(2) x this run's sd; systems that agree question by question can tell smaller differences apart)."""
    found = {name: single_run_sensitivity(v, alpha, power) for name, v in values.items() if len(v) >= 2}
    if not found:
        return ""
    counts = {s.n for s in found.values()}
    parts = []
    for name, s in found.items():
        n = f" ({plural(s.n, 'question')})" if len(counts) > 1 else ""
        if math.isnan(s.mdd):
            parts.append(f"{name} none{n}: every answer scores {s.mean:.3g}, no variance")
        else:
            parts.append(f"{name} {s.mdd:.3g}{n}")
    over = f" with {plural(counts.pop(), 'question')}" if len(counts) == 1 else ""
    return (f"Smallest visible difference{over} (paired t-test, alpha {alpha}, power {power}, against an uncorrelated "
            f"system; closer systems see less): {'; '.join(parts)}")


# -- self-agreement of repeated judgements --------------------------------------------------------------------
def self_agreement(verdicts: np.ndarray, level: str = "interval",
                   domain: Sequence[float] | None = None) -> tuple[float, str]:
    """Krippendorff's alpha of a (repeats x answers) matrix (NaN: no verdict) and why it is undefined ("").

    `level`: nominal, ordinal, interval or ratio, as the judge's scale is; `domain`: the scale's values (ordinal
    distances count the values in between, so the full scale matters, not only the values seen).
    """
    if level not in LEVELS:
        raise ValueError(f"level of measurement {level!r}: expected one of {', '.join(LEVELS)}")
    import krippendorff

    data = np.asarray(verdicts, dtype=float)
    paired = data[:, (~np.isnan(data)).sum(axis=0) >= 2] if data.ndim == 2 else data[:, :0]
    if paired.shape[1] == 0:
        return math.nan, "no answer has two verdicts"
    seen = np.unique(paired[~np.isnan(paired)])
    if len(seen) < 2:
        return math.nan, f"every verdict is {seen[0]:g}: no variation to agree on"
    values = sorted({*seen.tolist(), *(float(v) for v in (domain or ()))})
    alpha = krippendorff.alpha(reliability_data=paired, level_of_measurement=level,
                               value_domain=values if level in ("nominal", "ordinal") else None)
    return float(alpha), ""


def answer_spread(verdicts: np.ndarray) -> tuple[float, float]:
    """(mean over answers of the sd of their verdicts (ddof 1), share of answers whose verdict changed) over the
    answers with at least two verdicts; NaNs when none has."""
    data = np.asarray(verdicts, dtype=float)
    sds, changed = [], []
    for column in data.T:
        seen = column[~np.isnan(column)]
        if len(seen) >= 2:
            sds.append(float(np.std(seen, ddof=1)))
            changed.append(float(len(np.unique(seen)) > 1))
    if not sds:
        return math.nan, math.nan
    return float(np.mean(sds)), float(np.mean(changed))
