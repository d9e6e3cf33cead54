"""Agreement heatmap: Kendall tau-b, tau_ap_a and tau_ap_b between judges, nugget scores and answer metrics.

Reads the sweep's `agreement.csv` (written by the sweep summary from `eval.agreement`): one row per pair of
evaluations with tau at run level (tau-b, tau_ap_a against the named `reference`, tau_ap_b, over the cells' mean
scores) and per topic, their bootstrap CIs and counts. The heatmap shows per-question evaluations (pairs with topics), judges as rows and nugget scores /
answer metrics as columns, at most 12 of each (agreement.csv keeps every pair). Cells that are not defined (too few
runs, constant scores) are shown grey with "n/a" (and the CSV's `reason` column, when it has one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

#: measure column of eval.agreement's CSV -> title; CI columns are `<measure>_lo` / `<measure>_hi`. tau_ap_a's
#: title is completed with the reference the CSV names (its `reference` column).
MEASURES = {"tau_b": "Kendall tau-b (run level)", "tau_ap_a": "tau_ap_a (run level)",
            "tau_ap_b": "tau_ap_b (run level, symmetric)", "tau_topic": "Kendall tau-b (per topic, mean)"}


@dataclass
class AgreementMatrix:
    measure: str
    rows: list[str]
    cols: list[str]
    value: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    n: np.ndarray
    reason: list[list[str]]
    #: the reference sides of tau_ap_a's cells ("nuggets/*"), from the CSV's `reference` column
    reference: str = ""
    #: the question set whose runs were ranked (the CSV's `questions` column; "" for a sweep of one set)
    questions: str = ""

    @property
    def title(self) -> str:
        title = MEASURES[self.measure]
        title = f"{title}, reference: {self.reference}" if self.measure == "tau_ap_a" and self.reference else title
        return f"{title}\n{self.questions}" if self.questions else title


def _num(row: dict[str, Any], key: str) -> float:
    value = row.get(key)
    return float(value) if isinstance(value, (int, float)) else math.nan


#: the heatmap stays readable: at most this many rows and columns (the CSV keeps every pair)
MAX_SIDE = 12
#: per-answer metrics of the pipeline itself (F1, EM): columns, never judge rows
ANSWER_METRICS = "scores/"
#: agreement.csv files written before pairs named their reference: judges (rows) are told by this prefix
UNREFERENCED_ROW_PREFIX = "judge/"


def _is_candidate(name: str, references: set[str]) -> bool:
    """A heatmap row: a judge's values, neither a reference (nugget scores, human labels) nor an answer metric."""
    if references:
        return name not in references and not name.startswith(ANSWER_METRICS)
    return name.startswith(UNREFERENCED_ROW_PREFIX)


def _oriented(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], set[str]]:
    """Per-question evaluations only (pairs with topics; run-level metrics.json keys have none), each pair with
    its candidate first and its reference (the CSV's `reference` column) second, so the matrix reads judges x
    nugget scores / answer metrics; and the set of references."""
    per_question = [r for r in rows if isinstance(r.get("n_topics"), float) and r["n_topics"] > 0] or list(rows)
    references = {str(r["reference"]) for r in per_question if isinstance(r.get("reference"), str) and r["reference"]}
    out = []
    for r in per_question:
        if _is_candidate(str(r["eval_b"]), references) and not _is_candidate(str(r["eval_a"]), references):
            r = {**r, "eval_a": r["eval_b"], "eval_b": r["eval_a"]}
        out.append(r)
    return out, references


def _question_set(row: dict[str, Any]) -> str:
    value = row.get("questions")
    return value if isinstance(value, str) else ""


def agreement_matrices(rows: list[dict[str, Any]]) -> list[AgreementMatrix]:
    """One matrix per measure present in the rows: judges (rows) x other evaluations (columns); per question set
    when the sweep ranked several apart (the CSV's `questions` column), set by set."""
    sets = list(dict.fromkeys(_question_set(r) for r in rows))
    if len(sets) > 1:
        return [m for label in sets for m in agreement_matrices_of_one_set(
            [r for r in rows if _question_set(r) == label], label)]
    return agreement_matrices_of_one_set(rows, sets[0] if sets else "")


