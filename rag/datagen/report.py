"""`report.json` and `report.md`: what was asked for, what was obtained, and what the filters removed.

Per categorization: requested share, share among all drawn slots and share among the kept pairs, with a
chi-square goodness-of-fit test (scipy) of the kept counts against the requested probabilities; filter checks and
rejection rates; single- vs multi-document counts; mean lengths in words; engine usage and throughput.
"""

from __future__ import annotations

from collections import Counter
from statistics import mean
from typing import Any

from scipy.stats import chisquare

from rag.datagen.categories import Categorization, CategorySet
from rag.datagen.filters import FILTER_ORDER


def chi_square(counts: dict[str, int], categorization: Categorization) -> dict[str, Any] | None:
    """Goodness of fit of observed counts to the requested probabilities (categories with p > 0)."""
    cats = [c for c in categorization.categories if c.probability > 0]
    total = sum(counts.get(c.name, 0) for c in cats)
    if total == 0 or len(cats) < 2:
        return None
    observed = [counts.get(c.name, 0) for c in cats]
    expected = [c.probability * total for c in cats]
    result = chisquare(observed, f_exp=expected)
    return {"statistic": round(float(result.statistic), 4), "p_value": round(float(result.pvalue), 6),
            "dof": len(cats) - 1, "n": total}


def draw_counts(categories: CategorySet, seed: int, n: int) -> dict[str, Counter]:
    """Category counts over the draws of slots 0..n-1 (no engine involved)."""
    counts: dict[str, Counter] = {cz.column: Counter() for cz in categories.all}
    for i in range(n):
        for column, cat in categories.draw(seed, i).items():
            counts[column][cat.name] += 1
    return counts


def build_report(slots: dict[int, dict[str, Any]], kept: list[dict[str, Any]], categories: CategorySet, n: int,
                 filters_enabled: list[str], extra: dict[str, Any]) -> dict[str, Any]:
    drawn: dict[str, Counter] = {cz.column: Counter() for cz in categories.all}
    obtained: dict[str, Counter] = {cz.column: Counter() for cz in categories.all}
    for row in slots.values():
        for column, name in row["categories"].items():
            if column in drawn:
                drawn[column][name] += 1
    for row in kept:
        for column, name in row["categories"].items():
            if column in obtained:
                obtained[column][name] += 1
    per_categorization = {}
    for cz in categories.all:
        n_drawn, n_kept = sum(drawn[cz.column].values()), sum(obtained[cz.column].values())
        per_categorization[cz.column] = {
            "categories": {c.name: {"requested": c.probability,
                                    "drawn": round(drawn[cz.column][c.name] / n_drawn, 4) if n_drawn else None,
                                    "obtained": round(obtained[cz.column][c.name] / n_kept, 4) if n_kept else None,
                                    "count": obtained[cz.column][c.name]} for c in cz.categories},
            "chi_square": chi_square(dict(obtained[cz.column]), cz),
        }
    totals: Counter = Counter()
    filters: dict[str, dict[str, Any]] = {name: {"checked": 0, "rejected": 0} for name in FILTER_ORDER
                                          if name in filters_enabled}
    for row in slots.values():
        stats = row["stats"]
        for key in ("attempts", "candidates", "unparsable", "parse_retries", "judge_unreadable",
                    "no_related_document"):
            totals[key] += stats.get(key, 0)
        for name, entry in stats.get("filters", {}).items():
            target = filters.setdefault(name, {"checked": 0, "rejected": 0})
            target["checked"] += entry["checked"]
            target["rejected"] += entry["rejected"]
    for entry in filters.values():
        entry["rejection_rate"] = round(entry["rejected"] / entry["checked"], 4) if entry["checked"] else None
    pairs = [r["pair"] for r in kept]
    n_multi = sum(len(p["document_ids"]) > 1 for p in pairs)
    status = Counter(r["status"] for r in slots.values())
    return {
        "requested_pairs": n, "obtained_pairs": len(kept),
        "slots": {"kept": status["kept"], "failed": status["failed"]},
        "single_doc_pairs": len(pairs) - n_multi, "multi_doc_pairs": n_multi,
        "mean_question_words": round(mean(len(p["question"].split()) for p in pairs), 2) if pairs else None,
        "mean_answer_words": round(mean(len(p["answer"].split()) for p in pairs), 2) if pairs else None,
        "mean_context_words": round(mean(sum(len(t.split()) for t in p["context"]) for p in pairs), 2)
        if pairs else None,
        "candidates": totals["candidates"], "attempts": totals["attempts"],
        "candidates_per_kept_pair": round(totals["candidates"] / len(kept), 3) if kept else None,
        "unparsable_candidates": totals["unparsable"], "parse_retries": totals["parse_retries"],
        "judge_unreadable": totals["judge_unreadable"],
        "no_related_document": totals["no_related_document"],
        "filters": filters, "categorizations": per_categorization, **extra,
    }


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def render_markdown(report: dict[str, Any]) -> str:
    lines = ["# Generated QA benchmark", "",
             f"Pairs: {report['obtained_pairs']} of {report['requested_pairs']} requested "
             f"({report['single_doc_pairs']} single-document, {report['multi_doc_pairs']} two-document); "
             f"slots kept {report['slots']['kept']}, failed {report['slots']['failed']}.", "",
             f"Candidates generated: {report['candidates']} ({_fmt(report['candidates_per_kept_pair'])} per kept "
             f"pair); re-asked after unparsable output: {report['parse_retries']}; still unparsable (skipped): "
             f"{report['unparsable_candidates']}; unreadable judge verdicts: "
             f"{report['judge_unreadable']}; multi-document attempts without a related document: "
             f"{report['no_related_document']}.", "",
             f"Mean length in words: question {_fmt(report['mean_question_words'])}, answer "
             f"{_fmt(report['mean_answer_words'])}, context {_fmt(report['mean_context_words'])}.", "",
             "## Filters", "", "| filter | checked | rejected | rejection rate |", "|---|---|---|---|"]
    for name, entry in report["filters"].items():
        lines.append(f"| {name} | {entry['checked']} | {entry['rejected']} | {_fmt(entry['rejection_rate'])} |")
    lines += ["", "## Categories: requested vs obtained", "",
              "Chi-square goodness of fit of the kept pairs' counts against the requested probabilities "
              "(a small p-value means the obtained shares differ from the requested ones, e.g. because the "
              "filters reject some categories more often).", ""]
    for column, entry in report["categorizations"].items():
        test = entry["chi_square"]
        verdict = (f"chi2 = {test['statistic']:.3f}, dof = {test['dof']}, p = {test['p_value']:.4f}, n = {test['n']}"
                   if test else "not tested (no pairs or a single category)")
        lines += [f"### {column}", "", verdict, "", "| category | requested | drawn | obtained | count |",
                  "|---|---|---|---|---|"]
        for name, c in entry["categories"].items():
            lines.append(f"| {name} | {_fmt(c['requested'])} | {_fmt(c['drawn'])} | {_fmt(c['obtained'])} | "
                         f"{c['count']} |")
        lines.append("")
    run = report.get("run", {})
    if run:
        lines += ["## Run", ""] + [f"- {k}: {_fmt(v)}" for k, v in run.items()] + [""]
    return "\n".join(lines)
