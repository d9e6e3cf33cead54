"""jobs.chaos without a cluster: which cells are drawn, how each is stopped, and what it refuses."""

from __future__ import annotations

import pytest

from jobs.chaos import WAYS, main, victims
from rag.core.errors import ConfigError


def test_a_quarter_of_the_cells_drawn_seeded_the_ways_in_turn():
    drawn = victims(8, 0.25, seed=0)
    assert len(drawn) == 2 and drawn == victims(8, 0.25, seed=0)  # seeded: the same cells again
    assert list(drawn.values()) == list(WAYS) and sorted(drawn) == list(drawn)
    assert len(victims(3, 0.1, seed=0)) == 1  # at least one
    assert len(victims(5, 1.0, seed=1)) == 5
    assert {frozenset(victims(8, 0.25, seed=s)) for s in range(10)} != {frozenset(drawn)}  # the seed matters
    with pytest.raises(ConfigError, match=r"--share=0: a share of the cells in \(0, 1\]"):
        victims(8, 0, seed=0)


def test_a_launched_multirun_needs_a_new_folder(tmp_path, capsys):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "multirun.yaml").write_text("{}\n")
    assert main([str(tmp_path / "old"), "--", "python", "-m", "rag.main", "-m"]) == 2
    assert "is not empty: the multirun needs a new sweep folder" in capsys.readouterr().err
