"""The comparability gate of a sweep: the one place that says which columns its cells may be ranked on.

`rag.judge.nugget_sets.NuggetSetGate` holds the rule (nugget-based scores compare only over topics scored against
one nugget set); this builds it over a sweep folder's complete cells, so the summary, the significance marks, the
AutoJudge leaderboards, the report and W&B all ask the same gate.
"""

from __future__ import annotations

from rag.judge.nugget_sets import POOL_HINT, NuggetSetGate, cell_sets
from rag.sweep.cells import SweepFolder


def sweep_gate(sweep: SweepFolder, labels: dict[str, str] | None = None) -> NuggetSetGate:
    """The sweep's comparability gate over its complete cells (judge metric prefix -> topic -> nugget-set
    identity, from metrics.json, else from the answers), its notices ending with what to run (`POOL_HINT`)."""
    sets = {c.name: cell_sets(c.metrics, lambda c=c: c.run.records() if c.run.has_answers else [])
            for c in sweep.cells if c.complete}
    return NuggetSetGate(sets, labels or {}, POOL_HINT.format(sweep=sweep.dir))
