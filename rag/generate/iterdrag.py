"""IterDRAG (Yue et al., ICLR 2025): demonstrations, then follow-up sub-queries answered with fresh retrieval.

Per question, a small state machine over rounds; every round is ONE engine batch that mixes whatever each
unfinished question needs next:

- `next`: the model continues the chain with "Follow up: <sub-query>" or "So the final answer is: <answer>";
- `intermediate`: the sub-query was retrieved with `ctx.retrieve` (the run's retriever, reranker and cut; all
  sub-queries of a round in one call), its passages joined the context, and the model writes
  "Intermediate answer: ...";
- `final`: after `max_iterations` sub-queries, or when the model wrote neither marker, repeated a sub-query or
  left one empty, the prompt ends in "So the final answer is:" and the model must answer.

The context keeps retrieval order (no reordering, `uses_ordering` is False): the input passages, then each
sub-query's new passages. A prompt longer than the engine's context is fitted by the method's own parameters
(`fit_window`, on by default): the paper's configuration is its number of demonstrations m and of documents per
retrieval k, chosen for a context budget by its computation allocation model (not fitted here). Our order, not the
paper's: the demonstrations are dropped first (they are the same for every question), then the passages kept from
each retrieval (the question's own and every sub-query's) are cut to the same top k', the chain never; each call's fit is stored in its `steps.calls` entry (`fitted`), and only a prompt that does not fit with
no demonstration and one passage per retrieval is left to the engine's middle cut. Unparseable final output (empty) falls back to the last intermediate answer
(`fallback="last_intermediate_answer"`), else `"empty_output"`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rag.core.text import cut_words
from rag.generate.base import GenerationContext, GenerationInput, passage_views
from rag.generate.multistep import MultiStepGenerator, norm_query, output_record
from rag.generate.parsing import ParsedAnswer, before_marker, clean_output, find_marker, first_line
from rag.llm.base import LLMRequest
from rag.prompts import PromptTemplate
from rag.records import GenerationResult, ScoredPassage

FOLLOW_UP = "Follow up:"
INTERMEDIATE = "Intermediate answer:"
FINAL = "So the final answer is:"


@dataclass
class _Chain:
    """One question's progress through the rounds."""

    item: GenerationInput
    passages: list[ScoredPassage]
    #: the passages each retrieval added, in order (the question's own first): what a window fit cuts per search
    batches: list[list[ScoredPassage]] = field(default_factory=list)
    phase: str = "next"
    chain: list[dict[str, Any]] = field(default_factory=list)
    pending_query: str | None = None
    pending_ids: list[str] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = None
    answer: ParsedAnswer | None = None
    last_request: LLMRequest | None = None

    def add_passages(self, new: list[ScoredPassage]) -> None:
        seen = {p.passage.passage_id for p in self.passages}
        added = []
        for p in new:
            if p.passage.passage_id not in seen:
                added.append(p)
                seen.add(p.passage.passage_id)
        self.passages += added
        self.batches.append(added)

    def kept(self, per_search: int | None) -> list[ScoredPassage]:
        """The passages in retrieval order, each retrieval's top `per_search` (all: None)."""
        if per_search is None:
            return list(self.passages)
        return [p for batch in self.batches for p in batch[:per_search]]


