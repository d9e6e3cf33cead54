"""The Search-R1 / R1-Searcher protocol: `<search>`, `<information>`, `<answer>` tags.

The loop follows Search-R1's inference (PeterGriffinJin/Search-R1, `infer.py` and
`search_r1/llm_agent/generation.py`):

- `step`: the instruction and the question, then the trajectory so far; generation stops at `</search>` (and
  `</answer>`); the first complete `<search>`/`<answer>` tag of the output is the action (a closing tag cut off by
  the stop is restored);
- `<search> q </search>`: `q` is retrieved with the run's stages (the whole round in one call) and the top
  `docs_per_search` passages come back as `<information>Doc 1(Title: t) text ...</information>`;
- `<answer> a </answer>`: the answer;
- neither: Search-R1's invalid-action reminder is appended and the model tries again (`steps.invalid_actions`).

A budget (searches, tokens, time, `max_turns`, Search-R1's own turn limit) forces `final`: the trajectory plus the
prompt file's `final_cue`; its `<answer>` is the answer, else the whole output (`fallback="whole_output"`).

Released checkpoints (e.g. PeterJinGo/SearchR1-nq_hotpotqa_train-qwen2.5-7b-em-ppo) continue their own assistant
turn: render the Qwen chat markup as plain text with `generator.prompts.step=search_r1_chatml llm.chat_format=plain`
(conf/generator/search_r1.yaml shows the whole override). Any instruction model works with the default prompt,
which carries the trajectory in the user turn.
"""

from __future__ import annotations

import re
from typing import Any

from rag.generate.parsing import ParsedAnswer, clean_output, tag_content
from rag.generate.search_loop import DONE, FINAL, LoopState, SearchLoopGenerator, doc_block, norm_query
from rag.llm.base import LLMRequest
from rag.records import ScoredPassage

_ACTION = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)
_OPENED = re.compile(r"<(search|answer)>(?!.*</\1>)", re.DOTALL)


def action(text: str) -> tuple[str | None, str, str]:
    """(action, content, the output up to the action's closing tag); a tag left open by the stop is closed."""
    restored = text or ""
    opened = list(_OPENED.finditer(restored))
    if opened and not _ACTION.search(restored):
        restored = restored.rstrip() + f"</{opened[-1].group(1)}>"
    match = _ACTION.search(restored)
    if match is None:
        return None, "", restored
    return match.group(1), match.group(2).strip(), restored[: match.end()]


class SearchR1Generator(SearchLoopGenerator):
    name = "search_r1"
    reasoning_phase = "step"
    refuse_repeats = False
    default_prompts = {"step": "search_r1"}

    def __init__(self, **kwargs: Any):
        kwargs.setdefault("step_max_tokens", 512)
        super().__init__(**kwargs)

    def start(self, item: Any) -> LoopState:
        state = super().start(item)
        state.extra["invalid_actions"] = 0
        state.extra["repeated_queries"] = 0
        return state

    def request_for(self, state: LoopState) -> LLMRequest:
        template = self.template("step")
        final = state.phase == FINAL
        tokens = self.max_tokens if final else self.step_tokens(state, self.step_max_tokens)
        stop = template.extra.get("stop", ("</search>", "</answer>"))
        return self.step_request(template, tokens, stop=stop, question=state.item.question.question,
                                 trace=state.trace, cue=template.extra.get("final_cue", "") if final else "")

    def after(self, state: LoopState, phase: str, text: str) -> None:
        kind, content, upto = action(text)
        template = self.template("step")
        if kind == "answer":
            state.trace += upto
            if content:
                state.answer, state.phase, state.stop_reason = ParsedAnswer(clean_output(content)), DONE, "answered"
            else:
                state.phase, state.stop_reason = FINAL, "empty_answer"
            return
        if kind is None or not content:
            state.trace += text + template.extra["invalid_message"]
            state.extra["invalid_actions"] += 1
            return
        state.trace += upto
        if norm_query(content) in state.asked():
            state.extra["repeated_queries"] += 1  # searched again, as Search-R1 does (no rule against repeats)
        if self.may_search(state, content) == "max_searches":
            state.hit("max_searches")
        else:
            state.pending_query = content

    def after_search(self, state: LoopState, query: str, found: list[ScoredPassage]) -> None:
        docs = "".join(f"Doc {d['label']}(Title: {d['title']}) {d['text']}\n" for d in doc_block(found))
        state.trace += f"\n\n<information>{docs.strip()}</information>\n\n"

    def final_answer(self, state: LoopState, text: str) -> ParsedAnswer:
        state.trace += text
        cue = str(self.template("step").extra.get("final_cue", "")).rstrip()
        opened = "<answer>" if cue.endswith("<answer>") else ""  # a cue may open the tag itself (search_r1_chatml)
        content = tag_content(opened + (text or ""), "answer")
        if content:
            return ParsedAnswer(clean_output(content))
        whole = clean_output(re.sub(r"</?(answer|search|think)>", " ", text or ""))
        if whole:
            return ParsedAnswer(whole, parse_failed=True, fallback="whole_output")
        return ParsedAnswer("", parse_failed=True, fallback="empty_output")
