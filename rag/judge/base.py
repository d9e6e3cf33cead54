"""The judge interface: every evaluation (LLM judges, the AutoNuggetizer, Crucible's metrics) is one `Judge`.

A judge is a class plus one YAML in `conf/judge/` with `_target_` (packaged `# @package judge.<name>`), so a
new judge touches nothing else: `rag.judge.run` builds whatever the `judge` group composed, gives each judge its engine
from the shared `EngineFactory`, lets it write its per-answer results into the records, and merges the run
metrics it returns. The metric names a judge writes are declared to the registry (`metric_specs`), and the
per-answer evaluations it adds (`judge/<name>/<field>`, `nuggets/<metric>`) are what agreement pairs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag.llm.base import LLMEngine
from rag.metrics.registry import MetricSpec
from rag.records import AnswerRecord

#: answer splits every judge reports (RAGtifier reports single-hop and multi-hop apart)
SPLITS = ("all", "single", "multi")


def split_of(record: AnswerRecord, split: str) -> bool:
    return split == "all" or record.hop == split


@dataclass
class EvalContext:
    """Where a judge may write files and keep caches."""

    run_dir: Path
    cache_dir: Path


class Judge(ABC):
    """One evaluation of a run's answers. Subclasses set `name` and implement `evaluate`."""

    #: the judge's name: its key under `record.judges` and its metric prefix `judge/<name>/`
    name: str
    #: the judge's engine config (an `llm` node with `_target_`), or None for judges without an LLM
    llm: Mapping[str, Any] | None = None

    def __init__(self, name: str, llm: Mapping[str, Any] | None = None):
        self.name = name
        self.llm = llm

    @abstractmethod
    def evaluate(self, records: Sequence[AnswerRecord], engine: LLMEngine | None,
                 ctx: EvalContext) -> dict[str, Any]:
        """Write each answer's result into its record; return the run metrics (names declared in the registry)."""

    @abstractmethod
    def metric_specs(self) -> list[MetricSpec]:
        """The metric names this judge writes, as specific as it knows them (range, direction)."""

    @property
    def metric_prefix(self) -> str:
        """Every run metric of this judge starts with this (re-judging replaces exactly these)."""
        return f"judge/{self.name}/"

    def per_answer_fields(self) -> list[str]:
        """Per-answer evaluation names this judge adds (`judge/<name>/<field>`): rows of the agreement matrix."""
        return []

    def report(self, metrics: Mapping[str, Any]) -> str:
        """A Markdown section for `eval_report.md`."""
        return ""