class IterDRAGGenerator(MultiStepGenerator):
    name = "iterdrag"
    default_prompts = {"iterdrag": "iterdrag"}

    def __init__(self, max_iterations: int = 5, num_demos: int = 4, subquery_max_tokens: int = 64,
                 intermediate_max_tokens: int = 128, fit_window: bool = True, **kwargs: Any):
        super().__init__(**kwargs)
        if max_iterations < 0 or num_demos < 0:
            raise ValueError("generator.max_iterations and generator.num_demos must be >= 0")
        self.max_iterations, self.num_demos = max_iterations, num_demos
        #: fit an over-long prompt by fewer demonstrations, then fewer passages per retrieval (module docstring)
        self.fit_window = fit_window
        self.subquery_max_tokens, self.intermediate_max_tokens = subquery_max_tokens, intermediate_max_tokens

    @property
    def uses_ordering(self) -> bool:
        return False

    # -- prompts ----------------------------------------------------------------------------------------------
    def request_for(self, template: PromptTemplate, state: _Chain, engine: Any = None
                    ) -> tuple[LLMRequest, dict[str, Any] | None]:
        """The prompt for the state's current phase (demonstrations, context, question, chain, cue), fitted to
        the engine's context when `fit_window` (module docstring), and the fit made (None: the full prompt)."""
        demos = len(list(template.extra.get("demonstrations", []))[: self.num_demos])
        request = self.build_request(template, state, demos, None)
        if not self.fit_window or engine is None or engine.overflow(request) <= 0:
            return request, None
        over = engine.overflow(request)
        for keep in range(demos - 1, -1, -1):
            request = self.build_request(template, state, keep, None)
            if engine.overflow(request) <= 0:
                return request, {"demonstrations": keep, "passages_per_retrieval": None, "over_tokens": over}
        widest = max((len(b) for b in state.batches), default=0)
        for per_search in range(widest - 1, 0, -1):
            request = self.build_request(template, state, 0, per_search)
            if engine.overflow(request) <= 0:
                return request, {"demonstrations": 0, "passages_per_retrieval": per_search, "over_tokens": over}
        return request, {"demonstrations": 0, "passages_per_retrieval": min(widest, 1), "over_tokens": over,
                         "still_over": engine.overflow(request)}

    def build_request(self, template: PromptTemplate, state: _Chain, demos: int, per_search: int | None
                      ) -> LLMRequest:
        """The phase's prompt with the first `demos` demonstrations and each retrieval's top `per_search`."""
        phase = state.phase
        cue = {"next": "", "intermediate": f"{FOLLOW_UP} {state.pending_query}\n{INTERMEDIATE}",
               "final": FINAL}[phase]
        max_tokens = {"next": self.subquery_max_tokens, "intermediate": self.intermediate_max_tokens,
                      "final": self.max_tokens}[phase]
        stop_plain = template.extra.get("stop_plain_steps", {}).get(phase, template.stop_plain)
        stop = template.extra.get("stop_steps", {}).get(phase, ())
        examples = list(template.extra.get("demonstrations", []))[:demos]
        return self.step_request(template, max_tokens, stop=stop, stop_plain=stop_plain, demos=examples,
                                 passages=passage_views(state.kept(per_search)),
                                 question=state.item.question.question, chain=state.chain, cue=cue)

    # -- transitions ------------------------------------------------------------------------------------------
    def after_next(self, state: _Chain, text: str) -> None:
        found = find_marker(text, [FOLLOW_UP, FINAL])
        if found is None:
            state.phase, state.stop_reason = "final", "no_follow_up_or_answer"
            return
        rest = text[found[1]:]
        if found[0] == FINAL:
            answer = clean_output(first_line(rest))
            if answer:
                state.answer, state.phase, state.stop_reason = ParsedAnswer(answer), "done", "final_answer"
            else:
                state.phase, state.stop_reason = "final", "empty_final_answer"
            return
        query = clean_output(first_line(before_marker(rest, INTERMEDIATE, last=False)))
        asked = {norm_query(s["query"]) for s in state.chain} | {norm_query(state.item.question.question)}
        if not query:
            state.phase, state.stop_reason = "final", "empty_follow_up"
        elif norm_query(query) in asked:
            state.phase, state.stop_reason = "final", "repeated_follow_up"
        else:
            state.phase, state.pending_query = "intermediate", query

    def after_intermediate(self, state: _Chain, text: str) -> None:
        answer = clean_output(first_line(before_marker(before_marker(text, FOLLOW_UP, last=False), FINAL,
                                                       last=False)))
        state.chain.append({"iteration": len(state.chain) + 1, "query": state.pending_query,
                            "answer": answer or "Unknown.", "answer_empty": not answer,
                            "passage_ids": state.pending_ids})
        state.pending_query, state.pending_ids = None, []
        if len(state.chain) >= self.max_iterations:
            state.phase, state.stop_reason = "final", "max_iterations"
        else:
            state.phase = "next"

    @staticmethod
    def after_final(state: _Chain, text: str) -> None:
        found = find_marker(text, [FINAL])
        answer = clean_output(first_line(text[found[1]:] if found else text))
        if answer:
            state.answer = ParsedAnswer(answer)
        elif state.chain and not state.chain[-1]["answer_empty"]:
            state.answer = ParsedAnswer(state.chain[-1]["answer"], parse_failed=True,
                                        fallback="last_intermediate_answer")
        else:
            state.answer = ParsedAnswer("", parse_failed=True, fallback="empty_output")
        state.phase = "done"

    @staticmethod
    def retrieve(ctx: GenerationContext, states: list[_Chain]) -> None:
        """All of a round's sub-queries in one call to the run's retrieve function."""
        if ctx.retrieve is None:
            return
        ranked = ctx.retrieve([s.pending_query for s in states])
        for state, passages in zip(states, ranked):
            state.pending_ids = [p.passage.passage_id for p in passages]
            state.add_passages(list(passages))

    # -- the loop ---------------------------------------------------------------------------------------------
    def generate(self, items: list[GenerationInput], ctx: GenerationContext) -> list[GenerationResult]:
        template = self.template("iterdrag")
        states = [_Chain(item, list(item.passages), [list(item.passages)],
                         phase="next" if self.max_iterations > 0 else "final") for item in items]
        round_no = 0
        while active := [s for s in states if s.phase != "done"]:
            round_no += 1
            fitted = [self.request_for(template, s, ctx.engine) for s in active]
            requests = [request for request, _ in fitted]
            outputs = self.run_step(ctx, requests, f"iterdrag round {round_no}")
            to_retrieve = []
            for state, request, (_, fit), completion in zip(active, requests, fitted, outputs):
                phase = state.phase
                state.last_request = request
                state.calls.append({"round": round_no, "phase": phase, **output_record(completion),
                                    **({"fitted": fit} if fit else {})})
                if phase == "next":
                    self.after_next(state, completion.text)
                    if state.phase == "intermediate":
                        to_retrieve.append(state)
                elif phase == "intermediate":
                    self.after_intermediate(state, completion.text)
                else:
                    self.after_final(state, completion.text)
            if to_retrieve:
                self.retrieve(ctx, to_retrieve)

        results = []
        for state in states:
            answer = state.answer or ParsedAnswer("", parse_failed=True, fallback="empty_output")
            steps = {"chain": state.chain, "sub_queries": [s["query"] for s in state.chain],
                     "intermediate_answers": [s["answer"] for s in state.chain],
                     "calls": state.calls, "stop_reason": state.stop_reason, "llm_calls": len(state.calls),
                     "window_fits": sum("fitted" in c for c in state.calls),
                     "retrieval": "run retriever" if ctx.retrieve is not None else "unavailable",
                     "passage_ids": [p.passage.passage_id for p in state.passages]}
            results.append(GenerationResult(
                answer=cut_words(answer.answer, self.max_answer_words),
                final_prompt=ctx.engine.render(state.last_request) if state.last_request else "",
                steps=steps, passages=state.passages, parse_failed=answer.parse_failed, fallback=answer.fallback))
        return results
