"""Fixtures for the reliability tests (issue 9): the HotpotQA slice of the real data, a SLURM check, and
small real corpus files written per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster.helpers import slurm_unavailable_reason
from tests.conftest import DATA_DIR


@pytest.fixture(scope="session")
def fineweb_gz() -> Path:
    path = DATA_DIR / "liverag_dm" / "fineweb_docs.jsonl.gz"
    if not path.is_file():
        pytest.skip(f"{path} not found; set RAG_DATA_DIR")
    return path


@pytest.fixture(scope="session")
def slurm() -> None:
    reason = slurm_unavailable_reason()
    if reason:
        pytest.skip(f"SLURM not available: {reason}")
