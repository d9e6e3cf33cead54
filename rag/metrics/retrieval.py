"""Gold-document recall@k: a gold document counts as found when any of its passages is in the top k.

For questions with several gold documents (DataMorgana two-doc, HotpotQA, MuSiQue) we report "any" (at least
one gold document found) and "all" (every gold document found), as RAGtifier's Fig. 4 does for multi-hop.
`GoldRecall` is the per-answer metric (`conf/metrics/recall.yaml`) at the run's own depths, after retrieval
and after rerank; `metrics.recall_at` adds recall at further cutoffs from the same deep retrieval.
"""

from __future__ import annotations

import re
from typing import Any

from rag.metrics.base import AnswerMetric, RunShape, ScoredAnswer
from rag.metrics.registry import BUILTIN, MetricSpec
from rag.records import ScoredPassage


def gold_found(gold_doc_ids: list[str], ranked: list[ScoredPassage], k: int) -> tuple[float, float, float]:
    """(fraction of gold docs found, any found, all found) in the top k; (nan-free) zeros for no gold."""
    if not gold_doc_ids:
        return 0.0, 0.0, 0.0
    top_docs = {p.passage.doc_id for p in ranked[:k]}
    found = [d in top_docs for d in gold_doc_ids]
    return sum(found) / len(found), float(any(found)), float(all(found))


def recall_at_cutoffs(gold_doc_ids: list[str], ranked_doc_ids: list[str], cutoffs: list[int],
                      stage: str) -> dict[str, float]:
    """Per-question gold-document recall at every cutoff, from one ranked list (the deepest one retrieved).

    Returns flat per-question scores `recall_<stage>@<k>`, `..._any`, `..._all` (fraction of gold documents
    found, any found, all found in the top k); `cutoff_metrics` averages them into run metrics. Empty without
    gold documents. A cutoff deeper than the list counts the whole list (a corpus smaller than k).
    """
    if not gold_doc_ids:
        return {}
    first_rank: dict[str, int] = {}
    for rank, doc_id in enumerate(ranked_doc_ids, 1):
        first_rank.setdefault(doc_id, rank)
    out: dict[str, float] = {}
    for k in sorted(set(cutoffs)):
        found = [first_rank.get(d, k + 1) <= k for d in gold_doc_ids]
        out[f"recall_{stage}@{k}"] = sum(found) / len(found)
        out[f"recall_{stage}@{k}_any"] = float(any(found))
        out[f"recall_{stage}@{k}_all"] = float(all(found))
    return out


def stage_cutoff_scores(gold_doc_ids: list[str], deep: list[ScoredPassage], reranked: list[ScoredPassage],
                        cutoffs: list[int], k_retrieval: int) -> dict[str, float]:
    """A question's recall at every cutoff after retrieval (the deep list) and after rerank (the uncut reranked
    list, cutoffs up to `k_retrieval`)."""
    return {**recall_at_cutoffs(gold_doc_ids, [p.passage.doc_id for p in deep], cutoffs, "retrieval"),
            **recall_at_cutoffs(gold_doc_ids, [p.passage.doc_id for p in reranked],
                                [k for k in cutoffs if k <= k_retrieval], "rerank")}


_CUTOFF_SCORE = re.compile(r"^recall_(?P<stage>[a-z]+)@(?P<k>\d+)(?P<kind>_any|_all)?$")


def cutoff_metrics(splits: dict[str, list[Any]]) -> dict[str, float]:
    """Run metrics `recall/<stage>@<k>[_any|_all]/<split>`: the mean of the per-question cutoff scores that
    `recall_at_cutoffs` put in each record's `scores`, per split (all, single, multi)."""
    out: dict[str, float] = {}
    for split, rows in splits.items():
        sums: dict[str, list[float]] = {}
        for row in rows:
            scores = row.get("scores") if isinstance(row, dict) else row.scores  # a JSON row or an AnswerRecord
            for key, value in (scores or {}).items():
                match = _CUTOFF_SCORE.match(key)
                if match:
                    name = f"recall/{match['stage']}@{match['k']}{match['kind'] or ''}/{split}"
                    sums.setdefault(name, []).append(float(value))
        out.update({name: round(sum(values) / len(values), 6) for name, values in sums.items()})
    return dict(sorted(out.items(), key=lambda kv: _metric_order(kv[0])))


def _metric_order(name: str) -> tuple:
    stage, rest = name.split("/")[1].split("@")
    k, _, kind = rest.partition("_")
    return name.split("/")[2], stage != "retrieval", int(k), kind


class GoldRecall(AnswerMetric):
    """Gold-document recall of the retrieved top k and of the reranked, cut list: `recall_<stage>` (fraction
    found), `_any`, `_all` per answer; run means `recall/<stage>@<k>[_any|_all]/<split>`."""

    STAGES = ("retrieval", "rerank")
    MODES = ("", "_any", "_all")

    def __init__(self, name: str = "recall"):
        super().__init__(name)

    def score(self, item: ScoredAnswer) -> dict[str, float]:
        gold = item.question.gold_doc_ids
        if not gold:
            return {}
        out: dict[str, float] = {}
        for stage, ranked in (("retrieval", item.retrieved), ("rerank", item.context)):
            frac, any_found, all_found = gold_found(gold, ranked, len(ranked))
            out.update({f"recall_{stage}": frac, f"recall_{stage}_any": any_found, f"recall_{stage}_all": all_found})
        return out

    def run_metrics(self, shape: RunShape) -> dict[str, str]:
        ks = {"retrieval": shape.k_retrieval, "rerank": shape.k_rerank}
        return {f"recall_{stage}{mode}": f"recall/{stage}@{ks[stage]}{mode}" for stage in self.STAGES
                for mode in self.MODES}

    def metric_specs(self) -> list[MetricSpec]:
        """The registry's own recall entry (it also names `metrics.recall_at`'s cutoffs)."""
        return [s for s in BUILTIN if s.pattern == "recall/{stage}@{k}{mode}/{split}"]


class UsedRecall(AnswerMetric):
    """Gold-document recall of the passages an answer was written from (`conf/metrics/used_recall.yaml`): the
    prompt's passages after a strategy's own filter (TrustRAG's), or every passage IterDRAG's follow-ups and the
    search loops' own searches returned, which the stage recalls cannot see. `recall_used`, `_any`, `_all` per
    answer and `passages_used`, their count; run means `recall/used[_any|_all]/<split>` and
    `passages/used/<split>`."""

    def __init__(self, name: str = "used_recall"):
        super().__init__(name)

    def score(self, item: ScoredAnswer) -> dict[str, float]:
        gold = item.question.gold_doc_ids
        if not gold:
            return {}
        used = item.context if item.used is None else item.used
        frac, any_found, all_found = gold_found(gold, used, len(used))
        return {"recall_used": frac, "recall_used_any": any_found, "recall_used_all": all_found,
                "passages_used": float(len(used))}

    def run_metrics(self, shape: RunShape) -> dict[str, str]:
        return {"recall_used": "recall/used", "recall_used_any": "recall/used_any",
                "recall_used_all": "recall/used_all", "passages_used": "passages/used"}

    def metric_specs(self) -> list[MetricSpec]:
        return [s for s in BUILTIN if s.pattern in ("recall/used{mode}/{split}", "passages/used/{split}")]
