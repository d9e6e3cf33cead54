"""IRCoT (Trivedi et al., ACL 2023): interleave one chain-of-thought sentence with one retrieval.

The loop follows the authors' code (StonyBrookNLP/ircot, `commaqa/inference/ircot.py`):

- the question's own retrieval (the run's passages, cut to `docs_per_search`) is the first set of paragraphs;
- `reason`: the model sees the paragraphs collected so far, the question and the chain of thought so far, and
  writes the next step; only its FIRST sentence is kept;
- that sentence is the next query (a "reasoning" sentence such as "So ..."/"Thus ..." is skipped in favour of the
  last one that is not, else the question, as IRCoT's `question_or_last_generated_sentence`); the new passages join
  the collection up to `max_passages` (IRCoT capped it at 15 paragraphs);
- the chain ends when a sentence says "answer is", or at a budget (`max_searches` steps, tokens, time, turns);
- `final` (IRCoT's reader): a chain-of-thought reader over every collected paragraph answers; its "So the answer
  is:" is the answer. With `reader: false` an answer the chain already gave is taken as it is (one call fewer).

An unreadable reader output falls back to the chain's own answer (`fallback="chain_answer"`), else to the whole
output (`"whole_output"`).

A prompt longer than the engine's context (15 paragraphs of LiveRAG's 512-word passages overflow an 8,192-token
window) is fitted by the method's own parameters (`fit_window`, on by default) instead of the engine cutting its
middle: first fewer demonstrations, then the collection shown cut to its first k paragraphs (IRCoT's paragraph cap,
lowered for that call; the question's own retrieval comes first). The chain of thought is never cut. The order is
ours; each call's fit is stored in its `steps.calls` entry (`fitted`) and counted in `steps.window_fits`.
"""

from __future__ import annotations

import re
from typing import Any

from rag.generate.base import GenerationInput
from rag.generate.parsing import ParsedAnswer, after_last, clean_output, first_line
from rag.generate.search_loop import DONE, FINAL, LoopState, SearchLoopGenerator, doc_block, first_sentence
from rag.llm.base import LLMRequest
from rag.records import ScoredPassage

ANSWER_IS = "answer is"
#: IRCoT's `is_reasoning_sentence` starters: such a sentence concludes, it asks for nothing new
_REASONING = ("thus ", "thus,", "so ", "so,", "that is,", "therefore", "hence")
_ARITHMETIC = re.compile(r".*\d[\d,]*\.?\d* [+-] \d[\d,]*\.?\d* = \d")


def is_reasoning_sentence(sentence: str) -> bool:
    low = sentence.lower()
    return low.startswith(_REASONING) or bool(_ARITHMETIC.match(sentence))


def answer_after(text: str) -> str | None:
    """The answer after the last "answer is" (":" optional), one line, without a closing full stop."""
    found = after_last(text or "", ANSWER_IS)
    if found is None:
        return None
    answer = clean_output(first_line(found.lstrip(" :")))
    return answer[:-1].strip() if answer.endswith(".") else answer


