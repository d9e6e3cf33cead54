"""The pointwise filter and the diversity step with the real small model (Gemma 3 270M on llama.cpp, plain text)
on one dev question: the base model's judgments are weak, so the checks are about the mechanics that must hold
whatever it says (every pair read from real log-probabilities, one engine batch, a permutation of the input)."""

from __future__ import annotations

import pytest

from rag.rerank.chain import ChainReranker
from rag.rerank.diversity import DiversityReranker
from rag.rerank.pointwise import PointwiseReranker
from tests.generate import test_strategies_real
from tests.generate.helpers import CallLog, items_for

pytestmark = pytest.mark.slow

#: the module-scoped real Gemma 3 270M of the strategies' real-model tests
engine = test_strategies_real.engine


def test_pointwise_then_diversity_on_one_real_question(engine, monkeypatch, data_dir):
    (item,) = items_for(("1",), words=40, distractors=2)
    passages = item.passages
    log = CallLog(engine, monkeypatch)
    pointwise = PointwiseReranker(llm=engine, k=None, threshold=None)
    scores = pointwise.score([item.question.question], [passages])[0]
    assert log.calls == [("pointwise relevance", len(passages))]
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert pointwise.stats["judged"] == len(passages)
    assert pointwise.stats["unreadable"] < len(passages)  # the model does answer Yes or No somewhere

    diversity = DiversityReranker(llm=engine, k=None, pool=3, max_tokens=48)
    chain = ChainReranker({"pointwise": pointwise, "diversity": diversity}, k=2)
    (ranked,) = chain.rerank([item.question.question], [passages])
    assert sorted(p.passage.passage_id for p in ranked) == sorted(p.passage.passage_id for p in passages)
    assert log.calls[-1] == ("knowledge elements", 3)
    assert chain.stats["diversity.pool"] == 3 and chain.stats["pointwise.judged"] == 2 * len(passages)
    assert chain.stats["diversity.elements"] > 0  # the model writes some lines
    assert len(chain.cut(ranked)) == 2
