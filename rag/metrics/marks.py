"""The significance marks, one copy for every table that shows them: the sweep summary (`eval.summary`, from
`eval.significance`'s groups), the report's tables (`rag.report`: Table 1, the strategy comparison, the
leaderboard, the attack table, all reading significance.json through `SweepData.mark`).

A tested column's group in significance.json's `marks` is either `{best: [...], tied: [...]}` (all pairs: the
best cell and every cell not significantly different from it) or `{better: [...], worse: [...]}` (against a
baseline). Whether a column may be marked at all (cells scored against the same nugget sets) is the
comparability gate's rule (`rag.judge.nugget_sets.NuggetSetGate.rankable`), applied by each reader.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: a cell's mark in a tested column, in the order they are looked up
KINDS = ("best", "tied", "better", "worse")
#: how a mean is shown for each mark
SHOWN = {"best": "**{}**", "tied": "**{}**", "better": "{} ▲", "worse": "{} ▼"}
#: the legend under a table whose means carry marks
NOTE = ("Means: **bold** is the best and every strategy statistically tied with it, ▲/▼ significantly "
        "better/worse than the baseline (the sweep summary's paired tests, corrected per metric: "
        "significance.csv in the sweep folder).")


def mark_of(group: Mapping[str, Sequence[str]] | None, cell: str) -> str | None:
    """`cell`'s mark in one column's group: one of `KINDS`, "" (tested, no mark), or None (no group: not tested)."""
    if not isinstance(group, Mapping):
        return None
    return next((kind for kind in KINDS if cell in (group.get(kind) or ())), "")


def marked(text: str, mark: str | None) -> str:
    """`text` as its mark shows it: bold in the group statistically tied with the best, ▲/▼ against a baseline."""
    return SHOWN.get(mark or "", "{}").format(text)
