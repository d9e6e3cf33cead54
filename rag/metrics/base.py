"""The metric interface: a per-answer metric is one class plus one YAML in `conf/metrics/`.

Each YAML is packaged `# @package metrics.<name>` and names its class with `_target_`; the `metrics` group is
a list (`metrics=[f1,em,recall]`, the default in conf/config.yaml, or one of your own on Hydra's search path).
The pipeline builds whatever the group composed, lets each metric score every answer into `record.scores`,
and averages each score into the run metric the metric names, overall and per hop split (`<name>/<split>`).
Every metric declares its run metric names to the registry (`metric_specs`), so the sweep summary, W&B and
the report rank it without a line of their own. `cfg.metrics` also holds settings (`SETTINGS`), not metrics.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import mean
from typing import Any

from rag.core.components import build_component, component_nodes
from rag.metrics.registry import REGISTRY, MetricSpec
from rag.records import AnswerRecord, Question, ScoredPassage

#: keys of `cfg.metrics` that are settings, not metrics
SETTINGS = ("recall_at",)


@dataclass(frozen=True)
class ScoredAnswer:
    """What a metric sees of one answer."""

    question: Question
    answer: str
    #: the retriever's top k, in rank order
    retrieved: list[ScoredPassage]
    #: after reranking and the cut to rerank.k (the generator's passages before ordering)
    context: list[ScoredPassage]
    #: the answer came from an LLM generator; the gold-answer metrics score only those (a retrieval-only run,
    #: `generator=none`, has no answer, and the rule-based baselines were never F1-scored)
    from_llm: bool = True
    #: the passages the prompt held, in prompt order, after any filter of the strategy (TrustRAG's); None: the
    #: context as it was
    used: list[ScoredPassage] | None = None


@dataclass(frozen=True)
class RunShape:
    """What run metric names may depend on: the depths the run cut its lists at."""

    k_retrieval: int
    k_rerank: int


class AnswerMetric(ABC):
    """One per-answer metric. Subclasses implement `score`, `run_metrics` and `metric_specs`."""

    def __init__(self, name: str):
        self.name = name

    @abstractmethod
    def score(self, item: ScoredAnswer) -> dict[str, float]:
        """Per-answer scores (keys of `record.scores`); {} when the answer cannot be scored (no gold)."""

    @abstractmethod
    def run_metrics(self, shape: RunShape) -> dict[str, str]:
        """Score key -> its run metric's name without the split (the mean goes to `<name>/<split>`)."""

    @abstractmethod
    def metric_specs(self) -> list[MetricSpec]:
        """The run metric names this metric writes, as specific as it knows them (range, direction)."""


class RecordMetric(AnswerMetric):
    """A metric read from the stored answer record alone (its ranked lists and judgments), not from generation:
    the pipeline scores every record with it again on each run, resumed answers too, so a folder's fingerprint
    leaves it out (`rag.fingerprint`) and a changed setting applies to the whole folder."""

    #: the score keys this metric owns (stale ones from an earlier setting are dropped before scoring again)
    key_prefix: str = ""

    def score(self, item: ScoredAnswer) -> dict[str, float]:
        return {}  # scored from the finished record (`score_record`)

    @abstractmethod
    def score_record(self, record: AnswerRecord, qrels_level: str) -> dict[str, float]:
        """Per-answer scores from a stored record; {} when it cannot be scored (no judgments)."""

    def rescore(self, records: list[AnswerRecord], qrels_level: str) -> None:
        for record in records:
            record.scores = {k: v for k, v in record.scores.items() if not k.startswith(self.key_prefix)}
            record.scores.update(self.score_record(record, qrels_level))


def rescore_records(metrics: Sequence[AnswerMetric], records: list[AnswerRecord], qrels_level: str) -> None:
    """Score stored records again with every record metric among `metrics` (resumed answers and repeats too)."""
    for metric in metrics:
        if isinstance(metric, RecordMetric):
            metric.rescore(records, qrels_level)


def metric_nodes(metrics_cfg: Any) -> dict[str, dict[str, Any]]:
    """The metric entries of a `metrics` config node (mappings with `_target_`), by config key, resolved."""
    return component_nodes("metrics", metrics_cfg, SETTINGS, "a metric")


def build_metrics(metrics_cfg: Any) -> list[AnswerMetric]:
    """The composed metrics, their run metric names declared to the registry."""
    metrics = [build_component("metrics", key, node, AnswerMetric) for key, node in metric_nodes(metrics_cfg).items()]
    for metric in metrics:
        for spec in metric.metric_specs():
            REGISTRY.declare(spec, first=True, replace=True)
    return metrics


def hop_splits(records: list[AnswerRecord]) -> dict[str, list[AnswerRecord]]:
    """The splits every run metric is reported on: all questions, single-hop and multi-hop."""
    return {"all": records, "single": [r for r in records if r.hop == "single"],
            "multi": [r for r in records if r.hop == "multi"]}


def answer_means(splits: dict[str, list[AnswerRecord]], metrics: list[AnswerMetric], shape: RunShape
                 ) -> dict[str, Any]:
    """`n_<split>` and every answer metric's mean per split (`<name>/<split>`); a configured metric with nothing
    to score is said (`unscored/<name>`), not silently absent."""
    names = {key: name for metric in metrics for key, name in metric.run_metrics(shape).items()}
    m: dict[str, Any] = {}
    for split, rows in splits.items():
        m[f"n_{split}"] = len(rows)
        for key, name in names.items():
            values = [r.scores[key] for r in rows if key in r.scores]
            if values:
                m[f"{name}/{split}"] = round(mean(values), 6)
            elif split == "all" and rows:
                m[f"unscored/{name}"] = len(rows)
    return m
