"""The mechanics the search-loop strategies share (IRCoT, Search-o1, Search-R1): rounds, searches, budgets.

A search loop lets the model decide what to retrieve while it reasons. Per question a small state machine moves
through phases; every round is ONE engine batch over all unfinished questions (whatever phase each is in), and
every query the round produced is retrieved in ONE call to `ctx.retrieve`, the run's own retriever, reranker, cut
and stage caches (as IterDRAG's sub-queries are).

Budgets are settings and never silent: a question that reaches its search limit (`max_searches`), its generated
token limit (`max_generated_tokens`, every call of the loop counted), its wall time (`max_seconds`, the rounds it
took part in, retrieval included) or its reasoning-call limit (`max_turns`) is forced to answer; the budget is
named in `steps.stop_reason` and counted in `steps.budget_hits`. The forced answer is one more call of at most
`max_tokens` tokens, beyond the token budget, so that every question gets an answer.

What every answer record keeps under `steps`: each search (query, passage and document ids returned, the round),
each LLM call (phase, the model's text, why it ended, tokens), the reasoning trace as the model saw it, the
counters (`n_searches`, `generated_tokens`, `seconds`, `llm_calls`, `budget_hits`) and the stop reason. The
answer's passages (`GenerationResult.passages`, the record's `passages`/`context`) are what the loop retrieved,
de-duplicated in retrieval order and capped at `max_passages`, so gold recall of what the loop found can be read
from the record.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rag.core.text import cut_words
from rag.generate.base import GenerationContext, GenerationInput
from rag.generate.multistep import MultiStepGenerator, norm_query, output_record
from rag.generate.parsing import ParsedAnswer
from rag.llm.base import Completion, LLMRequest
from rag.records import AnswerRecord, GenerationResult, ScoredPassage

#: the budgets a loop counts, in the order `steps.budget_hits` lists them
BUDGETS = ("max_searches", "max_generated_tokens", "max_seconds", "max_turns")
DONE = "done"
FINAL = "final"


def loop_metrics(records: Sequence[AnswerRecord]) -> dict[str, Any]:
    """The search loops' budgets as run metrics, so a budget that cut answers short shows in metrics.json and the
    sweep summary, not only in each record: `loop/budget_stops/<budget>` (questions forced to answer by it),
    `loop/budget_stop_rate` (share forced by any), `loop/searches_per_question` and `loop/turns_per_question`;
    {} for a run without a search loop."""
    loops = [r.steps for r in records if isinstance(r.steps, dict) and isinstance(r.steps.get("budget_hits"), dict)]
    if not loops:
        return {}
    out: dict[str, Any] = {f"loop/budget_stops/{b}": sum(s.get("stop_reason") == b for s in loops) for b in BUDGETS}
    out["loop/budget_stop_rate"] = round(sum(s.get("stop_reason") in BUDGETS for s in loops) / len(loops), 6)
    out["loop/searches_per_question"] = round(sum(int(s.get("n_searches") or 0) for s in loops) / len(loops), 4)
    out["loop/turns_per_question"] = round(sum(int(s.get("turns") or 0) for s in loops) / len(loops), 4)
    return out


@dataclass
class LoopState:
    """One question's progress through the loop."""

    item: GenerationInput
    phase: str
    #: what the loop retrieved (and, for IRCoT, its initial retrieval), de-duplicated, capped
    passages: list[ScoredPassage] = field(default_factory=list)
    #: the model's reasoning with the search results inserted, as the next prompt shows it
    trace: str = ""
    searches: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    generated_tokens: int = 0
    seconds: float = 0.0
    #: reasoning calls made (the calls that may ask for a search)
    turns: int = 0
    budget_hits: dict[str, int] = field(default_factory=lambda: dict.fromkeys(BUDGETS, 0))
    stop_reason: str | None = None
    answer: ParsedAnswer | None = None
    last_request: LLMRequest | None = None
    #: the query waiting for this round's retrieval
    pending_query: str | None = None
    #: the passages the last search returned (what the next phase shows the model)
    last_found: list[ScoredPassage] = field(default_factory=list)
    #: strategy-specific values (Search-o1's condensed results, IRCoT's sentences)
    extra: dict[str, Any] = field(default_factory=dict)

    def hit(self, budget: str) -> None:
        self.budget_hits[budget] += 1
        self.stop_reason = budget
        self.phase = FINAL

    def asked(self) -> set[str]:
        return {norm_query(s["query"]) for s in self.searches}


