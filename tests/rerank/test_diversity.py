"""Knowledge-aware diverse selection: element parsing, matching, the greedy walk and the reranker around them."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.utils import instantiate

from rag.llm.cache import ResponseCache
from rag.records import Passage, ScoredPassage
from rag.rerank.diversity import (
    DiversityReranker,
    content_words,
    diverse_order,
    greedy_cover,
    parse_elements,
    same_element,
)
from tests.conftest import compose_config
from tests.generate.helpers import CallLog, ScriptedEngine

#: what the scripted model writes for each passage (found by the passage's id at the start of its text)
ELEMENTS = {
    "p1": "- Paris is the capital of France.\n- France uses the euro.",
    "p2": "1. The capital of France is Paris\n2. France uses the euro as its currency",
    "p3": "* The Eiffel Tower is 330 metres tall.",
    "p4": "NONE",
    "p5": "The Louvre is the most visited museum.",
    "p6": "The Seine flows through Paris.",
}


def reply(prompt: str, request) -> str:
    passage = prompt.split("Passage: ", 1)[1].split()[0]
    return ELEMENTS[passage]


def cands(*ids: str) -> list[ScoredPassage]:
    return [ScoredPassage(Passage(i, f"doc-{i}", f"{i} text of {i}"), 10.0 - n, n + 1) for n, i in enumerate(ids)]


def ids(ranked: list[ScoredPassage]) -> list[str]:
    return [p.passage.passage_id for p in ranked]


def test_elements_are_read_one_per_line_without_markers_headings_or_none():
    text = "Knowledge elements:\n- A is B.\n2) C is D\n[3] E is F\n\n* A is B.\nNONE\n• G is H"
    assert parse_elements(text) == ["A is B.", "C is D", "E is F", "G is H"]
    assert parse_elements(text, max_elements=2) == ["A is B.", "C is D"]
    assert parse_elements("None.") == []


def test_elements_match_on_content_words_above_the_overlap():
    a, b = content_words("Paris is the capital of France."), content_words("The capital of France is Paris")
    assert a == {"paris", "capital", "france"} and same_element(a, b, 1.0)
    tower = content_words("The Eiffel Tower is 330 metres tall")
    height = content_words("Eiffel Tower height: 330 metres")
    assert same_element(tower, height, 0.5) and not same_element(tower, height, 0.7)  # 4 of 6 words shared
    assert not same_element(content_words("X is open"), content_words("X is not open"), 1.0)  # negation counts
    assert content_words("France's currency") == {"france", "currency"}


def test_greedy_walk_keeps_passages_that_add_uncovered_elements():
    elements = [["Paris is the capital of France", "France uses the euro"],
                ["The capital of France is Paris"],  # nothing new
                ["The Eiffel Tower is 330 metres tall"],
                [],  # no element
                ["France uses the euro", "The Louvre is in Paris"]]  # one new element of two
    assert greedy_cover(elements) == [0, 2, 4]
    assert greedy_cover(elements, min_new=2) == [0]
    assert diverse_order(7, [0, 2, 4]) == [0, 2, 4, 1, 3, 5, 6]
    # a selected passage covers all it says, its near-repeats too: p2 repeats p1's first element, not p0's
    chained = [["Paris is the capital of France"], ["The capital of France is Paris, a large city", "Lyon is a city"],
               ["Paris is a large city"]]
    assert greedy_cover(chained) == [0, 1]


def test_reranker_puts_covering_passages_first_then_the_rest_in_order(monkeypatch):
    engine = ScriptedEngine(reply)
    log = CallLog(engine, monkeypatch)
    reranker = DiversityReranker(llm=engine, k=3, pool=5)
    out = reranker.rerank(["Q1?", "Q2?"], [cands("p1", "p2", "p3", "p4", "p5", "p6"), cands("p2", "p1")])
    assert log.calls == [("knowledge elements", 7)]  # the pools of both questions in one batch
    assert ids(out[0]) == ["p1", "p3", "p5", "p2", "p4", "p6"]  # p6 is beyond the pool: last, in order
    assert ids(reranker.cut(out[0])) == ["p1", "p3", "p5"]
    assert ids(out[1]) == ["p2", "p1"]  # p1 says what p2 said: it follows
    assert [p.score for p in out[0]] == [6.0, 5.0, 4.0, 3.0, 2.0, 1.0]  # falling, so trec_eval keeps the order
    assert [p.rank for p in out[0]] == [1, 2, 3, 4, 5, 6]
    assert reranker.stats == {"pool": 7, "elements": 10, "empty": 1, "selected": 4}
    assert "Question: Q2?" in engine.prompts[-1] and "Passage: p1 text of p1" in engine.prompts[-1]


def test_fill_takes_the_best_remaining_when_too_few_passages_add_knowledge():
    reranker = DiversityReranker(llm=ScriptedEngine(reply), k=3, pool=3)
    (ranked,) = reranker.rerank(["Q?"], [cands("p1", "p2", "p4", "p3")])
    assert ids(reranker.cut(ranked)) == ["p1", "p2", "p4"]  # only p1 covers; p3 is outside the pool


def test_order_does_not_depend_on_k_and_score_agrees_with_rerank():
    lists = [cands("p2", "p1", "p3", "p5")]
    a = DiversityReranker(llm=ScriptedEngine(reply), k=1).rerank(["Q?"], lists)
    b = DiversityReranker(llm=ScriptedEngine(reply), k=None).rerank(["Q?"], lists)
    assert ids(a[0]) == ids(b[0]) == ["p2", "p3", "p5", "p1"]
    scores = DiversityReranker(llm=ScriptedEngine(reply)).score(["Q?"], lists)
    assert scores == [[4.0, 1.0, 3.0, 2.0]]


def test_requests_go_through_the_response_cache(tmp_path):
    engine = ScriptedEngine(reply)
    engine.cache = ResponseCache(tmp_path / "llm")
    reranker = DiversityReranker(llm=engine, pool=3)
    first = reranker.rerank(["Q?"], [cands("p1", "p2", "p3")])
    assert reranker.rerank(["Q?"], [cands("p1", "p2", "p3")]) == first
    assert engine.usage.calls == 3 and engine.usage.cache_hits == 3


def test_key_names_pool_matching_engine_and_prompt_but_not_k(tmp_path):
    engine = ScriptedEngine(reply)
    base = DiversityReranker(llm=engine, k=5)
    assert base.key == DiversityReranker(llm=engine, k=2).key and len(base.key) <= 80
    prompt = Path(__file__).resolve().parents[2] / "rag" / "prompts" / "magikarp_elements.yaml"
    (tmp_path / "magikarp_elements.yaml").write_text(prompt.read_text().replace("short factual", "brief factual"))
    other = ScriptedEngine(reply)
    other.model = "another"
    variants = [DiversityReranker(llm=engine, pool=10), DiversityReranker(llm=engine, overlap=0.8),
                DiversityReranker(llm=engine, min_new=2), DiversityReranker(llm=engine, max_tokens=64),
                DiversityReranker(llm=engine, prompt_dir=str(tmp_path)), DiversityReranker(llm=other)]
    keys = [base.key] + [v.key for v in variants]
    assert len(set(keys)) == len(keys), keys


def test_without_an_engine_it_says_which_setting_is_missing():
    with pytest.raises(ValueError, match="rerank.llm"):
        DiversityReranker().rerank(["Q?"], [cands("p1")])


def test_the_yaml_composes_and_takes_the_pipeline_engine():
    cfg = compose_config(["rerank=diversity"])
    assert cfg.rerank.llm == cfg.llm
    engine = ScriptedEngine(reply)
    reranker = instantiate(cfg.rerank, llm=engine)
    assert isinstance(reranker, DiversityReranker) and reranker.engine is engine
    assert (reranker.k, reranker.pool, reranker.overlap) == (5, 20, 0.5)
