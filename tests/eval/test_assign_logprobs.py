"""Nugget assignment read from log-probabilities (`assignment: logprobs`, issue 23 item 6): one nugget per
request, the label whose first token is most likely. A label follows its nugget wherever the nugget stands in the
list, an unreadable nugget is counted and scored as not supported, and the label reader counts a token for the
one label it starts."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import pytest

from eval.nuggets import AutoNuggetizer, nugget_scores
from rag.core.errors import ConfigError
from rag.llm.asking import ask_choices, label_probabilities
from rag.llm.base import Completion, LLMEngine, LLMRequest, SamplingParams

LABELS = ("support", "partial_support", "not_support")


class LogprobEngine(LLMEngine):
    """A real engine whose backend returns first-token alternatives chosen by a function of the prompt."""

    supports_logprobs = True

    def __init__(self, alternatives):
        super().__init__(model="scripted-logprobs", chat_format="chat")
        self.alternatives = alternatives
        self.batches: list[list[LLMRequest]] = []

    def _generate(self, requests: Sequence[LLMRequest], desc: str) -> list[Completion]:
        self.batches.append(list(requests))
        out = []
        for r in requests:
            alts = self.alternatives(r)
            top = max(alts, key=alts.get) if alts else ""
            out.append(Completion(text=top, prompt_tokens=1, completion_tokens=1,
                                  top_logprobs=[alts] if r.params.top_logprobs else None))
        return out


def _nugget_of(request: LLMRequest) -> str:
    return re.search(r"Nugget: (.*)", request.messages[-1]["content"]).group(1).strip()


#: what the scripted model "believes" about each nugget (first-token alternatives as real tokenisers split them)
BELIEFS = {
    "Paris is the capital": {" support": math.log(0.7), " partial": math.log(0.2), " not": math.log(0.05)},
    "France is in Europe": {"Not": math.log(0.6), " Support": math.log(0.3), "partial": math.log(0.05)},
    "It has 2 million people": {" partial": math.log(0.5), " not": math.log(0.4), " sup": math.log(0.05)},
}
EXPECTED = {"Paris is the capital": "support", "France is in Europe": "not_support",
            "It has 2 million people": "partial_support"}


def _nuggets(order: Sequence[str]) -> list[dict[str, str]]:
    return [{"text": t, "importance": "vital" if i == 0 else "okay"} for i, t in enumerate(order)]


def test_label_probabilities_count_a_token_for_the_one_label_it_starts():
    alts = {" support": math.log(0.5), "Support": math.log(0.1), " not": math.log(0.2), "\"partial": math.log(0.1),
            " the": math.log(0.05), "": math.log(0.05)}
    probs = label_probabilities(alts, LABELS)
    assert probs == pytest.approx({"support": 0.6 / 0.9, "partial_support": 0.1 / 0.9, "not_support": 0.2 / 0.9})
    # a token that starts two labels (here "yes"/"yesterday") counts for neither; no label at all: empty
    assert label_probabilities({"yes": math.log(0.9)}, ("yes", "yesterday")) == {}
    assert label_probabilities({" The": -0.1}, LABELS) == {}


def test_labels_follow_the_nuggets_not_their_positions():
    engine = LogprobEngine(lambda r: BELIEFS[_nugget_of(r)])
    nuggetizer = AutoNuggetizer(assignment="logprobs")
    order = list(BELIEFS)
    permuted = [order[2], order[0], order[1]]
    first, second = nuggetizer.assign(engine, [("Capital of France?", "Paris is the capital of France.",
                                                _nuggets(order)),
                                               ("Capital of France?", "Paris is the capital of France.",
                                                _nuggets(permuted))])
    assert {n["text"]: n["assignment"] for n in first.nuggets} == EXPECTED
    assert {n["text"]: n["assignment"] for n in second.nuggets} == EXPECTED
    assert [n["text"] for n in second.nuggets] == permuted  # the nuggets keep their order
    # one request per (answer, nugget), all in one batch, one token each, with the alternatives asked for
    assert len(engine.batches) == 1 and len(engine.batches[0]) == 6
    assert all(r.params.max_tokens == 1 and r.params.top_logprobs == 20 and r.params.json_schema is None
               for r in engine.batches[0])
    assert first.nuggets[0]["label_probabilities"]["support"] == pytest.approx(0.7 / 0.95, abs=1e-6)
    assert first.failed_windows == 0


def test_an_unreadable_nugget_is_counted_and_scored_as_not_supported():
    beliefs = dict(BELIEFS, **{"France is in Europe": {" The": -0.1, " answer": -2.0}})
    engine = LogprobEngine(lambda r: beliefs[_nugget_of(r)])
    (result,) = AutoNuggetizer(assignment="logprobs").assign(engine, [("q", "Paris.", _nuggets(list(BELIEFS)))])
    assert [n["assignment"] for n in result.nuggets] == ["support", "failed", "partial_support"]
    assert result.failed_windows == 1
    scores = nugget_scores(result.nuggets)  # nuggetizer's rule: "failed" is not supported
    readable = nugget_scores([{**n, "assignment": "support" if n["assignment"] == "failed" else n["assignment"]}
                              for n in result.nuggets])
    assert scores["all"] < readable["all"]


def test_empty_answers_ask_nothing_and_engines_without_logprobs_refuse():
    engine = LogprobEngine(lambda r: BELIEFS[_nugget_of(r)])
    (result,) = AutoNuggetizer(assignment="logprobs").assign(engine, [("q", "  ", _nuggets(list(BELIEFS)))])
    assert engine.batches == [] and {n["assignment"] for n in result.nuggets} == {"not_support"}

    class NoLogprobs(LogprobEngine):
        supports_logprobs = False

    with pytest.raises(ConfigError, match="needs token log-probabilities"):
        ask_choices(NoLogprobs(lambda r: {}), [LLMRequest([{"role": "user", "content": "x"}])], LABELS)
    with pytest.raises(ConfigError, match="assignment='guess'"):
        AutoNuggetizer(assignment="guess")


def test_top_logprobs_stay_out_of_old_cache_keys():
    assert "top_logprobs" not in SamplingParams().to_dict()
    asked = SamplingParams(top_logprobs=5)
    assert asked.to_dict()["top_logprobs"] == 5 and SamplingParams(**asked.to_dict()) == asked


def test_a_label_read_from_alternatives_is_cached_even_when_the_reply_is_a_stop(tmp_path):
    """A base model may sample the stop ("\\n") as its one token: the reply is empty, but the label is in the
    alternatives; the response cache keeps it (an empty completion is never cached), so asking again is free and
    gives the same label."""
    from rag.llm.cache import ResponseCache

    class StopFirst(LogprobEngine):
        def _generate(self, requests, desc):
            self.batches.append(list(requests))
            return [Completion(text="", prompt_tokens=1, completion_tokens=1,
                               top_logprobs=[{"\n": -0.1, **BELIEFS[_nugget_of(r)]}]) for r in requests]

    engine = StopFirst(None)
    engine.cache = ResponseCache(tmp_path / "llm")
    items = [("q", "Paris is the capital.", _nuggets(list(BELIEFS)))]
    first = AutoNuggetizer(assignment="logprobs").assign(engine, items)[0]
    again = AutoNuggetizer(assignment="logprobs").assign(engine, items)[0]
    assert {n["text"]: n["assignment"] for n in first.nuggets} == EXPECTED
    assert [n["assignment"] for n in again.nuggets] == [n["assignment"] for n in first.nuggets]
    assert len(engine.batches) == 1 and engine.usage.cache_hits == 3 and engine.usage.empty_completions == 0
