"""The two docs sessions of `make test` (tests/docs/shards.py): every documented command runs in exactly one, a row
in the same one as the row that makes the folder it reads and as the rows sharing its fixture, and the measured
seconds are split about evenly."""

from __future__ import annotations

import pytest

from tests.docs.shards import _needs, assign, parse, row_id, weights
from tests.docs.table import ROWS, Run

MAIN = sorted(t for t, r in ROWS.items() if isinstance(r, Run) and r.venv == "main")


def test_each_row_in_one_shard_with_its_producers_and_fixture_sharers():
    placed = assign(MAIN, 2)
    assert set(placed) == set(MAIN) and set(placed.values()) == {1, 2}
    makes = {r.makes: t for t, r in ROWS.items() if isinstance(r, Run) and r.makes}
    readers: dict[str, set[int]] = {}
    for text in MAIN:
        for name in _needs(text):
            readers.setdefault(name, set()).add(placed[text])
            if name in makes:
                assert placed[makes[name]] == placed[text], (text, makes[name])
    assert all(len(shards) == 1 for shards in readers.values()), readers
    assert any(t == "make demo" for t in MAIN) and placed["python -m rag.export.trec outputs/runs/<date>/<time> "
                                                            "--run-id my-run"] == placed["make demo"]


def test_the_measured_seconds_are_split_about_evenly():
    placed, known = assign(MAIN, 2), weights()
    load = [sum(known.get(row_id(t), 20.0) for t in MAIN if placed[t] == k) for k in (1, 2)]
    assert abs(load[0] - load[1]) <= max(known.values())  # no better than the largest row allows
    assert set(known) <= {row_id(t) for t in ROWS}  # every listed row still exists


def test_the_shard_setting_is_read_or_refused():
    assert parse(None) is None and parse("2/2") == (2, 2)
    for bad in ("0/2", "3/2", "1", "a/b"):
        with pytest.raises(pytest.UsageError, match="RAG_TEST_SHARD"):
            parse(bad)
