"""Per-run, per-judge summaries: means, parse failures, skips, and RAGtifier Table 1's distributions.

Table 1 of RAGtifier reports, split single-hop / multi-hop, the share of answers at each correctness and
faithfulness value. We report every value of every scored field (not only the two best), so the shares of a
field add up to 100% of the answers that were scored; parse failures and skipped records are counted apart and
never enter a mean or a share.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import mean
from typing import Any

from eval.judges import KINDS, NO_GOLD
from eval.nuggets import SCORE_NAMES

HOPS = ("single", "multi")


def _hop(record: Mapping[str, Any]) -> str | None:
    hop = record.get("hop")
    return hop if hop in HOPS else None


def _fmt_value(value: Any) -> str:
    return str(value)


def judge_summary(name: str, kind: str, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Flat metrics for one judge (`judge/<name>/...`) read back from the records' `judges[name]`."""
    spec = KINDS[kind]
    results = [(r, (r.get("judges") or {}).get(name)) for r in records]
    results = [(r, res) for r, res in results if isinstance(res, Mapping)]
    prefix = f"judge/{name}/"
    out: dict[str, Any] = {prefix + "n": len(results),
                           prefix + "parse_failures": sum(1 for _, res in results if res.get("parse_failed")),
                           prefix + "skipped_no_gold": sum(1 for _, res in results
                                                           if res.get("skip_reason") == NO_GOLD)}
    ok = [(r, res) for r, res in results if not res.get("parse_failed")]
    for field in spec.numeric_fields():
        for hop in (None, *HOPS):
            values = [res[field] for r, res in ok if field in res and (hop is None or _hop(r) == hop)]
            key = prefix + f"{field}_mean" + (f"_{hop}" if hop else "")
            out[key] = mean(values) if values else None
            if hop is None:
                out[prefix + f"{field}_n"] = len(values)
    for field, allowed in spec.fields.items():
        for hop in (None, *HOPS):
            values = [res[field] for r, res in ok if field in res and (hop is None or _hop(r) == hop)]
            for value in allowed:
                key = prefix + f"{field}_share_{_fmt_value(value)}" + (f"_{hop}" if hop else "")
                out[key] = (sum(1 for v in values if v == value) / len(values)) if values else None
    return out


def nugget_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Flat metrics `nuggets/...`: run means over scored topics (all, single-hop, multi-hop) and failure counts."""
    results = [(r, r.get("nuggets")) for r in records if isinstance(r.get("nuggets"), Mapping)]
    scored = [(r, res) for r, res in results if not res.get("parse_failed") and "vital_strict" in res]
    out: dict[str, Any] = {"nuggets/n_scored": len(scored),
                           "nuggets/parse_failures": sum(1 for _, res in results if res.get("parse_failed")),
                           "nuggets/create_failures": sum(1 for _, res in results
                                                          if res.get("failure_stage") == "create"),
                           "nuggets/assign_failures": sum(1 for _, res in results
                                                          if res.get("failure_stage") == "assign"),
                           "nuggets/importance_failures": sum(int(res.get("importance_failures", 0))
                                                              for _, res in results)}
    for name in SCORE_NAMES:
        for hop in (None, *HOPS):
            values = [res[name] for r, res in scored if hop is None or _hop(r) == hop]
            out[f"nuggets/{name}" + (f"_{hop}" if hop else "")] = mean(values) if values else None
    counts = [res.get("n_nuggets", 0) for _, res in scored]
    out["nuggets/mean_nuggets_per_topic"] = mean(counts) if counts else None
    return out


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


def markdown_report(metrics: Mapping[str, Any], judges: Sequence[tuple[str, str]], nuggets: bool) -> str:
    """A readable report: per judge, means and the Table-1 style distribution (percent, by hop)."""
    lines = ["# Evaluation report", ""]
    for name, kind in judges:
        spec = KINDS[kind]
        p = f"judge/{name}/"
        lines += [f"## Judge `{name}` ({kind})", "",
                  f"answers: {metrics.get(p + 'n')}, parse failures: {metrics.get(p + 'parse_failures')}, "
                  f"skipped for lack of a gold answer: {metrics.get(p + 'skipped_no_gold')}", "",
                  "| field | all | single-hop | multi-hop |", "|---|---|---|---|"]
        for field in spec.numeric_fields():
            lines.append(f"| mean {field} | " + " | ".join(
                _num(metrics.get(p + f"{field}_mean" + (f"_{h}" if h else ""))) for h in (None, *HOPS)) + " |")
        lines += ["", "Share of scored answers at each value [%] (RAGtifier Table 1 layout):", ""]
        header = ["hop"] + [f"{field} {v}" for field, allowed in spec.fields.items() for v in allowed]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for hop in (None, *HOPS):
            cells = [_pct(metrics.get(p + f"{field}_share_{v}" + (f"_{hop}" if hop else "")))
                     for field, allowed in spec.fields.items() for v in allowed]
            lines.append(f"| {hop or 'all'} | " + " | ".join(cells) + " |")
        lines.append("")
    if nuggets:
        lines += ["## AutoNuggetizer", "",
                  f"scored topics: {metrics.get('nuggets/n_scored')}, parse failures: "
                  f"{metrics.get('nuggets/parse_failures')} (creation {metrics.get('nuggets/create_failures')}, "
                  f"assignment {metrics.get('nuggets/assign_failures')}), importance windows unreadable: "
                  f"{metrics.get('nuggets/importance_failures')}", "",
                  "| score | all | single-hop | multi-hop |", "|---|---|---|---|"]
        for name in SCORE_NAMES:
            lines.append(f"| {name} | " + " | ".join(
                _num(metrics.get(f"nuggets/{name}" + (f"_{h}" if h else ""))) for h in (None, *HOPS)) + " |")
        lines.append("")
    return "\n".join(lines)