def agreement_matrices_of_one_set(rows: list[dict[str, Any]], questions: str = "") -> list[AgreementMatrix]:
    """`agreement_matrices` over the pairs of one question set."""
    rows, references = _oriented(rows)
    if not rows:
        return []
    judges = [r for r in rows if _is_candidate(str(r["eval_a"]), references)
              and not _is_candidate(str(r["eval_b"]), references)]
    rows = judges or rows
    keep_a = list(dict.fromkeys(r["eval_a"] for r in rows))[:MAX_SIDE]
    keep_b = list(dict.fromkeys(r["eval_b"] for r in rows))[:MAX_SIDE]
    rows = [r for r in rows if r["eval_a"] in keep_a and r["eval_b"] in keep_b]
    names_a = list(dict.fromkeys(r["eval_a"] for r in rows))
    names_b = list(dict.fromkeys(r["eval_b"] for r in rows))
    out = []
    for measure in (m for m in MEASURES if any(m in r for r in rows)):
        shape = (len(names_a), len(names_b))
        value, lo, hi, n = (np.full(shape, math.nan) for _ in range(4))
        reason = [["" for _ in names_b] for _ in names_a]
        for r in rows:
            i, j = names_a.index(r["eval_a"]), names_b.index(r["eval_b"])
            value[i, j], lo[i, j], hi[i, j] = _num(r, measure), _num(r, f"{measure}_lo"), _num(r, f"{measure}_hi")
            count = "n_topics_defined" if measure == "tau_topic" else "n_runs"
            n[i, j] = _num(r, count)
            reason[i][j] = str(r.get("reason") or "") if not isinstance(r.get("reason"), float) else ""
            if math.isnan(value[i, j]) and not reason[i][j]:
                runs = _num(r, "n_runs")
                if measure != "tau_topic" and not math.isnan(runs) and runs < 3:
                    reason[i][j] = f"{int(runs)} runs (needs 3)"
                elif measure == "tau_topic":
                    reason[i][j] = "no topic where both vary"
        reference = ", ".join(sorted({str(r["reference"]).split("/")[0] + "/*" for r in rows
                                      if isinstance(r.get("reference"), str) and r["reference"]}))
        out.append(AgreementMatrix(measure, names_a, names_b, value, lo, hi, n, reason, reference, questions))
    return out


def plot(matrices: list[AgreementMatrix]):
    """A heatmap per measure, annotated with tau, its CI and n (runs, or topics for per-topic tau)."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    sets = list(dict.fromkeys(m.questions for m in matrices)) or [""]
    cols = max(1, max(sum(m.questions == label for m in matrices) for label in sets))
    width = max(4.0, 1.5 * max((len(m.cols) for m in matrices), default=1) + 2.5)
    height = max(3.0, 0.8 * max((len(m.rows) for m in matrices), default=1) + 1.8)
    fig = Figure(figsize=(width * cols, height * len(sets)), layout="constrained")
    grid = fig.subplots(len(sets), cols, squeeze=False)  # a row of measures per question set
    axes = [grid[sets.index(label)][k] for label in sets
            for k in range(sum(m.questions == label for m in matrices))]
    for spare in [ax for row in grid for ax in row if ax not in axes]:
        spare.set_axis_off()
    cmap = colormaps["RdBu"].with_extremes(bad="#dddddd")
    for ax, m in zip(axes, matrices):
        image = ax.imshow(np.ma.masked_invalid(m.value), cmap=cmap, vmin=-1, vmax=1, aspect="auto")
        for i in range(len(m.rows)):
            for j in range(len(m.cols)):
                if math.isnan(m.value[i, j]):
                    text = "n/a" + (f"\n{m.reason[i][j][:28]}" if m.reason[i][j] else "")
                else:
                    ci = "" if math.isnan(m.lo[i, j]) else f"\n[{m.lo[i, j]:.2f}, {m.hi[i, j]:.2f}]"
                    n = "" if math.isnan(m.n[i, j]) else f"\nn={int(m.n[i, j])}"
                    text = f"{m.value[i, j]:.2f}{ci}{n}"
                ax.text(j, i, text, ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(m.cols)), m.cols, rotation=30, ha="right", fontsize=7)
        ax.set_yticks(range(len(m.rows)), m.rows, fontsize=7)
        ax.set_title(m.title, fontsize=9)
        fig.colorbar(image, ax=ax, shrink=0.8)
    fig.suptitle("Agreement between evaluations (95% bootstrap CI over topics)", fontsize=10)
    return fig
