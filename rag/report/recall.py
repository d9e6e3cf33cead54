"""Fig. 4: gold-document recall@k per retriever and k, after retrieval and after rerank, from stored lists; beside
it, each run's trec_eval measures (`measure_rows`: nDCG@10, RR@10, AP... of `metrics.retrieval_measures`, per stage
and split, with bootstrap intervals over questions).

A run stores its ranked lists (`retrieved`: top retriever.k, `reranked`: after the reranker and the cut to
rerank.k), so one run at depth k gives the whole curve 1..k. Cells that share a retriever (and a reranker over
the same candidates) share one curve, using for each question the longest list any of them stored. As in
RAGtifier's Fig. 4, a gold document counts as found when any passage of it is in the top k; single-hop is the
share of gold documents found, multi-hop "all" needs every gold document (the seed's count), "any" at least one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rag.report.data import SweepData, gold_doc_ids, ranked_doc_ids, record_hop, record_id, retrieval_measures
from rag.report.stats import bootstrap_means

#: split -> (hop of the questions, how a question with several gold documents counts as found)
SPLITS = {"single": ("single", "fraction"), "multi_all": ("multi", "all"), "multi_any": ("multi", "any")}
SPLIT_TITLES = {"single": "single-hop", "multi_all": "multi-hop, all gold docs", "multi_any": "multi-hop, any gold doc"}
STAGE_TITLES = {"retrieval": "after retrieval", "rerank": "after rerank"}


def _bound(value: float) -> float | None:
    """An interval bound, or None where no interval exists (one question: `rag.report.stats.bootstrap_means`)."""
    return None if math.isnan(value) else round(value, 6)


@dataclass
class RecallCurve:
    stage: str
    label: str
    split: str
    ks: list[int]
    mean: list[float]
    lo: list[float]
    hi: list[float]
    n_questions: int
    runs: list[str] = field(default_factory=list)

    def points(self) -> list[dict[str, Any]]:
        """Long format: one row per k (CSV, W&B line plots)."""
        return [{"stage": self.stage, "curve": self.label, "split": self.split, "k": k,
                 "recall": round(m, 6), "lo": _bound(a), "hi": _bound(b), "n_questions": self.n_questions}
                for k, m, a, b in zip(self.ks, self.mean, self.lo, self.hi)]


def found_at_k(gold: list[str], ranked: list[str], depth: int, how: str) -> np.ndarray:
    """Per k = 1..depth, whether the question counts as found ("fraction": share of gold docs found)."""
    first = {}
    for rank, doc in enumerate(ranked[:depth], start=1):
        first.setdefault(doc, rank)
    ranks = np.array([first.get(d, depth + 1) for d in gold], dtype=float)
    ks = np.arange(1, depth + 1)[:, None]
    hit = ranks[None, :] <= ks
    if how == "all":
        return hit.all(axis=1).astype(float)
    if how == "any":
        return hit.any(axis=1).astype(float)
    return hit.mean(axis=1)


def _curve_key(sweep: SweepData, run, stage: str) -> tuple[str, str]:
    """(grouping key, label): the retriever (and its non-k swept settings); for rerank also its candidates."""
    extra = [f"{k}={v}" for k, v in run.values.items() if k.startswith("retriever.") and k != "retriever.k"]
    label = " ".join([run.retriever, *extra])
    if stage == "rerank":
        extra_r = [f"{k}={v}" for k, v in run.values.items() if k.startswith("rerank.") and k != "rerank.k"]
        label = " ".join([f"{run.retriever}@{run.setting('retriever.k') or '?'}", "->", run.reranker, *extra_r])
    return f"{run.dataset}|{label}", label


def recall_curves(sweep: SweepData, n_boot: int = 200, seed: int = 0, confidence: float = 0.95,
                  max_k: int | None = None) -> list[RecallCurve]:
    """Curves for every retriever (after retrieval) and retriever -> reranker (after rerank) in the sweep."""
    curves: list[RecallCurve] = []
    for stage in ("retrieval", "rerank"):
        groups: dict[str, dict[str, Any]] = {}
        for run in sweep.runs:
            if stage == "rerank" and run.reranker in ("none", "NoRerank"):
                continue
            key, label = _curve_key(sweep, run, stage)
            group = groups.setdefault(key, {"label": label, "lists": {}, "runs": []})
            group["runs"].append(run.name)
            for record in run.records:
                gold = gold_doc_ids(record)
                hop = record_hop(record)
                if not gold or hop is None:
                    continue
                ranked = ranked_doc_ids(record, stage)
                qid = record_id(record)
                if len(ranked) > len(group["lists"].get(qid, (None, None, []))[2]):
                    group["lists"][qid] = (hop, gold, ranked)
        for group in groups.values():
            for split, (hop, how) in SPLITS.items():
                items = [(g, r) for h, g, r in group["lists"].values() if h == hop]
                if not items:
                    continue
                depth = min(len(r) for _, r in items)
                if max_k:
                    depth = min(depth, max_k)
                if depth < 1:
                    continue
                matrix = np.stack([found_at_k(g, r, depth, how) for g, r in items])
                mean, lo, hi = bootstrap_means(matrix, n_boot=n_boot, seed=seed, confidence=confidence)
                curves.append(RecallCurve(stage=stage, label=group["label"], split=split,
                                          ks=list(range(1, depth + 1)), mean=mean.tolist(), lo=lo.tolist(),
                                          hi=hi.tolist(), n_questions=len(items), runs=group["runs"]))
    return curves


def measure_rows(sweep: SweepData, n_boot: int = 200, seed: int = 0, confidence: float = 0.95
                 ) -> list[dict[str, Any]]:
    """One row per run, stage, split (all, single, multi) and trec_eval measure: the mean over the judged
    questions (metrics.json's `ir/<stage>/<measure>/<split>`) and its percentile bootstrap interval."""
    rows: list[dict[str, Any]] = []
    for run in sweep.runs:
        scored = [(record_hop(r), retrieval_measures(r)) for r in run.records]
        names = list(dict.fromkeys(k for _, values in scored for k in values))
        for stage in dict.fromkeys(s for s, _ in names):
            measures = [m for s, m in names if s == stage]
            for split in ("all", "single", "multi"):
                items = [v for hop, v in scored if split in ("all", hop) and all((stage, m) in v for m in measures)]
                if not items:
                    continue
                matrix = np.array([[v[(stage, m)] for m in measures] for v in items])
                mean, lo, hi = bootstrap_means(matrix, n_boot=n_boot, seed=seed, confidence=confidence)
                rows += [{"run": run.name, "stage": stage, "split": split, "measure": m, "value": round(float(a), 6),
                          "lo": round(float(b), 6), "hi": round(float(c), 6), "n_questions": len(items)}
                         for m, a, b, c in zip(measures, mean, lo, hi)]
    return rows


def measures_markdown(rows: list[dict[str, Any]]) -> str:
    """The measure rows as one table: a line per run, stage and split, a column per measure (`value [lo, hi]`)."""
    measures = list(dict.fromkeys(r["measure"] for r in rows))
    lines = {}
    for r in rows:
        line = lines.setdefault((r["run"], r["stage"], r["split"]), {"n": r["n_questions"]})
        line[r["measure"]] = f"{r['value']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}]"
    head = ["run", "stage", "split", "n", *measures]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (run, stage, split), line in lines.items():
        cells = [run.replace("|", "\\|"), stage, split, str(line["n"]), *(line.get(m, "") for m in measures)]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def plot(curves: list[RecallCurve]):
    """A panel per stage (rows) and split (columns): recall [%] against k, a line per retriever."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    stages = [s for s in STAGE_TITLES if any(c.stage == s for c in curves)]
    splits = [s for s in SPLITS if any(c.split == s for c in curves)]
    fig = Figure(figsize=(4.6 * max(1, len(splits)), 3.6 * max(1, len(stages))), layout="constrained")
    axes = fig.subplots(max(1, len(stages)), max(1, len(splits)), squeeze=False)
    for i, stage in enumerate(stages):
        for j, split in enumerate(splits):
            ax = axes[i][j]
            for curve in (c for c in curves if c.stage == stage and c.split == split):
                ks = np.array(curve.ks)
                line = ax.plot(ks, 100 * np.array(curve.mean), marker="o" if len(ks) <= 12 else None,
                               markersize=3, label=f"{curve.label} (n={curve.n_questions})")[0]
                ax.fill_between(ks, 100 * np.array(curve.lo), 100 * np.array(curve.hi), alpha=0.15,
                                color=line.get_color(), linewidth=0)
            if max((len(c.ks) for c in curves if c.stage == stage), default=0) > 60:
                ax.set_xscale("log")
            else:
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_ylim(-2, 102)
            ax.set_xlabel("k" if stage == "retrieval" else "rerank k")
            ax.set_ylabel("gold documents found [%]")
            ax.set_title(f"{STAGE_TITLES[stage]}, {SPLIT_TITLES[split]}", fontsize=9)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="lower right")
    fig.suptitle("Fig. 4: gold-document recall@k (95% bootstrap band over questions)", fontsize=10)
    return fig
