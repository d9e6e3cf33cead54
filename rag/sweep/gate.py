"""The comparability gate of a sweep: the one place that says which columns its cells may be ranked on.

`rag.judge.nugget_sets.NuggetSetGate` holds the rule (nugget-based scores compare only over topics scored against
one nugget set); this builds it over a sweep folder's complete cells, so the summary, the significance marks, the
AutoJudge leaderboards, the report and W&B all ask the same gate.
"""

from __future__ import annotations

from collections.abc import Mapping

from rag.judge.nugget_sets import POOL_HINT, NuggetSetGate, cell_sets
from rag.sweep.cells import SweepFolder
from rag.sweep.question_sets import question_sets as find_question_sets


def within_question_set(sets: dict[str, dict[str, str]] | None, label: str) -> dict[str, dict[str, str]] | None:
    """A cell's nugget sets with each topic named inside its question set (`<label>: <topic>`), so that two
    question sets that number their topics alike (LiveRAG's dev and live-day files) are never compared topic by
    topic; unchanged for a sweep of one question set (label "")."""
    if not label or not sets:
        return sets
    return {prefix: {f"{label}: {topic}": identity for topic, identity in topics.items()}
            for prefix, topics in sets.items()}


def sweep_gate(sweep: SweepFolder, labels: dict[str, str] | None = None,
               question_sets: Mapping[str, str] | None = None) -> NuggetSetGate:
    """The sweep's comparability gate over its complete cells (judge metric prefix -> topic -> nugget-set
    identity, from metrics.json, else from the answers), its notices ending with what to run (`POOL_HINT`).
    Topics are compared within their question set (`rag.sweep.question_sets`; pass the caller's to read the
    answers once)."""
    if question_sets is None:
        question_sets = find_question_sets(sweep.cells)
    sets = {c.name: within_question_set(cell_sets(c.metrics, lambda c=c: c.run.records() if c.run.has_answers
                                                  else []), question_sets.get(c.name, ""))
            for c in sweep.cells if c.complete}
    return NuggetSetGate(sets, labels or {}, POOL_HINT.format(sweep=sweep.dir))
