"""Leaderboard correlation: does a judge rank systems as people do? (AutoNuggetizer sections 5.2-5.3)

Input: one score per (system, topic) cell from the judge and from the humans. Three levels, as the AutoNuggetizer
paper reports them:

- run level: each system's mean over the topics it has on both sides; Kendall's tau-b, Spearman's rho, tau_ap_b
  (Urbano & Marrero, ICTIR 2017, both rankings may tie) and Kendall@k (tau-b over the k systems the humans rank
  highest: agreement where a leaderboard is read) between the two system rankings;
- per topic: tau-b between the systems' scores on each topic with at least 3 systems, averaged over the topics
  where it is defined (undefined, with the reason, when no topic has 3 systems, e.g. pairwise labels);
- pooled: tau-b and Spearman over every (system, topic) cell at once.

Every coefficient gets a 95% percentile bootstrap interval over topics (resampled with replacement, seeded). A
resample where a coefficient is undefined (a constant side) is left out of its interval; when that leaves fewer than
95% of the resamples, the row's note says so, as it names coefficients undefined on the data itself. Over one topic
a bootstrap has no spread: no interval, and the note says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from eval.agreement import kendall_tau, tau_ap_b
from rag.metrics.stats import NAN2, percentile_interval, too_few_units

Cells = Mapping[tuple[str, str], float]
MIN_SYSTEMS = 3


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho; NaN when either side is constant or has fewer than 3 items."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 3 or np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan
    return float(spearmanr(x, y).statistic)


def kendall_at_k(reference: Sequence[float], candidate: Sequence[float], k: int) -> float:
    """Kendall's tau-b over the k items the reference scores highest (ties at the cut: the first in input order)."""
    reference, candidate = np.asarray(reference, dtype=float), np.asarray(candidate, dtype=float)
    if k < 2 or len(reference) < k:
        return math.nan
    top = np.argsort(-reference, kind="stable")[:k]
    return kendall_tau(reference[top], candidate[top])


@dataclass
class LeaderboardRow:
    """One level of one evaluation against one human reference."""

    evaluation: str
    reference: str
    level: str
    n_systems: int
    n_topics: int
    values: dict[str, float]
    intervals: dict[str, tuple[float, float]]
    reason: str = ""

    def row(self) -> dict[str, Any]:
        out: dict[str, Any] = {"evaluation": self.evaluation, "reference": self.reference, "level": self.level,
                               "n_systems": self.n_systems, "n_topics": self.n_topics}
        for name, value in self.values.items():
            lo, hi = self.intervals.get(name, NAN2)
            out.update({name: value, f"{name}_lo": lo, f"{name}_hi": hi})
        out["reason"] = self.reason
        return out


def _matrix(cells: Cells, systems: Sequence[str], topics: Sequence[str]) -> np.ndarray:
    return np.array([[cells.get((s, t), math.nan) for t in topics] for s in systems], dtype=float)


def _run_level(judge: np.ndarray, human: np.ndarray, k: int) -> dict[str, float]:
    both = ~np.isnan(judge) & ~np.isnan(human)
    with np.errstate(invalid="ignore"):
        mj = np.where(both, judge, 0).sum(axis=1) / both.sum(axis=1)
        mh = np.where(both, human, 0).sum(axis=1) / both.sum(axis=1)
    keep = ~np.isnan(mj) & ~np.isnan(mh)
    mj, mh = mj[keep], mh[keep]
    if len(mj) < MIN_SYSTEMS:
        return dict.fromkeys(("tau_b", "spearman", "tau_ap_b", f"kendall_at_{k}"), math.nan)
    return {"tau_b": kendall_tau(mh, mj), "spearman": spearman(mh, mj), "tau_ap_b": tau_ap_b(mh, mj),
            f"kendall_at_{k}": kendall_at_k(mh, mj, k)}


