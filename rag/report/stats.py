"""Bootstrap percentile intervals for the report's shares and means (resampling answers or questions)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rag.metrics.stats import NAN2, percentile_ci, too_few_units  # noqa: F401 - the report's shared helpers


def bootstrap_means(matrix: np.ndarray, n_boot: int = 1000, seed: int = 0,
                    confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column means of a (items x columns) matrix and their percentile bootstrap CIs over items.

    Items (answers, questions) are resampled with replacement, the same resamples for every column, so the
    intervals of one row of a table come from one set of resamples. Over fewer than two items a resample is the
    data itself: the intervals are NaN (`rag.metrics.stats.too_few_units`), never a zero-width band.
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


def share_ci(values: Sequence[object], targets: Sequence[object], n_boot: int = 1000, seed: int = 0,
             confidence: float = 0.95) -> list[tuple[float, float, float]]:
    """(share, low, high) of each target value among `values`; NaNs when there are no values."""
    indicator = np.array([[v == t for t in targets] for v in values], dtype=float).reshape(len(values),
                                                                                           len(targets))
    mean, lo, hi = bootstrap_means(indicator, n_boot=n_boot, seed=seed, confidence=confidence)
    return [(float(m), float(a), float(b)) for m, a, b in zip(mean, lo, hi)]
