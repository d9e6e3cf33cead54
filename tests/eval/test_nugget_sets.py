"""Issue 35: a nugget set is one thing per run, received by every nugget-based judge (a judge added later through
the judge interface included), named in each judge's results and metrics; two cells compare on a nugget-based
metric only over topics where their sets are the same."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from evaltools import ScriptedEngine, factory_with, judge_root, prompt_text, synthetic_records
from omegaconf import OmegaConf

from rag.core.errors import ConfigError
from rag.judge.base import EvalContext, Judge
from rag.judge.nugget_sets import (
    compare_nugget_sets,
    identity_of,
    nugget_set_for,
    same_nugget_set_topics,
)
from rag.judge.run import build_judges, evaluate_records
from rag.llm.base import LLMEngine
from rag.metrics.registry import MetricSpec
from rag.records import AnswerRecord


class NuggetCount(Judge):
    """A judge defined outside the project that is scored against nuggets: how many nuggets each answer's text
    mentions word for word. It only declares `uses_nuggets`; the run hands it the set."""

    uses_nuggets = True
    received: list[Any] = []

    def __init__(self, name: str = "count", llm: Any = None):
        super().__init__(name, None)

    def metric_specs(self) -> list[MetricSpec]:
        return [MetricSpec(f"judge/{self.name}/mentioned/{{split}}", "per_answer", "nuggets mentioned", (0, None), True)]

    def evaluate(self, records: Sequence[AnswerRecord], engine: LLMEngine | None, ctx: EvalContext) -> dict[str, Any]:
        NuggetCount.received.append(ctx.nuggets)
        for record in records:
            topic = ctx.nuggets.get(record.id)
            self.store(record, {"mentioned": sum(n["text"] in record.answer for n in topic.nuggets)})
        return {}


def respond(request) -> str:
    text = prompt_text(request)
    if "Update the list of atomic nuggets" in text:
        return json.dumps({"nuggets": ["Fact is true", "Gold document about"]})
    if "Answer:" in text:
        return json.dumps({"labels": ["support", "not_support"]})
    return json.dumps({"labels": ["vital", "okay"]})


def test_every_nugget_judge_receives_the_one_set_made_once(tmp_path):
    root = judge_root("nuggets")
    root.judge.count = {"_target_": "test_nugget_sets.NuggetCount"}
    engine = ScriptedEngine(respond)
    records = synthetic_records(3)
    NuggetCount.received.clear()
    metrics = evaluate_records(root.judge, records, tmp_path / "run", tmp_path / "cache", factory_with(engine, root))
    creations = [r for b in engine.batches for r in b if "Update the list" in prompt_text(r)]
    assert len(creations) == 3  # one set for both judges: each topic's nuggets made once
    [nuggets] = NuggetCount.received
    for record in records:  # both judges name the same set per topic, the new judge without writing it itself
        assert record.judges["count"]["nugget_set"] == record.judges["nuggets"]["nugget_set"] == \
            nuggets.get(record.id).identity
    topics = {r.id: nuggets.get(r.id).identity for r in records}
    assert metrics["judge/count/nugget_set"] == {"identity": identity_of(topics), "source": "gold_docs",
                                                 "topics": topics}
    assert metrics["nuggets/nugget_set"] == metrics["judge/count/nugget_set"]


def test_a_nugget_judge_without_the_shared_settings_node_is_refused_in_one_line():
    root = judge_root("nuggets")
    del root.judge["nuggetizer"]
    with pytest.raises(ConfigError, match=r"judge.nuggetizer: judge\(s\) nuggets are scored against nuggets"):
        build_judges(root.judge)
    copied = OmegaConf.create({"llm": {"_target_": "x"}, "judge": {"llm": "${llm}", "argue": {
        "_target_": "eval.argue.ArgueJudge", "nuggets": {"max_nuggets": 5}}}})
    with pytest.raises(ConfigError, match="judge.argue: .*'nuggets'"):  # no judge keeps its own nugget settings
        build_judges(copied.judge)


def test_cells_compare_only_over_topics_with_the_same_set():
    a = {"q1": "s1", "q2": "s2", "q3": "s3"}
    b = {"q1": "s1", "q2": "other", "q4": "s4"}
    assert same_nugget_set_topics(a, b) == ["q1"]  # q2 differs, q3 and q4 were not scored by both
    comparison = compare_nugget_sets("argue/f1/all", {"A": a, "B": b, "C": None})  # C: no set recorded
    assert not comparison.comparable and comparison.differing == {"q2": ["A", "B"]}
    assert comparison.notice({"A": "#0", "B": "#1"}) == \
        "argue/f1/all: not ranked; cells #0, #1 scored topic(s) q2 against different nugget sets"
    assert compare_nugget_sets("argue/f1/all", {"A": a, "B": dict(a)}).comparable
    sets = {"argue/": a, "judge/x/": b}
    assert nugget_set_for("argue/f1/all", sets) is a and nugget_set_for("judge/x/y/all", sets) is b
    assert nugget_set_for("answer/f1/all", sets) is None  # not a nugget-based metric