def _per_topic(judge: np.ndarray, human: np.ndarray) -> np.ndarray:
    """tau-b per topic (column) over the systems with both scores; NaN for a topic with fewer than 3 systems or a
    constant side. A topic's tau does not depend on the other topics, so the bootstrap resamples these values."""
    taus = np.full(judge.shape[1], math.nan)
    for j in range(judge.shape[1]):
        both = ~np.isnan(judge[:, j]) & ~np.isnan(human[:, j])
        if both.sum() >= MIN_SYSTEMS:
            taus[j] = kendall_tau(human[both, j], judge[both, j])
    return taus


def _mean_defined(values: np.ndarray) -> float:
    defined = values[~np.isnan(values)]
    return float(defined.mean()) if len(defined) else math.nan


def _pooled(judge: np.ndarray, human: np.ndarray) -> dict[str, float]:
    both = ~np.isnan(judge) & ~np.isnan(human)
    return {"tau_b": kendall_tau(human[both], judge[both]), "spearman": spearman(human[both], judge[both])}


def _ci(samples: list[float], n_topics: int) -> tuple[float, float]:
    """95% percentile interval over topic resamples; none over fewer than two topics (`too_few_units`)."""
    interval = percentile_interval(samples, n_topics, "topic")
    return (interval.low, interval.high) if interval.defined else NAN2


#: below this share of resamples where a coefficient is defined, its interval is flagged in the row's note
MIN_DEFINED_SHARE = 0.95


def _note(values: dict[str, float], boot: list[dict[str, float]], reason: str) -> str:
    """Why a row, or some of its coefficients, are undefined; and intervals resting on part of the resamples only
    (a resample whose judge side is constant has no coefficient: it is left out, which the note says)."""
    undefined = [name for name, v in values.items() if math.isnan(v)]
    if len(undefined) == len(values):
        return reason
    notes = [f"{', '.join(undefined)} undefined ({reason})"] if undefined else []
    for name, v in values.items():
        if math.isnan(v) or not boot:
            continue
        share = sum(1 for b in boot if not math.isnan(b[name])) / len(boot)
        if share < MIN_DEFINED_SHARE:
            notes.append(f"{name} interval over {100 * share:.0f}% of resamples (undefined in the rest)")
    return "; ".join(notes)


def leaderboard_correlation(evaluation: str, reference: str, judge: Cells, human: Cells, k: int = 5,
                            n_boot: int = 1000, seed: int = 0) -> list[LeaderboardRow]:
    """The three levels (module docstring) of `judge` against `human` over their common (system, topic) cells."""
    common = [c for c in judge if c in human and not math.isnan(judge[c]) and not math.isnan(human[c])]
    systems = sorted({s for s, _ in common})
    topics = sorted({t for _, t in common})
    mj, mh = _matrix(judge, systems, topics), _matrix(human, systems, topics)
    mj[np.isnan(mh)] = math.nan
    mh[np.isnan(mj)] = math.nan
    rng = np.random.default_rng(seed)
    samples = [rng.integers(0, len(topics), len(topics)) for _ in range(n_boot)] if topics else []

    no_interval = too_few_units(len(topics), "topic")

    def row(level: str, values: dict[str, float], boot: list[dict[str, float]], reason: str) -> LeaderboardRow:
        intervals = {name: _ci([b[name] for b in boot], len(topics)) for name in values}
        note = _note(values, [] if no_interval else boot, reason)
        if no_interval and any(not math.isnan(v) for v in values.values()):  # a value, but no interval: say why
            note = "; ".join(n for n in (note, f"no interval: {no_interval}") if n)
        return LeaderboardRow(evaluation, reference, level, len(systems), len(topics), values, intervals, note)

    taus = _per_topic(mj, mh)
    return [row("run", _run_level(mj, mh, k), [_run_level(mj[:, idx], mh[:, idx], k) for idx in samples],
                f"fewer than {MIN_SYSTEMS} systems, or a constant side"),
            row("topic", {"tau_b": _mean_defined(taus)}, [{"tau_b": _mean_defined(taus[idx])} for idx in samples],
                f"no topic has {MIN_SYSTEMS} systems with both scores" if np.isnan(taus).all()
                else "constant on every topic"),
            row("pooled", _pooled(mj, mh), [_pooled(mj[:, idx], mh[:, idx]) for idx in samples], "a constant side")]
