"""The judge interface: every evaluation (LLM judges, the AutoNuggetizer, Crucible's metrics) is one `Judge`.

A judge is a class plus one YAML in `conf/judge/` with `_target_` (packaged `# @package judge.<name>`), so a
new judge touches nothing else: `rag.judge.run` builds whatever the `judge` group composed, gives each judge its engine
from the shared `EngineFactory`, lets it write its per-answer results into the records, and merges the run
metrics it returns. The metric names a judge writes are declared to the registry (`metric_specs`); its
per-answer results go under `record.judges[<name>]` (`store`), and the evaluations read from them
(`answer_values`: `judge/<name>/<field>`, or what `declaration` names) are what agreement, the W&B answers
table and the report show.

A judge scored against nuggets sets `uses_nuggets`: it receives the run's one `NuggetSet` as `ctx.nuggets` (made
once from the `judge.nuggetizer` node, `rag.judge.nugget_sets`) and its source as `ctx.nuggetizer`, never builds
its own, and each of its results records its topic's set (`nugget_set`), as its metrics do per judge.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag.judge.nugget_sets import NuggetSet, NuggetSource
from rag.llm.base import LLMEngine
from rag.metrics.registry import MetricSpec
from rag.records import VALUES_KEY, AnswerRecord, result_values

#: answer splits every judge reports (RAGtifier reports single-hop and multi-hop apart)
SPLITS = ("all", "single", "multi")


def split_of(record: AnswerRecord, split: str) -> bool:
    return split == "all" or record.hop == split


@dataclass
class EvalContext:
    """Where a judge may write files and keep caches."""

    run_dir: Path
    cache_dir: Path
    #: the run's one nugget set, for judges with `uses_nuggets` (None when no such judge runs)
    nuggets: NuggetSet | None = None
    #: what made it (AutoNuggetizer: its assignment settings serve every nugget judge)
    nuggetizer: NuggetSource | None = None


class Judge(ABC):
    """One evaluation of a run's answers. Subclasses set `name` and implement `evaluate`."""

    #: the judge's name: its key under `record.judges` and its metric prefix `judge/<name>/`
    name: str
    #: the judge's engine config (an `llm` node with `_target_`), or None for judges without an LLM
    llm: Mapping[str, Any] | None = None
    #: scored against nuggets: `evaluate` gets the run's one nugget set as `ctx.nuggets` (module docstring)
    uses_nuggets: bool = False

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

    def context_evaluations(self) -> list[str]:
        """The per-answer evaluations that judge an answer against its retrieved passages (faithfulness): undefined
        for answers that had none (`eval.meta` says so in their rows). None by default."""
        return []

    def declaration(self) -> dict[str, Any] | None:
        """How a reader names this judge's per-answer values, stored with every result (`_values`): a metric
        `prefix`, the result `fields` that are evaluations, and `reference` (its values are the truth others are
        compared with). None: the default rule (every number as `judge/<name>/<field>`) fits."""
        return None

    def store(self, record: AnswerRecord, result: Mapping[str, Any]) -> None:
        """Write one answer's result under `record.judges[self.name]` (the one place a judge's result goes)."""
        declared = self.declaration()
        record.judges[self.name] = {**result, VALUES_KEY: declared} if declared else dict(result)

    def answer_values(self, record: AnswerRecord) -> dict[str, float]:
        """This judge's per-answer evaluations of one answer (what agreement pairs, W&B tables and the report
        show), read from its stored result."""
        return result_values(self.name, record.judges.get(self.name))

    def measurement(self, evaluation: str) -> tuple[str, list[float] | None]:
        """The level of measurement of one of this judge's per-answer evaluations (nominal, ordinal, interval,
        ratio) and its scale's values, for Krippendorff's alpha of repeated verdicts (`rag.judge.repeats`).
        Default: interval, no fixed scale (continuous scores such as nugget shares)."""
        return "interval", None

    def report(self, metrics: Mapping[str, Any]) -> str:
        """A Markdown section for `eval_report.md`."""
        return ""
