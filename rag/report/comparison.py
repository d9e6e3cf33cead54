"""Strategy comparison: each run's quality means with the sweep summary's marks of which differences are real.

One row per run (strategy first, then the other swept values), one column per answer-quality metric the sweep
summary tested (token F1 and EM, judge fields, nugget, ARGUE and Crucible scores over all questions; recall is
Fig. 4's), the run's mean from its metrics.json, marked as the summary's paired tests mark it
(`SweepData.mark`: bold for the group statistically tied with the best, ▲/▼ against a baseline), and under it
the smallest difference each column can see (`significance.json`'s `mdd`, at the family-wise level of the marks and
for one comparison alone). A column the sweep's comparability gate does not let rank (`SweepData.gate`: runs that
scored some topic against different nugget sets) is left out of the table, its one-line notice under it instead.
"""

from __future__ import annotations

import math
from typing import Any

from rag.metrics.marks import NOTE as MARKS_NOTE
from rag.metrics.marks import marked
from rag.report.data import SweepData, is_number

#: metric families shown (answer quality); recall is drawn in Fig. 4
PREFIXES = ("answer/", "judge/", "nuggets/", "argue/", "crucible/")


def _candidates(sweep: SweepData) -> list[str]:
    """Every answer-quality column over all questions that significance.json names (marked or not)."""
    named = [*(sweep.significance.get("marks") or {}), *(sweep.significance.get("not_ranked") or {})]
    return [c for c in dict.fromkeys(named) if c.endswith("/all") and c.startswith(PREFIXES)]


def columns(sweep: SweepData) -> list[str]:
    """The tested answer-quality columns over all questions that the gate lets rank, in the summary's order."""
    tested = sweep.significance.get("marks") or {}
    return [c for c in _candidates(sweep) if c in tested and sweep.gate.rankable(c)]


def not_ranked(sweep: SweepData) -> dict[str, str]:
    """Column -> the gate's one-line notice, for the columns left out because the runs used different nugget
    sets."""
    return {c: sweep.gate.notice(c) or "" for c in _candidates(sweep) if not sweep.gate.rankable(c)}


def comparison_rows(sweep: SweepData) -> list[dict[str, Any]]:
    """One flat row per run: label, run, and per column its mean and mark (CSV and W&B)."""
    shown = columns(sweep)
    several = len(set(sweep.question_sets.values())) > 1
    out = []
    for run in sweep.by_question_set():
        lead = run.strategy if run.strategy != "?" else None  # "?": a folder without its config
        row: dict[str, Any] = {"label": sweep.label(run, lead=lead, skip=("generator",) if lead else ()),
                               "run": run.name}
        if several:  # the marks rank within a set: its runs together, each naming the set
            row["questions"] = sweep.question_sets.get(run.name, "")
        for column in shown:
            value = run.metrics.get(column)
            row[column] = round(float(value), 4) if is_number(value) else None
            row[f"{column} mark"] = sweep.mark(column, run.name) or ""
        out.append(row)
    return out


def to_markdown(sweep: SweepData) -> str:
    shown, notices = columns(sweep), not_ranked(sweep)
    if not shown and not notices:
        return ""
    lines = []
    if shown:
        rows = comparison_rows(sweep)
        by_set = any("questions" in row for row in rows)
        lines += ["| " + ("questions | " if by_set else "") + "strategy | "
                  + " | ".join(c.removesuffix("/all") for c in shown) + " |",
                  "|---|" + ("---|" if by_set else "") + "---|" * len(shown)]
        for row in rows:
            cells = [marked(f"{row[c]:.3f}", row[f"{c} mark"]) if row[c] is not None else "-" for c in shown]
            lead = f"{row['questions']} | " if by_set else ""
            lines.append(f"| {lead}{row['label'].replace('|', '/')} | " + " | ".join(cells) + " |")
        lines += ["", MARKS_NOTE]
        if by_set:
            lines += ["", "Each question set is marked on its own (its runs answered the same questions): compare "
                          "rows within a set, never across."]
    if notices:
        lines += ["", "Not compared (the runs scored some topic against different nugget sets):", "",
                  *(f"- {n}" for n in notices.values())]
    mdd = sweep.significance.get("mdd") or {}
    seen = [(c, mdd[c]) for c in shown if isinstance(mdd.get(c), dict)]
    if seen:
        settings = sweep.significance.get("settings") or {}
        lines += ["", f"Smallest difference each column can see (minimum detectable difference of a paired t-test, "
                      f"power {settings.get('power')}, at the sweep's n with the pooled sd of the paired "
                      f"differences; family-wise at alpha / m, Bonferroni, the threshold of Holm's first step, m the "
                      f"metric's comparisons, the level of the marks; and at alpha {settings.get('alpha')} for one "
                      f"comparison alone):"]
        for column, m in seen:
            value, familywise = m.get("mdd"), m.get("mdd_familywise")
            if value is None or (isinstance(value, float) and math.isnan(value)):
                text = "not estimable (the cells score every question alike)"
            elif is_number(familywise):
                text = (f"{familywise:.3g} family-wise (alpha {settings.get('alpha')}/{m.get('family_size')}), "
                        f"{value:.3g} at alpha {settings.get('alpha')} uncorrected")
            else:  # a significance.json written before the family-wise level was recorded
                text = f"{value:.3g} at alpha {settings.get('alpha')} uncorrected"
            lines.append(f"- {column.removesuffix('/all')}: {text} over {m.get('n')} questions")
    return "\n".join(lines) + "\n"
