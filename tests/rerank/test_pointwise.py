"""GRAG's pointwise relevance filter on a scripted engine whose first-token log-probabilities are known."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hydra.utils import instantiate

from rag.core.errors import ConfigError
from rag.llm.base import Completion, LLMRequest
from rag.records import Passage, ScoredPassage
from rag.rerank.pointwise import PointwiseReranker
from tests.conftest import compose_config
from tests.generate.helpers import CallLog, ScriptedEngine

PROMPTS = Path(__file__).resolve().parents[2] / "rag" / "prompts"


class LogprobEngine(ScriptedEngine):
    """Answers every request with given first-token alternatives (token -> probability, by passage text)."""

    supports_logprobs = True

    def __init__(self, table: Callable[[str], dict[str, float]], model: str = "scripted"):
        super().__init__(lambda prompt, request: "")
        self.model = model
        self.table = table

    def _generate(self, requests: Sequence[LLMRequest], desc: str) -> list[Completion]:
        out = []
        for request in requests:
            prompt = self.render(request)
            self.prompts.append(prompt)
            alternatives = {token: math.log(p) for token, p in self.table(prompt).items()}
            text = max(alternatives, key=alternatives.get) if alternatives else ""
            out.append(Completion(text=text, prompt=prompt,
                                  top_logprobs=[alternatives] if request.params.top_logprobs else None))
        return out


def by_document(probabilities: dict[str, dict[str, float]]) -> Callable[[str], dict[str, float]]:
    """Alternatives chosen by the document named in the prompt ("Document: <id> ...")."""
    def table(prompt: str) -> dict[str, float]:
        doc = prompt.split("Document: ", 1)[1].split()[0]
        return probabilities[doc]
    return table


def yes(p: float) -> dict[str, float]:
    return {"Yes": p, "No": 1.0 - p}


def cands(*ids: str) -> list[ScoredPassage]:
    return [ScoredPassage(Passage(i, f"doc-{i}", f"{i} some text about {i}"), 10.0 - n, n + 1)
            for n, i in enumerate(ids)]


def ids(ranked: list[ScoredPassage]) -> list[str]:
    return [p.passage.passage_id for p in ranked]


def test_threshold_keeps_at_and_above_it_and_drops_below_as_the_reference():
    engine = LogprobEngine(by_document({"a": yes(0.6), "b": yes(0.4), "c": yes(0.5)}))
    reranker = PointwiseReranker(llm=engine, k=None)
    (ranked,) = reranker.rerank(["Q?"], [cands("a", "b", "c")])
    assert ids(ranked) == ["a", "c"]  # 0.4 < 0.5 dropped; exactly 0.5 kept (the reference drops only `< 0.5`)
    assert [p.score for p in ranked] == pytest.approx([0.6, 0.5])
    assert [p.rank for p in ranked] == [1, 2]
    assert reranker.stats == {"judged": 3, "unreadable": 0, "dropped": 1, "fallbacks": 0}


def test_sorted_by_probability_and_k_cuts_after_the_threshold():
    engine = LogprobEngine(by_document({"a": yes(0.7), "b": yes(0.9), "c": yes(0.55), "d": yes(0.8),
                                        "e": yes(0.1)}))
    reranker = PointwiseReranker(llm=engine, k=2)
    (ranked,) = reranker.rerank(["Q?"], [cands("a", "b", "c", "d", "e")])
    assert ids(ranked) == ["b", "d", "a", "c"]  # uncut (cached) list: every kept passage, best first
    assert ids(reranker.cut(ranked)) == ["b", "d"]


def test_every_pair_of_every_question_goes_in_one_engine_call(monkeypatch):
    engine = LogprobEngine(by_document({x: yes(0.9) for x in "abcde"}))
    log = CallLog(engine, monkeypatch)
    reranker = PointwiseReranker(llm=engine, k=5)
    out = reranker.rerank(["first?", "second?"], [cands("a", "b", "c"), cands("d", "e")])
    assert log.calls == [("pointwise relevance", 5)]
    assert [ids(r) for r in out] == [["a", "b", "c"], ["d", "e"]]
    assert "Question: second?" in engine.prompts[-1] and "Document: e some text about e" in engine.prompts[-1]


def test_raw_probability_of_yes_is_read_unless_normalize_renormalises_against_no():
    table = by_document({"a": {"Yes": 0.3, "No": 0.1, "The": 0.6}})
    raw = PointwiseReranker(llm=LogprobEngine(table), k=None, fallback=None)
    normalised = PointwiseReranker(llm=LogprobEngine(table), k=None, fallback=None, normalize=True)
    assert raw.score(["Q?"], [cands("a")]) == [[pytest.approx(0.3)]]
    assert normalised.score(["Q?"], [cands("a")]) == [[pytest.approx(0.75)]]
    assert raw.rerank(["Q?"], [cands("a")]) == [[]]  # 0.3 < 0.5: dropped when read as GRAG reads it
    assert ids(normalised.rerank(["Q?"], [cands("a")])[0]) == ["a"]


def test_spellings_of_yes_add_up():
    engine = LogprobEngine(by_document({"a": {" Yes": 0.35, "yes": 0.2, "No": 0.3, "Maybe": 0.15}}))
    assert PointwiseReranker(llm=engine).score(["Q?"], [cands("a")]) == [[pytest.approx(0.55)]]


def test_no_yes_or_no_among_the_alternatives_is_unreadable_and_dropped():
    engine = LogprobEngine(by_document({"a": yes(0.9), "b": {"Maybe": 0.7, "The": 0.3}}))
    reranker = PointwiseReranker(llm=engine, k=None)
    (ranked,) = reranker.rerank(["Q?"], [cands("a", "b")])
    assert ids(ranked) == ["a"]
    assert reranker.stats["unreadable"] == 1 and reranker.stats["dropped"] == 1


def test_all_below_threshold_falls_back_to_the_incoming_head_as_grag_does():
    engine = LogprobEngine(by_document({"a": yes(0.1), "b": yes(0.3), "c": yes(0.2), "d": yes(0.4)}))
    reranker = PointwiseReranker(llm=engine, k=None, fallback=2)
    (ranked,) = reranker.rerank(["Q?"], [cands("a", "b", "c", "d")])
    assert ids(ranked) == ["b", "a"]  # the incoming top 2, by probability so scores still fall down the list
    assert reranker.stats["fallbacks"] == 1 and reranker.stats["dropped"] == 2
    none = PointwiseReranker(llm=engine, k=None, fallback=None)
    assert none.rerank(["Q?"], [cands("a", "b", "c", "d")]) == [[]]


def test_threshold_null_keeps_every_passage():
    engine = LogprobEngine(by_document({"a": yes(0.1), "b": yes(0.3)}))
    (ranked,) = PointwiseReranker(llm=engine, k=None, threshold=None).rerank(["Q?"], [cands("a", "b")])
    assert ids(ranked) == ["b", "a"]


def test_passage_lines_are_joined_and_cut_to_passage_words():
    engine = LogprobEngine(lambda prompt: yes(0.9))
    passage = ScoredPassage(Passage("p", "d", "one two\nthree four five six"), 1.0, 1)
    PointwiseReranker(llm=engine, passage_words=4).score(["Q?"], [[passage]])
    assert "Document: one two three four\n" in engine.prompts[0] and "five" not in engine.prompts[0]


def test_key_names_engine_prompt_threshold_and_word_cap_but_not_k(tmp_path):
    engine = LogprobEngine(lambda prompt: yes(0.9))
    base = PointwiseReranker(llm=engine, k=5)
    assert base.key == PointwiseReranker(llm=engine, k=3).key
    assert base.key.startswith("pointwise-t0.5-") and len(base.key) <= 80
    other_prompt = tmp_path / "grag_relevance.yaml"
    other_prompt.write_text((PROMPTS / "grag_relevance.yaml").read_text().replace("one word only", "a single word"))
    variants = [PointwiseReranker(llm=engine, threshold=0.6), PointwiseReranker(llm=engine, passage_words=100),
                PointwiseReranker(llm=engine, normalize=True), PointwiseReranker(llm=engine, fallback=None),
                PointwiseReranker(llm=engine, prompt_dir=str(tmp_path)),
                PointwiseReranker(llm=LogprobEngine(lambda prompt: yes(0.9), model="another"))]
    keys = [base.key] + [v.key for v in variants]
    assert len(set(keys)) == len(keys), keys


def test_an_engine_without_log_probabilities_is_refused_at_start_up():
    with pytest.raises(ConfigError, match="rerank=pointwise needs token log-probabilities"):
        PointwiseReranker(llm=ScriptedEngine(lambda prompt, request: "Yes"))


def test_without_an_engine_it_says_which_setting_is_missing():
    with pytest.raises(ValueError, match="rerank.llm"):
        PointwiseReranker().rerank(["Q?"], [cands("a")])


def test_the_yaml_composes_and_takes_the_pipeline_engine():
    cfg = compose_config(["rerank=pointwise"])
    assert cfg.rerank.llm == cfg.llm  # `llm: ${llm}`: the generator's own engine config
    engine = LogprobEngine(lambda prompt: yes(0.9))
    reranker = instantiate(cfg.rerank, llm=engine)
    assert isinstance(reranker, PointwiseReranker) and reranker.engine is engine
    assert (reranker.k, reranker.threshold, reranker.normalize, reranker.fallback) == (5, 0.5, False, 10)
