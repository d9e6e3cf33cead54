"""Bootstrap percentile intervals for the report's shares and means (resampling answers or questions)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# the report's shared helpers (one implementation, in rag.metrics.stats)
from rag.metrics.stats import NAN2, bootstrap_means, percentile_ci, too_few_units  # noqa: F401


def share_ci(values: Sequence[object], targets: Sequence[object], n_boot: int = 1000, seed: int = 0,
             confidence: float = 0.95) -> list[tuple[float, float, float]]:
    """(share, low, high) of each target value among `values`; NaNs when there are no values."""
    indicator = np.array([[v == t for t in targets] for v in values], dtype=float).reshape(len(values),
                                                                                           len(targets))
    mean, lo, hi = bootstrap_means(indicator, n_boot=n_boot, seed=seed, confidence=confidence)
    return [(float(m), float(a), float(b)) for m, a, b in zip(mean, lo, hi)]
