"""Search-o1 (Li et al., 2025): a reasoning model searches between special markers; Reason-in-Documents condenses.

The loop follows the authors' `run_search_o1.py` and `prompts.py` (RUC-NLPIR/Search-o1):

- `reason`: the instruction (search markers, the search limit, a two-search example) and the question, then the
  reasoning so far; generation stops at `<|end_search_query|>`, so an output ending in an open
  `<|begin_search_query|> q` is a search for `q`;
- the query is retrieved with the run's stages (every question of the round in one call), then
  `documents` (Reason-in-Documents) condenses the documents against the recent reasoning (first step, last four
  and every search step, as the authors cut it) and the query; its "Final Information" is inserted as
  `<|begin_search_result|> ... <|end_search_result|>` and the reasoning resumes;
- a repeated query, or one past `max_searches`, gets the authors' refusal inside the result markers instead (counted:
  `steps.repeated_queries`, `steps.budget_hits.max_searches`); a second query past the limit forces the answer;
- an output without a search ends the reasoning: the answer is its last `\\boxed{...}`.

A budget (tokens, time, turns, searches) forces `final`: the reasoning so far plus the prompt file's `final_cue`.
No box: the answer after "answer is", else the output's last line (`fallback="whole_output"`).
"""

from __future__ import annotations

import re
from typing import Any

from rag.generate.parsing import ParsedAnswer, after_last, clean_output, first_line
from rag.generate.search_loop import DONE, FINAL, LoopState, SearchLoopGenerator, doc_block
from rag.llm.base import LLMRequest
from rag.records import ScoredPassage

BEGIN_QUERY, END_QUERY = "<|begin_search_query|>", "<|end_search_query|>"
BEGIN_RESULT, END_RESULT = "<|begin_search_result|>", "<|end_search_result|>"
FINAL_INFORMATION = re.compile(r"\**\s*final\s+information\s*\**\s*:?", re.IGNORECASE)


def boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` (nested braces kept), or None."""
    start = (text or "").rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 1, start + len("\\boxed{")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j].strip()
    return text[i:].strip()  # cut off by the token limit: what there is


def search_query(text: str) -> tuple[str, int] | None:
    """The query of the first `<|begin_search_query|>` and where the output is cut after its end marker."""
    start = text.find(BEGIN_QUERY)
    if start < 0:
        return None
    rest = text[start + len(BEGIN_QUERY):]
    end = rest.find(END_QUERY)
    query = (rest if end < 0 else rest[:end]).strip()
    cut = start + len(BEGIN_QUERY) + (len(rest) if end < 0 else end)
    return query, cut


def recent_reasoning(trace: str) -> str:
    """Search-o1's view of the reasoning for Reason-in-Documents: lines as numbered steps, the first, the last four
    and every search step kept, the others shown as "..."."""
    lines = [ln for ln in trace.replace("\n\n", "\n").split("\n") if ln.strip()]
    steps = [f"Step {i + 1}: {ln}" for i, ln in enumerate(lines)]
    if len(steps) <= 5:
        return "\n\n".join(steps)
    kept: list[str] = []
    for i, step in enumerate(steps):
        if i == 0 or i >= len(steps) - 4 or BEGIN_QUERY in step or BEGIN_RESULT in step:
            kept.append(step)
        elif not kept or kept[-1] != "...":
            kept.append("...")
    return "\n\n".join(kept)


def final_information(text: str) -> tuple[str, bool]:
    """The text after the last "**Final Information**" (True), else the whole output (False)."""
    found = list(FINAL_INFORMATION.finditer(text or ""))
    if found:
        return text[found[-1].end():].strip(), True
    return (text or "").strip(), False


class SearchO1Generator(SearchLoopGenerator):
    name = "search_o1"
    default_prompts = {"reason": "search_o1", "documents": "search_o1_documents"}

    def __init__(self, documents_max_tokens: int = 512, **kwargs: Any):
        kwargs.setdefault("step_max_tokens", 1024)
        super().__init__(**kwargs)
        self.documents_max_tokens = documents_max_tokens

    def start(self, item: Any) -> LoopState:
        state = super().start(item)
        state.extra.update({"repeated_queries": 0, "documents_calls": [], "information_unparsed": 0})
        return state

    def request_for(self, state: LoopState) -> LLMRequest:
        if state.phase == "documents":
            template = self.template("documents")
            return self.step_request(template, self.documents_max_tokens, stop=template.extra.get("stop", ()),
                                     previous=recent_reasoning(state.trace), query=state.searches[-1]["query"],
                                     documents=doc_block(state.last_found))
        template = self.template("reason")
        final = state.phase == FINAL
        tokens = self.max_tokens if final else self.step_tokens(state, self.step_max_tokens)
        stop = () if final else (END_QUERY,)
        return self.step_request(template, tokens, stop=stop, question=state.item.question.question,
                                 max_searches=self.max_searches, trace=state.trace,
                                 cue=template.extra.get("final_cue", "") if final else "")

    def _result(self, state: LoopState, text: str) -> None:
        state.trace += f"\n\n{BEGIN_RESULT}{text}{END_RESULT}\n\n"

    def after(self, state: LoopState, phase: str, text: str) -> None:
        if phase == "documents":
            info, parsed = final_information(text)
            state.extra["information_unparsed"] += not parsed
            state.extra["documents_calls"].append({"query": state.searches[-1]["query"], "information": info})
            self._result(state, info or "No helpful information found.")
            state.phase = self.reasoning_phase
            return
        found = search_query(text)
        if found is None or not found[0]:
            state.trace += text
            state.answer = self.read_answer(text, state.trace)
            state.phase, state.stop_reason = DONE, "answered" if found is None else "empty_query"
            return
        query, cut = found
        state.trace += text[:cut] + END_QUERY
        refused = self.may_search(state, query)
        template = self.template("reason")
        if refused == "max_searches":
            if state.budget_hits["max_searches"]:  # told once already: answer now (counted again)
                state.hit("max_searches")
            else:
                state.budget_hits["max_searches"] += 1
                self._result(state, template.extra["limit_message"])
        elif refused == "repeated_query":
            state.extra["repeated_queries"] += 1
            self._result(state, template.extra["repeated_message"])
        else:
            state.pending_query = query

    def after_search(self, state: LoopState, query: str, found: list[ScoredPassage]) -> None:
        if found:
            state.phase = "documents"  # Reason-in-Documents is the next call
        else:
            self._result(state, "No documents were found.")

    @staticmethod
    def read_answer(text: str, trace: str) -> ParsedAnswer:
        answer = boxed(text) or boxed(trace)
        if answer:
            return ParsedAnswer(clean_output(answer))
        after = after_last(text or "", "answer is")
        if after is not None and clean_output(first_line(after.lstrip(" :"))):
            return ParsedAnswer(clean_output(first_line(after.lstrip(" :"))).rstrip("."), parse_failed=True,
                                fallback="answer_is")
        lines = [ln for ln in (text or "").splitlines() if ln.strip()]
        if lines:
            return ParsedAnswer(clean_output(lines[-1]), parse_failed=True, fallback="whole_output")
        return ParsedAnswer("", parse_failed=True, fallback="empty_output")

    def final_answer(self, state: LoopState, text: str) -> ParsedAnswer:
        state.trace += text
        return self.read_answer(text, "")
