"""metrics=used_recall: gold recall of the passages an answer was written from, which for a multi-step strategy
are not the run's top k."""

from __future__ import annotations

from rag.metrics.base import RunShape, ScoredAnswer
from rag.metrics.registry import REGISTRY
from rag.metrics.retrieval import UsedRecall
from rag.records import Passage, Question, ScoredPassage


def _passages(*doc_ids: str) -> list[ScoredPassage]:
    return [ScoredPassage(Passage(f"{d}#0", d, "text"), 1.0) for d in doc_ids]


def test_the_used_passages_are_scored_not_the_context():
    question = Question(id="q", question="?", gold_doc_ids=["g1", "g2"], hop="multi")
    metric = UsedRecall()
    context = _passages("x", "g1")
    # a loop's own searches found g2 as well: the used list, not the run's cut context, is scored
    loop = ScoredAnswer(question, "a", _passages("x", "g1"), context, used=_passages("g1", "y", "g2"))
    assert metric.score(loop) == {"recall_used": 1.0, "recall_used_any": 1.0, "recall_used_all": 1.0,
                                  "passages_used": 3.0}
    plain = ScoredAnswer(question, "a", context, context)  # no strategy filter: the context as it was
    assert metric.score(plain) == {"recall_used": 0.5, "recall_used_any": 1.0, "recall_used_all": 0.0,
                                   "passages_used": 2.0}
    assert metric.score(ScoredAnswer(Question(id="n", question="?"), "a", context, context)) == {}


def test_its_run_metrics_are_declared():
    names = UsedRecall().run_metrics(RunShape(20, 5))
    for name in names.values():
        spec = REGISTRY.spec(f"{name}/all")
        assert spec.pattern in {"recall/used{mode}/{split}", "passages/used/{split}"}
    assert REGISTRY.direction("recall/used_all/multi") > 0
    assert REGISTRY.direction("passages/used/all") == 0