class SearchLoopGenerator(MultiStepGenerator):
    """Base class: subclasses build each phase's request and read each phase's output."""

    #: the phase that may ask for a search (its calls are the loop's turns and face the budgets)
    reasoning_phase: str = "reason"
    #: refuse a query the question already searched (IRCoT, Search-o1); Search-R1 searches it again
    refuse_repeats: bool = True

    def __init__(self, max_searches: int = 5, max_generated_tokens: int | None = 2048,
                 max_seconds: float | None = 600.0, max_turns: int | None = None, docs_per_search: int | None = 3,
                 max_passages: int | None = None, step_max_tokens: int = 256, **kwargs: Any):
        super().__init__(**kwargs)
        if max_searches < 0:
            raise ValueError("generator.max_searches must be >= 0")
        for name, value in (("max_generated_tokens", max_generated_tokens), ("max_seconds", max_seconds),
                            ("max_turns", max_turns), ("docs_per_search", docs_per_search),
                            ("max_passages", max_passages)):
            if value is not None and value < 0:
                raise ValueError(f"generator.{name} must be >= 0 or null")
        self.max_searches, self.max_generated_tokens = max_searches, max_generated_tokens
        self.max_seconds, self.max_turns = max_seconds, max_turns
        self.docs_per_search, self.max_passages = docs_per_search, max_passages
        self.step_max_tokens = step_max_tokens

    @property
    def uses_ordering(self) -> bool:
        return False  # the loop's own retrieval order is the context

    # -- hooks ------------------------------------------------------------------------------------------------
    def start(self, item: GenerationInput) -> LoopState:
        return LoopState(item, phase=self.reasoning_phase)

    def request_for(self, state: LoopState) -> LLMRequest:
        raise NotImplementedError

    def fitted_request(self, state: LoopState, engine: Any = None) -> tuple[LLMRequest, dict[str, Any] | None]:
        """The state's request fitted to the engine's context, and the fit made (None: as built). A loop without
        a fit of its own sends `request_for`'s prompt, which the engine cuts where it is too long."""
        return self.request_for(state), None

    def after(self, state: LoopState, phase: str, text: str) -> None:
        """Read one output: set `state.pending_query` to search, or move the phase on (DONE when answered)."""
        raise NotImplementedError

    def after_search(self, state: LoopState, query: str, found: list[ScoredPassage]) -> None:
        """Put a search's results into the reasoning (or queue the call that condenses them)."""
        raise NotImplementedError

    def final_answer(self, state: LoopState, text: str) -> ParsedAnswer:
        raise NotImplementedError

    # -- shared mechanics -------------------------------------------------------------------------------------
    def step_tokens(self, state: LoopState, wanted: int) -> int:
        """A reasoning call's token limit: the step's own, cut to what the question's budget has left."""
        if self.max_generated_tokens is None:
            return wanted
        return max(1, min(wanted, self.max_generated_tokens - state.generated_tokens))

    def check_budgets(self, state: LoopState) -> None:
        """Before a reasoning call: a spent token, time or turn budget forces the answer (counted)."""
        if state.phase != self.reasoning_phase:
            return
        if self.max_generated_tokens is not None and state.generated_tokens >= self.max_generated_tokens:
            state.hit("max_generated_tokens")
        elif self.max_seconds is not None and state.turns > 0 and state.seconds >= self.max_seconds:
            state.hit("max_seconds")
        elif self.max_turns is not None and state.turns >= self.max_turns:
            state.hit("max_turns")

    def may_search(self, state: LoopState, query: str) -> str | None:
        """None when the query may be retrieved, else why not ("max_searches" or "repeated_query")."""
        if len(state.searches) - state.extra.get("initial_searches", 0) >= self.max_searches:
            return "max_searches"
        if self.refuse_repeats and norm_query(query) in state.asked():
            return "repeated_query"
        return None

    def add_passages(self, state: LoopState, found: list[ScoredPassage]) -> None:
        seen = {p.passage.passage_id for p in state.passages}
        for p in found:
            if self.max_passages is not None and len(state.passages) >= self.max_passages:
                state.extra["passages_capped"] = state.extra.get("passages_capped", 0) + 1
                continue
            if p.passage.passage_id not in seen:
                state.passages.append(p)
                seen.add(p.passage.passage_id)

    def record_search(self, state: LoopState, query: str, found: list[ScoredPassage], round_no: int) -> None:
        state.searches.append({"n": len(state.searches) + 1, "round": round_no, "query": query,
                               "passage_ids": [p.passage.passage_id for p in found],
                               "doc_ids": [p.passage.doc_id for p in found]})
        state.last_found = list(found)
        self.add_passages(state, found)

    def search(self, ctx: GenerationContext, states: list[LoopState], round_no: int) -> None:
        """Every query of the round in one call to the run's retrieve function (retriever, reranker, cut)."""
        queries = [s.pending_query or "" for s in states]
        ranked = ctx.retrieve(queries) if ctx.retrieve is not None else [[] for _ in states]
        for state, query, found in zip(states, queries, ranked):
            found = list(found)[: self.docs_per_search] if self.docs_per_search is not None else list(found)
            state.pending_query = None
            self.record_search(state, query, found, round_no)
            self.after_search(state, query, found)

    def note_call(self, state: LoopState, phase: str, round_no: int, completion: Completion,
                  fit: dict[str, Any] | None = None) -> None:
        tokens = int(completion.completion_tokens or 0)
        state.generated_tokens += tokens
        if phase == self.reasoning_phase:
            state.turns += 1
        state.calls.append({"round": round_no, "phase": phase, **output_record(completion),
                            "completion_tokens": tokens, **({"fitted": fit} if fit else {})})

    def generate(self, items: list[GenerationInput], ctx: GenerationContext) -> list[GenerationResult]:
        states = [self.start(item) for item in items]
        round_no = 0
        while True:
            for state in states:
                if state.phase != DONE:
                    self.check_budgets(state)
            active = [s for s in states if s.phase != DONE]
            if not active:
                break
            round_no += 1
            began = time.perf_counter()
            phases = [s.phase for s in active]
            fitted = [self.fitted_request(s, ctx.engine) for s in active]
            requests = [request for request, _ in fitted]
            outputs = self.run_step(ctx, requests, f"{self.name} round {round_no}")
            to_search = []
            for state, phase, request, (_, fit), completion in zip(active, phases, requests, fitted, outputs):
                state.last_request = request
                self.note_call(state, phase, round_no, completion, fit)
                if phase == FINAL:
                    state.answer, state.phase = self.final_answer(state, completion.text), DONE
                    continue
                self.after(state, phase, completion.text)
                if state.pending_query is not None:
                    to_search.append(state)
            if to_search:
                self.search(ctx, to_search, round_no)
            spent = time.perf_counter() - began
            for state in active:
                state.seconds += spent
        return [self.result(state, ctx) for state in states]

    def result(self, state: LoopState, ctx: GenerationContext) -> GenerationResult:
        answer = state.answer or ParsedAnswer("", parse_failed=True, fallback="empty_output")
        steps = {"loop": self.name, "searches": state.searches, "queries": [s["query"] for s in state.searches],
                 "calls": state.calls, "trace": state.trace, "stop_reason": state.stop_reason,
                 "llm_calls": len(state.calls), "n_searches": len(state.searches),
                 "generated_tokens": state.generated_tokens, "seconds": round(state.seconds, 3),
                 "turns": state.turns, "budget_hits": dict(state.budget_hits),
                 "window_fits": sum("fitted" in c for c in state.calls),
                 "budget_hit": any(state.budget_hits.values()),
                 "budgets": {"max_searches": self.max_searches, "max_generated_tokens": self.max_generated_tokens,
                             "max_seconds": self.max_seconds, "max_turns": self.max_turns},
                 "retrieval": "run retriever" if ctx.retrieve is not None else "unavailable",
                 "passage_ids": [p.passage.passage_id for p in state.passages],
                 "doc_ids": list(dict.fromkeys(p.passage.doc_id for p in state.passages))}
        steps.update({k: v for k, v in state.extra.items() if k not in steps})
        return GenerationResult(
            answer=cut_words(answer.answer, self.max_answer_words),
            final_prompt=ctx.engine.render(state.last_request) if state.last_request else "",
            steps=steps, passages=list(state.passages), parse_failed=answer.parse_failed, fallback=answer.fallback)


def doc_block(passages: list[ScoredPassage], start: int = 1) -> list[dict[str, Any]]:
    """What a prompt shows of a search's passages: a running label, title and text."""
    return [{"label": start + i, "title": p.passage.title or p.passage.doc_id, "text": p.passage.text,
             "doc_id": p.passage.doc_id} for i, p in enumerate(passages)]


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def first_sentence(text: str) -> str:
    """The first sentence of an output (IRCoT keeps one CoT sentence per step), on one line."""
    line = " ".join((text or "").strip().split("\n\n", 1)[0].split())
    return _SENTENCE_END.split(line, maxsplit=1)[0].strip() if line else ""
