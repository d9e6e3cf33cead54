"""What `python -m rag.main` prints when a run ends: a closing block of about ten lines, or every metric.

`report_console: short` (conf/config.yaml, the default) prints the closing block: answer quality per split, the
gold recall of the passages the prompt got (rerank.k, else retriever.k) and the judges' means, each with its 95%
percentile bootstrap interval over questions (`rag.metrics.stats.bootstrap_means`, the report's own); the cost (LLM
calls, tokens, seconds per question); the smallest difference the run can see (`sensitivity_text`); and where the
rest is. `report_console: full` prints every metric of metrics.json first, then the same block. A newcomer wants
three numbers (answer quality with its interval, retrieval quality, cost), not 170 lines of cutoffs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag.folders import RunFolder
from rag.metrics.base import hop_splits
from rag.metrics.stats import Interval, bootstrap_means, sensitivity_text
from rag.records import AnswerRecord, is_number

#: judge evaluations shown as rows; the rest are named as a count (every one is in metrics.json)
MAX_JUDGE_ROWS = 6
CONSOLE_MODES = ("short", "full")
HEADER = "mean [95% interval]"


def format_metrics_table(metrics: Mapping[str, Any]) -> str:
    """Every metric as a two-column table (`report_console: full`)."""
    width = max(len(k) for k in metrics) if metrics else 10
    lines = [f"{'metric'.ljust(width)}  value", f"{'-' * width}  -----"]
    lines += [f"{k.ljust(width)}  {v:.4f}" if isinstance(v, float) else f"{k.ljust(width)}  {_short(v)}"
              for k, v in metrics.items()]
    return "\n".join(lines)


def _short(value: Any) -> Any:
    """A nugget set (`<judge>/nugget_set`) as its identity, source and topic count, not every topic's hash."""
    if isinstance(value, dict) and "identity" in value:
        return f"{value['identity']} ({value.get('source')}, {len(value.get('topics') or {})} topics)"
    return value


def console_report(metrics: Mapping[str, Any], run_dir: Path, prompt_k: int | None = None, mode: str = "short") -> str:
    """What a run prints last: `Run folder:`, every metric when `mode` is full, then the closing block."""
    if mode not in CONSOLE_MODES:
        raise ValueError(f"report_console must be one of {', '.join(CONSOLE_MODES)}, got {mode!r}")
    head = [f"Run folder: {run_dir}"] + ([format_metrics_table(metrics)] if mode == "full" else [])
    return "\n".join([*head, closing_block(metrics, RunFolder(run_dir).records(), run_dir, prompt_k,
                                           full=mode == "full")])


def closing_block(metrics: Mapping[str, Any], records: Sequence[AnswerRecord], run_dir: Path,
                  prompt_k: int | None = None, full: bool = False) -> str:
    """The results a reader wants first, at most about 15 lines (see the module docstring)."""
    rows = _rows(metrics, records, prompt_k)
    judges = [name for name in rows if name.startswith(("judge/", "nuggets/", "crucible/", "argue/"))]
    hidden = judges[MAX_JUDGE_ROWS:]
    for name in hidden:
        del rows[name]
    by_split = hop_splits(list(records))
    splits = [s for s, rows in by_split.items() if rows]
    if splits[1:] and all(len(by_split[s]) == len(records) for s in splits[1:]):
        splits = ["all"]  # one hop only: its column is the `all` column again
    lines = []
    if rows:
        width = max(len(HEADER), *(len(label) for label in rows))
        cells = {label: [_cell(values.get(s)) for s in splits] for label, values in rows.items()}
        widths = [max(len(c[i]) for c in cells.values()) for i in range(len(splits))]
        header = [f"{s} ({len(by_split[s])})".ljust(w) for s, w in zip(splits, widths)]
        lines.append("  ".join([HEADER.ljust(width), *header]).rstrip())
        lines += ["  ".join([label.ljust(width), *(c.ljust(w) for c, w in zip(cs, widths))]).rstrip()
                  for label, cs in cells.items()]
    lines.append(cost_line(metrics))
    mdd = sensitivity_text(_per_question(records, [k for k in rows if not k.startswith("recall/")]))
    if mdd:
        lines.append(mdd)
    more = f"; {len(hidden)} more judge evaluations there" if hidden else ""
    console = "" if full else "; every metric on the console: report_console=full"
    lines.append(f"Every metric: {Path(run_dir) / RunFolder.METRICS} (named <row>/<split>, e.g. answer/f1/all"
                 f"{more}){console}")
    return "\n".join(lines)


