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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rag.core.errors import ConfigError
from rag.metrics.registry import REGISTRY, MetricSpec
from rag.records import Question, ScoredPassage

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


def metric_nodes(metrics_cfg: Any) -> dict[str, dict[str, Any]]:
    """The metric entries of a `metrics` config node (mappings with `_target_`), by config key, resolved."""
    from omegaconf import DictConfig, OmegaConf

    cfg = OmegaConf.to_container(metrics_cfg, resolve=True) if isinstance(metrics_cfg, DictConfig) else metrics_cfg
    if cfg is None:
        return {}
    if not isinstance(cfg, Mapping):
        raise ConfigError(f"metrics: expected a mapping, got {type(cfg).__name__}")
    out = {}
    for key, node in cfg.items():
        if key in SETTINGS:
            continue
        if not isinstance(node, Mapping) or "_target_" not in node:
            raise ConfigError(f"metrics.{key}: not a metric (a metric config needs `_target_`); settings are "
                              f"{', '.join(SETTINGS)}")
        out[str(key)] = dict(node)
    return out


def build_metrics(metrics_cfg: Any) -> list[AnswerMetric]:
    """The composed metrics, their run metric names declared to the registry."""
    from hydra.utils import get_class

    metrics = []
    for key, node in metric_nodes(metrics_cfg).items():
        target = node.pop("_target_")
        node.setdefault("name", key)
        try:
            cls = get_class(target)
        except Exception as err:  # noqa: BLE001 - Hydra raises several types for a bad path
            raise ConfigError(f"metrics.{key}._target_={target}: cannot import ({err})") from None
        if not (isinstance(cls, type) and issubclass(cls, AnswerMetric)):
            raise ConfigError(f"metrics.{key}._target_={target} is not a rag.metrics.base.AnswerMetric")
        try:
            metrics.append(cls(**node))
        except TypeError as err:
            raise ConfigError(f"metrics.{key}: {err}") from None
    for metric in metrics:
        for spec in metric.metric_specs():
            REGISTRY.declare(spec, first=True, replace=True)
    return metrics
