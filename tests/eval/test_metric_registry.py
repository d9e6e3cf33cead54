"""The metric registry: every name the project writes resolves to one declared spec (kind, range, direction)."""

from __future__ import annotations

import pytest

from rag.metrics.registry import BUILTIN, KINDS, REGISTRY, MetricRegistry, MetricSpec


@pytest.mark.parametrize("name,kind,direction", [
    ("answer/f1/all", "per_answer", 1), ("answer/em/multi", "per_answer", 1),
    ("recall/rerank@5/all", "per_answer", 1), ("recall/rerank@20_any/single", "per_answer", 1),
    ("recall/retrieval@100_all/multi", "per_answer", 1),
    ("judge/liverag/correctness/all", "per_answer", 1), ("judge/crag/score/multi", "per_answer", 1),
    ("judge/liverag/correctness_share_-1/single", "rate", 0), ("judge/crag/grade_share_perfect/all", "rate", 0),
    ("judge/liverag/parse_failures", "counter", -1), ("judge/liverag/n_judged", "counter", 0),
    ("judge/liverag/correctness_n", "counter", 0), ("nuggets/vital_strict/all", "per_answer", 1),
    ("nuggets/cached_topics", "counter", 0), ("nuggets/parse_failures", "counter", 0),
    ("eval/llm_calls", "counter", -1), ("eval/llm_retries", "counter", -1), ("eval/llm_seconds", "timing", -1),
    ("llm_calls", "counter", -1), ("llm_retries", "counter", -1), ("llm_tokens_per_s", "rate", 1),
    ("llm_cache_hits", "counter", 0), ("time/total_s", "timing", -1), ("time/evaluate_s", "timing", -1),
    ("model_loads", "counter", -1), ("rerank/seconds_per_question", "timing", -1),
    ("agreement/liverag/correctness/vital_strict/tau_b", "correlation", 0),
    ("agreement/liverag/correctness/vital_strict/n_runs", "counter", 0),
    ("n_questions", "counter", 0), ("n_multi", "counter", 0),
    ("ir/retrieval/nDCG@10/all", "per_answer", 1), ("ir/rerank/RR@10/multi", "per_answer", 1),
    ("ir/retrieval/P(rel=2)@5/single", "per_answer", 1), ("ir/rerank/NumRet/all", "counter", 0),
    ("ir/retrieval/ERR_IA@20/all", "per_answer", 1),
])
def test_known_names_resolve(name, kind, direction):
    assert REGISTRY.kind(name) == kind
    assert REGISTRY.direction(name) == direction


@pytest.mark.parametrize("name", ["recall/rerank@k/all", "judge/liverag/correctness_mean", "nuggets/vital_strict",
                                  "answer/bleu/all", "something_new", "recall/rerank/all"])
def test_undeclared_names_are_refused(name):
    assert REGISTRY.lookup(name) is None
    with pytest.raises(KeyError, match="not declared"):
        REGISTRY.spec(name)


def test_cutoffs_are_distinct_metrics_of_one_spec():
    five, twenty = REGISTRY.spec("recall/rerank@5/all"), REGISTRY.spec("recall/rerank@20/all")
    assert five is twenty and five.match("recall/rerank@20/all") == {"stage": "rerank", "k": "20", "mode": "",
                                                                     "split": "all"}


def test_ranges_and_declarations():
    assert all(s.kind in KINDS for s in BUILTIN)
    assert REGISTRY.out_of_range({"answer/f1/all": 1.2, "nuggets/vital/all": 0.5, "llm_calls": -1}) == [
        "answer/f1/all", "llm_calls"]
    registry = MetricRegistry(BUILTIN)
    specific = MetricSpec("judge/x/score/{split}", "per_answer", "x", (-1.0, 1.0), True)
    registry.declare(specific, first=True)
    assert registry.spec("judge/x/score/all") is specific and registry.spec("judge/y/score/all") is not specific
    with pytest.raises(ValueError, match="declared twice"):
        registry.declare(MetricSpec("judge/x/score/{split}", "per_answer", "x", (0.0, 1.0), True))
    with pytest.raises(ValueError, match="unknown kind"):
        MetricSpec("a", "score", "bad kind")  # type: ignore[arg-type]


def test_crucible_metrics_are_declared_without_building_the_judge():
    """Issue 23, item 4: `crucible/*` existed only after the judge ran, so a sweep summary in a fresh process
    warned "undeclared, never ranked"."""
    import subprocess
    import sys

    code = ("from rag.metrics.registry import REGISTRY; "
            "print(REGISTRY.undeclared(['crucible/nugget_recall/all', 'crucible/citation_support/multi', "
            "'crucible/uncited_answers']), REGISTRY.direction('crucible/nugget_recall/all'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "1"]
