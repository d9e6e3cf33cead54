"""Rank-R1's setwise heap sort through vLLM: every tournament step is one engine batch over the unfinished
questions, with SmolLM2-135M-Instruct (chat template) standing in for Rank-R1-7B."""

from __future__ import annotations

import pytest

from rag.data.corpus import chunk_words
from rag.records import Passage, ScoredPassage
from rag.rerank.rank_r1 import RankR1Reranker
from tests.generate.helpers import CallLog, dev_questions

pytestmark = pytest.mark.vllm


def _candidates(n_questions: int = 2, per_question: int = 5) -> tuple[list[str], list[list[ScoredPassage]]]:
    """Each question's gold documents among other questions' gold documents, gold never first."""
    questions = list(dev_questions())
    queries, candidates = [], []
    for qi in range(n_questions):
        q = questions[qi]
        others = [o for o in questions[n_questions:] if not set(o.gold_doc_ids) & set(q.gold_doc_ids)]
        docs = [(o.gold_doc_ids[0], o.gold_docs[0]) for o in others[qi * 4: qi * 4 + per_question - 1]]
        docs.append((q.gold_doc_ids[0], q.gold_docs[0]))
        queries.append(q.question)
        candidates.append([ScoredPassage(Passage(f"{d}#0", d, chunk_words(t, 60)[0]), 0.0, i + 1)
                           for i, (d, t) in enumerate(docs)])
    return queries, candidates


def test_rank_r1_setwise_batches_on_vllm(smollm2, monkeypatch):
    queries, candidates = _candidates()
    reranker = RankR1Reranker(llm=smollm2, num_child=2, sort_depth=2, max_tokens=48, passage_words=60, k=3)
    log = CallLog(smollm2, monkeypatch)
    reranked = reranker.rerank(queries, candidates)
    stats = reranker.stats
    for ranked, cands in zip(reranked, candidates):  # a permutation of the candidates (the stage cuts to k)
        assert sorted(p.passage.passage_id for p in ranked) == sorted(p.passage.passage_id for p in cands)
        assert len(reranker.cut(ranked)) == 3
    assert stats["llm_calls"] == sum(stats["calls_per_question"]) >= 2 * 2
    assert stats["llm_steps"] == max(stats["calls_per_question"]) == len(log.calls)
    # one batch per step, holding every question still sorting (both, until the shorter one finishes)
    assert [n for _, n in log.calls] == [sum(1 for c in stats["calls_per_question"] if c > step)
                                        for step in range(stats["llm_steps"])]
    assert 0 <= stats["parse_failures"] <= stats["llm_calls"] and stats["prompt_tokens"] > 0
    assert reranker.key.startswith("rank_r1-c2-d2") and reranker.key.endswith("-smollm2-135m-instruct-q4_1")
