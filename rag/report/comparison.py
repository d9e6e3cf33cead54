"""Strategy comparison: each run's quality means with the sweep summary's marks of which differences are real.

One row per run (strategy first, then the other swept values), one column per answer-quality metric the sweep
summary tested (token F1 and EM, judge fields, nugget, ARGUE and Crucible scores over all questions; recall is
Fig. 4's), the run's mean from its metrics.json, marked as the summary's paired tests mark it
(`SweepData.mark`: bold for the group statistically tied with the best, ▲/▼ against a baseline), and under it
the smallest difference each column can see (`significance.json`'s `mdd`).
"""

from __future__ import annotations

import math
from typing import Any

from rag.report.data import SweepData, is_number
from rag.report.table1 import MARKS_NOTE, marked

#: metric families shown (answer quality); recall is drawn in Fig. 4
PREFIXES = ("answer/", "judge/", "nuggets/", "argue/", "crucible/")


def columns(sweep: SweepData) -> list[str]:
    """The tested answer-quality columns over all questions, in the summary's order."""
    return [c for c in (sweep.significance.get("marks") or {}) if c.endswith("/all") and c.startswith(PREFIXES)]


def comparison_rows(sweep: SweepData) -> list[dict[str, Any]]:
    """One flat row per run: label, run, and per column its mean and mark (CSV and W&B)."""
    shown = columns(sweep)
    out = []
    for run in sweep.runs:
        lead = run.strategy if run.strategy != "?" else None  # "?": a folder without its config
        row: dict[str, Any] = {"label": sweep.label(run, lead=lead, skip=("generator",) if lead else ()),
                               "run": run.name}
        for column in shown:
            value = run.metrics.get(column)
            row[column] = round(float(value), 4) if is_number(value) else None
            row[f"{column} mark"] = sweep.mark(column, run.name) or ""
        out.append(row)
    return out


def to_markdown(sweep: SweepData) -> str:
    shown = columns(sweep)
    if not shown:
        return ""
    lines = ["| strategy | " + " | ".join(c.removesuffix("/all") for c in shown) + " |",
             "|---|" + "---|" * len(shown)]
    for row in comparison_rows(sweep):
        cells = [marked(f"{row[c]:.3f}", row[f"{c} mark"]) if row[c] is not None else "-" for c in shown]
        lines.append(f"| {row['label'].replace('|', '/')} | " + " | ".join(cells) + " |")
    lines += ["", MARKS_NOTE]
    mdd = sweep.significance.get("mdd") or {}
    seen = [(c, mdd[c]) for c in shown if isinstance(mdd.get(c), dict)]
    if seen:
        settings = sweep.significance.get("settings") or {}
        lines += ["", f"Smallest difference each column can see (minimum detectable difference of a paired t-test, "
                      f"alpha {settings.get('alpha')}, power {settings.get('power')}, at the sweep's n with the "
                      f"pooled sd of the paired differences):"]
        for column, m in seen:
            value = m.get("mdd")
            text = "not estimable (the cells score every question alike)" if value is None or \
                (isinstance(value, float) and math.isnan(value)) else f"{value:.3g}"
            lines.append(f"- {column.removesuffix('/all')}: {text} over {m.get('n')} questions")
    return "\n".join(lines) + "\n"