class IRCoTGenerator(SearchLoopGenerator):
    name = "ircot"
    default_prompts = {"reason": "ircot", "reader": "ircot_reader"}

    def __init__(self, reader: bool = True, num_demos: int = 2, fit_window: bool = True, **kwargs: Any):
        kwargs.setdefault("max_passages", 15)
        kwargs.setdefault("step_max_tokens", 64)
        super().__init__(**kwargs)
        self.reader, self.num_demos = reader, num_demos
        #: fit an over-long prompt by fewer demonstrations, then fewer paragraphs (module docstring)
        self.fit_window = fit_window

    def start(self, item: GenerationInput) -> LoopState:
        state = LoopState(item, phase=self.reasoning_phase if self.max_searches > 0 else FINAL)
        initial = item.passages[: self.docs_per_search] if self.docs_per_search is not None else item.passages
        # IRCoT's first retrieval is the question's: the run already made it (retriever, reranker, cut, caches)
        self.record_search(state, item.question.question, list(initial), 0)
        state.extra.update({"initial_searches": 1, "sentences": [], "repeated_queries": 0})
        if self.max_searches == 0:
            state.hit("max_searches")
        return state

    def request_for(self, state: LoopState, demos: int | None = None, shown: int | None = None) -> LLMRequest:
        """The phase's prompt with the first `demos` demonstrations (default `num_demos`) and the first `shown`
        collected paragraphs (default all)."""
        final = state.phase == FINAL
        template = self.template("reader" if final else "reason")
        examples = list(template.extra.get("demonstrations", []))[: self.num_demos if demos is None else demos]
        stop = template.extra.get("stop", ())
        tokens = self.max_tokens if final else self.step_tokens(state, self.step_max_tokens)
        return self.step_request(template, tokens, stop=stop, demos=examples,
                                 passages=doc_block(state.passages[:shown]), question=state.item.question.question,
                                 cot=state.trace)

    def fitted_request(self, state: LoopState, engine: Any = None) -> tuple[LLMRequest, dict[str, Any] | None]:
        request = self.request_for(state)
        if not self.fit_window or engine is None:
            return request, None
        over = engine.overflow(request)
        if over <= 0:
            return request, None
        template = self.template("reader" if state.phase == FINAL else "reason")
        demos = len(list(template.extra.get("demonstrations", []))[: self.num_demos])
        for keep in range(demos - 1, -1, -1):
            request = self.request_for(state, keep)
            if engine.overflow(request) <= 0:
                return request, {"demonstrations": keep, "paragraphs": len(state.passages), "over_tokens": over}
        for shown in range(len(state.passages) - 1, 0, -1):
            request = self.request_for(state, 0, shown)
            if engine.overflow(request) <= 0:
                return request, {"demonstrations": 0, "paragraphs": shown, "over_tokens": over}
        return request, {"demonstrations": 0, "paragraphs": min(len(state.passages), 1), "over_tokens": over,
                         "still_over": engine.overflow(request)}

    def after(self, state: LoopState, phase: str, text: str) -> None:
        sentence = first_sentence(text)
        if not sentence:
            state.phase, state.stop_reason = FINAL, "empty_step"
            return
        state.extra["sentences"].append(sentence)
        state.trace = f"{state.trace} {sentence}".strip()
        if ANSWER_IS in sentence.lower():
            state.stop_reason = "answer_in_chain"
            chain_answer = answer_after(sentence)
            state.extra["chain_answer"] = chain_answer
            if not self.reader and chain_answer:
                state.answer, state.phase = ParsedAnswer(chain_answer), DONE
            else:
                state.phase = FINAL
            return
        kept = [s for s in state.extra["sentences"] if not is_reasoning_sentence(s)]
        query = kept[-1] if kept else state.item.question.question
        refused = self.may_search(state, query)
        if refused == "max_searches":
            state.hit("max_searches")
        elif refused == "repeated_query":
            state.extra["repeated_queries"] += 1  # the chain goes on without new paragraphs
        else:
            state.pending_query = query

    def after_search(self, state: LoopState, query: str, found: list[ScoredPassage]) -> None:
        if len(state.searches) - 1 >= self.max_searches:  # the step budget is spent: the reader answers
            state.hit("max_searches")

    def final_answer(self, state: LoopState, text: str) -> ParsedAnswer:
        answer = answer_after(text)
        if answer:
            return ParsedAnswer(answer)
        chain = state.extra.get("chain_answer")
        if chain:
            return ParsedAnswer(chain, parse_failed=True, fallback="chain_answer")
        whole = clean_output(first_line(text))
        if whole:
            return ParsedAnswer(whole, parse_failed=True, fallback="whole_output")
        return ParsedAnswer("", parse_failed=True, fallback="empty_output")
