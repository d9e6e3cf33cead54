"""The docs sessions' shard selection (`RAG_TEST_SHARD=k/n`, tests/docs/shards.py)."""

from __future__ import annotations

from tests.docs.shards import select


def pytest_collection_modifyitems(session, config, items) -> None:
    select(items, config)
