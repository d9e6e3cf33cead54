"""RAGtifier Table 1: per strategy and judge, the share of answers at each correctness and faithfulness value.

The seed's Table 1 (Gemma-3-27B with the LiveRAG prompt, 500 questions) reports, split single- vs multi-hop,
the shares of Correctness {1, 2} and Faithfulness {0, 1}. We report every value (2/1/0/-1 and 1/0/-1), the
number of answers each share is over, and percentile bootstrap 95% intervals over answers. Answers whose
judge output could not be parsed, or that were skipped for lack of a gold answer, are counted apart and never
enter a share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from rag.metrics.marks import NOTE as MARKS_NOTE
from rag.metrics.marks import marked
from rag.report.data import (
    HOPS,
    TABLE1_FIELDS,
    SweepData,
    judge_failed,
    judge_field,
    judge_results,
    record_hop,
)
from rag.report.stats import share_ci


@dataclass
class Table1Row:
    """One strategy (run), one judge, one hop split."""

    label: str
    strategy: str
    run: str
    judge: str
    hop: str
    #: answers in this split that the judge was asked about
    n_answers: int
    #: outputs that could not be parsed
    n_failed: int
    #: field -> answers with a value for that field (the denominator of its shares)
    n: dict[str, int] = field(default_factory=dict)
    #: (field, value) -> (share, ci low, ci high), shares in [0, 1]
    shares: dict[tuple[str, int], tuple[float, float, float]] = field(default_factory=dict)
    #: field -> mean value over the answers with one
    means: dict[str, float] = field(default_factory=dict)
    #: field -> the sweep summary's mark of this run's mean (`SweepData.mark`: best, tied, better, worse, "")
    marks: dict[str, str | None] = field(default_factory=dict)

    def flat(self) -> dict[str, Any]:
        """One CSV / W&B table row: shares in percent."""
        out: dict[str, Any] = {"label": self.label, "strategy": self.strategy, "run": self.run,
                               "judge": self.judge, "hop": self.hop, "n_answers": self.n_answers,
                               "n_failed": self.n_failed}
        for name, values in TABLE1_FIELDS.items():
            out[f"{name}_n"] = self.n.get(name, 0)
            mean = self.means.get(name, math.nan)
            out[f"{name}_mean"] = None if math.isnan(mean) else round(mean, 4)
            out[f"{name}_mark"] = self.marks.get(name) or ""
            for value in values:
                share, lo, hi = self.shares.get((name, value), (math.nan, math.nan, math.nan))
                out[f"{name}_{value}_pct"] = _pct(share)
                out[f"{name}_{value}_lo"] = _pct(lo)
                out[f"{name}_{value}_hi"] = _pct(hi)
        return out


def _pct(value: float) -> float | None:
    return None if value is None or math.isnan(value) else round(100 * value, 2)


def table1_rows(sweep: SweepData, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95) -> list[Table1Row]:
    """Rows for every run x judge (with a Table 1 field) x hop split present, strategies in sweep order."""
    rows: list[Table1Row] = []
    for run in sweep.runs:
        judges: dict[str, None] = {}
        for record in run.records:
            for name, result in judge_results(record).items():
                if judge_failed(result) or any(f in result for f in TABLE1_FIELDS):
                    judges.setdefault(name)
        label = sweep.label(run, lead=run.strategy, skip=("generator",))
        for judge in judges:
            for hop in HOPS:
                records = [r for r in run.records if record_hop(r) == hop and judge in judge_results(r)]
                if not records:
                    continue
                results = [judge_results(r)[judge] for r in records]
                row = Table1Row(label=label, strategy=run.strategy, run=run.name, judge=judge, hop=hop,
                                n_answers=len(results), n_failed=sum(judge_failed(r) for r in results))
                for name, allowed in TABLE1_FIELDS.items():
                    values = [judge_field(r, name) for r in results]
                    values = [v for v in values if v is not None]
                    row.n[name] = len(values)
                    row.means[name] = sum(values) / len(values) if values else math.nan
                    row.marks[name] = sweep.mark(f"judge/{judge}/{name}/{hop}", run.name)
                    for value, ci in zip(allowed, share_ci(values, allowed, n_boot=n_boot, seed=seed,
                                                           confidence=confidence)):
                        row.shares[(name, value)] = ci
                rows.append(row)
    return rows


def _cell(row: Table1Row, name: str, value: int) -> str:
    share, lo, hi = row.shares.get((name, value), (math.nan, math.nan, math.nan))
    if math.isnan(share):
        return "-"
    if math.isnan(lo):  # one answer: a bootstrap has no spread (rag.report.stats.bootstrap_means)
        return f"{100 * share:.1f} [no interval: {row.n.get(name, 0)} answer]"
    return f"{100 * share:.1f} [{100 * lo:.0f}, {100 * hi:.0f}]"


def _mean(row: Table1Row, name: str) -> str:
    mean = row.means.get(name, math.nan)
    return "-" if math.isnan(mean) else marked(f"{mean:.2f}", row.marks.get(name))


def to_markdown(rows: list[Table1Row]) -> str:
    """One table per judge and hop: a row per strategy, a column per field value (percent [95% CI]) and the
    mean of each field, marked as the sweep summary's paired tests mark it."""
    if not rows:
        return ""
    lines: list[str] = []
    for judge in dict.fromkeys(r.judge for r in rows):
        for hop in HOPS:
            part = [r for r in rows if r.judge == judge and r.hop == hop]
            if not part:
                continue
            header = ["strategy", "n", "failed"] + [f"{name} {v}" for name, vals in TABLE1_FIELDS.items()
                                                    for v in vals] + [f"{name} mean" for name in TABLE1_FIELDS]
            lines += [f"**Judge `{judge}`, {hop}-hop** (share of judged answers [%], 95% bootstrap CI)", "",
                      "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            for r in part:
                n = "/".join(str(r.n.get(name, 0)) for name in TABLE1_FIELDS)
                cells = [r.label.replace("|", "\\|"), n, str(r.n_failed)]
                cells += [_cell(r, name, v) for name, vals in TABLE1_FIELDS.items() for v in vals]
                cells += [_mean(r, name) for name in TABLE1_FIELDS]
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
    lines.append("n: answers with a correctness / faithfulness value; failed: judge outputs that could not be "
                 "parsed (not in any share).")
    if any(m is not None for r in rows for m in r.marks.values()):
        lines.append(MARKS_NOTE)
    return "\n".join(lines) + "\n"



#: colours per value, best (green) to worst (red)
_COLOURS = {2: "#1a9850", 1: "#91cf60", 0: "#fee08b", -1: "#d73027"}
_FAITH_COLOURS = {1: "#1a9850", 0: "#fee08b", -1: "#d73027"}


def plot(rows: list[Table1Row]):
    """Stacked bars: per judge and field a panel per hop, a bar per strategy, segments = value shares."""
    from matplotlib.figure import Figure

    judges = list(dict.fromkeys(r.judge for r in rows))
    fields = list(TABLE1_FIELDS)
    hops = [h for h in HOPS if any(r.hop == h for r in rows)]
    labels = list(dict.fromkeys(r.label for r in rows))
    n_rows, n_cols = len(judges) * len(fields), max(1, len(hops))
    fig = Figure(figsize=(5.5 * n_cols, (0.45 * max(3, len(labels)) + 0.9) * n_rows + 0.6), layout="constrained")
    axes = fig.subplots(n_rows, n_cols, squeeze=False)
    for j, judge in enumerate(judges):
        for f, name in enumerate(fields):
            colours = _COLOURS if name == "correctness" else _FAITH_COLOURS
            for h, hop in enumerate(hops):
                ax = axes[j * len(fields) + f][h]
                by_label = {r.label: r for r in rows if r.judge == judge and r.hop == hop}
                for y, label in enumerate(labels):
                    row = by_label.get(label)
                    left = 0.0
                    for value in TABLE1_FIELDS[name]:
                        share = row.shares.get((name, value), (math.nan,))[0] if row else math.nan
                        if math.isnan(share):
                            continue
                        ax.barh(y, 100 * share, left=left, color=colours[value],
                                label=f"{name} {value}" if y == 0 or label == labels[0] else None)
                        if share >= 0.08:
                            ax.text(left + 50 * share, y, f"{100 * share:.0f}", ha="center", va="center",
                                    fontsize=7)
                        left += 100 * share
                    if row:
                        ax.text(101, y, f"n={row.n.get(name, 0)}", va="center", fontsize=7)
                ax.set_yticks(range(len(labels)), labels, fontsize=8)
                ax.invert_yaxis()
                ax.set_xlim(0, 112)
                ax.set_xlabel("share of judged answers [%]")
                ax.set_title(f"{judge}: {name}, {hop}-hop", fontsize=9)
                handles, names = ax.get_legend_handles_labels()
                if handles:
                    unique = dict(zip(names, handles))
                    ax.legend(unique.values(), unique.keys(), fontsize=7, loc="upper center",
                              bbox_to_anchor=(0.5, -0.32), ncol=len(unique), frameon=False)
    fig.suptitle("Table 1: correctness and faithfulness shares per strategy (LiveRAG prompt)", fontsize=10)
    return fig
