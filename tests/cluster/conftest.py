"""Fixtures for the cluster tests: the HotpotQA slice of the real data and a SLURM check."""

from __future__ import annotations

import pytest

from tests.cluster.helpers import slurm_unavailable_reason


@pytest.fixture(scope="session")
def slurm() -> None:
    reason = slurm_unavailable_reason()
    if reason:
        pytest.skip(f"SLURM not available: {reason}")
