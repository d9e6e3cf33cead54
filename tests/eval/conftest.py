"""Fixtures for the eval tests: the real LiveRAG dev questions."""

from __future__ import annotations

from typing import Any

import pytest
from evaltools import DATA_DIR


@pytest.fixture(scope="session")
def dev_questions() -> list[Any]:
    """The LiveRAG DataMorgana dev questions from the shared data (RAG_DATA_DIR); missing data fails loudly."""
    from rag.data.questions import DataMorganaQA

    return DataMorganaQA(path="liverag_dm/dev_qa.tsv", data_dir=str(DATA_DIR)).load()