def cost_line(metrics: Mapping[str, Any]) -> str:
    """LLM calls and tokens of generation and of the judges, money where it was counted, seconds per question."""
    parts = [_usage(metrics, "")]
    if metrics.get("eval/llm_calls") or metrics.get("eval/llm_cache_hits"):
        parts.append("judges " + _usage(metrics, "eval/"))
    n, total = metrics.get("n_questions") or 0, metrics.get("time/total_s")
    if n and isinstance(total, (int, float)):
        parts.append(f"{total / n:.2f} s per question ({total:.1f} s in all)")
    return "Cost: " + "; ".join(parts)


def _usage(metrics: Mapping[str, Any], prefix: str) -> str:
    calls, hits = metrics.get(f"{prefix}llm_calls") or 0, metrics.get(f"{prefix}llm_cache_hits") or 0
    if not calls and not hits:
        return "no LLM calls"
    text = (f"{calls:,} LLM calls" + (f" (+{hits:,} from the cache)" if hits else "")
            + f", {metrics.get(f'{prefix}prompt_tokens') or 0:,} prompt + "
              f"{metrics.get(f'{prefix}completion_tokens') or 0:,} completion tokens")
    cost = metrics.get(f"{prefix}llm_cost_usd")
    return text + (f", ${cost:.4f}" if isinstance(cost, (int, float)) and cost else "")


def _rows(metrics: Mapping[str, Any], records: Sequence[AnswerRecord], prompt_k: int | None
          ) -> dict[str, dict[str, tuple[float, Interval]]]:
    """Row label -> split -> (mean, interval): answer metrics, recall at the prompt's depth, judges' evaluations."""
    keys = {f"answer/{k}": k for r in records for k in r.scores if f"answer/{k}/all" in metrics}
    recall = _prompt_recall(metrics, prompt_k)
    if recall and any("recall_rerank" in r.scores for r in records):
        keys[recall] = "recall_rerank"
    judged = {name: name for r in records for name in r.judge_values() if f"{name}/all" in metrics}
    splits = hop_splits(list(records))
    rows = {}
    for label, key in {**keys, **judged}.items():
        by_split = {}
        for split, split_records in splits.items():
            values = _per_question(split_records, [key]).get(key) or []
            if values:
                by_split[split] = _mean_interval(values)
        rows[label] = by_split
    return rows


def _prompt_recall(metrics: Mapping[str, Any], prompt_k: int | None) -> str | None:
    """The name of the gold recall of the prompt's passages: `recall/rerank@<k>` (the largest cut at most k)."""
    found = {int(m.group(1)): f"recall/rerank@{m.group(1)}" for m in
             (re.fullmatch(r"recall/rerank@(\d+)/all", key) for key in metrics) if m}
    fits = [k for k in found if prompt_k is None or k <= prompt_k]
    return found[max(fits)] if fits else None


def _per_question(records: Sequence[AnswerRecord], names: Sequence[str]) -> dict[str, list[float]]:
    """Per-question values of each name: a score key (`f1`, `answer/f1`) or a judge evaluation (`judge/j/field`)."""
    out: dict[str, list[float]] = {}
    for record in records:
        judged = record.judge_values()
        for name in names:
            key = name.removeprefix("answer/")
            value = record.scores.get(key) if key in record.scores else judged.get(name)
            if is_number(value):
                out.setdefault(name, []).append(float(value))
    return out


def _mean_interval(values: list[float]) -> tuple[float, Interval]:
    mean, low, high = bootstrap_means(values)
    if math.isnan(low[0]):
        return float(mean[0]), Interval(reason=f"{len(values)} question")
    return float(mean[0]), Interval(float(low[0]), float(high[0]))


def _cell(value: tuple[float, Interval] | None) -> str:
    if value is None:
        return "-"
    mean, interval = value
    return f"{mean:.3f} {interval.text()}"
