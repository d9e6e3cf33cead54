"""Condensing over-long answers to a word limit with the LLM (GRAG's `condense_answer`), for any strategy.

GRAG (RMIT-ADM+S at LiveRAG 2025, arXiv 2506.14516; rmit-ir/GRAG-LiveRAG `src/services/answer_utils.py`)
answers first and then, only when the answer has more than `words_limit` (300) whitespace words, asks the LLM to
rephrase it more concisely while keeping all its information; if the rewrite is still too long it drops a
handful of stop words. Here:

* only the over-long answers are sent, all of them in ONE `engine.generate` call (`desc="<strategy> condense"`);
* the prompt (`grag_condense.yaml`) names the limit; GRAG's instruction names none (its limit lives in code only);
* an empty rewrite keeps the original answer (`fallback="condense_empty"`);
* still too long: GRAG's stop-word drop (`drop_stop_words`), then the cut to the limit as the last resort, so
  the result always respects the limit (GRAG's own output could still exceed it);
* every answer gets a record (for `steps["condense"]`): words before, whether it was sent, the raw rewrite and
  its finish reason, words after the rewrite, and which last resort applied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rag.core.text import cut_words
from rag.generate.parsing import clean_output
from rag.llm.base import LLMEngine, LLMRequest, SamplingParams
from rag.prompts import PromptTemplate, load_prompt

#: the words GRAG drops from a rewrite that is still over the limit (`answer_utils.stop_words`)
GRAG_STOP_WORDS = frozenset({"the", "a", "an", "and", "or", "but", "is", "are", "was", "were"})


def word_count(text: str) -> int:
    return len(text.split())


@dataclass
class Condensed:
    """One answer after the condense step; `record` goes into the strategy's steps."""

    answer: str
    record: dict[str, Any] = field(default_factory=dict)
    #: set when the rewrite was empty and the original answer was kept (then cut)
    fallback: str | None = None


class Condenser:
    """Rewrites answers longer than `words` words in one batched LLM call, then guarantees the limit.

    `words=None` (or 0) turns the step off: every answer comes back unchanged and nothing is sent.
    """

    def __init__(self, words: int | None = 300, prompt: str = "grag_condense", max_tokens: int = 512,
                 temperature: float = 0.1, drop_stop_words: bool = True, prompt_dir: str | None = None):
        if words is not None and words < 0:
            raise ValueError(f"condense words must be a positive word count or null, got {words}")
        self.words = words or None
        self.prompt_name = prompt
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.drop_stop_words = drop_stop_words
        self.prompt_dir = prompt_dir

    @property
    def template(self) -> PromptTemplate:
        return load_prompt(self.prompt_name, self.prompt_dir)

    def over_limit(self, answer: str) -> bool:
        return self.words is not None and word_count(answer) > self.words

    def request(self, answer: str) -> LLMRequest:
        template = self.template
        params = SamplingParams(temperature=self.temperature, max_tokens=self.max_tokens)
        return LLMRequest(messages=template.messages(answer=answer.strip(), words=self.words), params=params,
                          stop_plain=template.stop_plain)

    def __call__(self, engine: LLMEngine | None, answers: list[str], desc: str = "condense") -> list[Condensed]:
        """Condense `answers` (one batch for the over-long ones; none when no answer is over the limit)."""
        sent = [i for i, a in enumerate(answers) if self.over_limit(a)]
        out = [Condensed(a.strip(), {"words_before": word_count(a), "sent": False}) for a in answers]
        if not sent:
            return out
        if engine is None:
            raise ValueError("the condense step needs an LLM engine (GenerationContext.engine)")
        completions = engine.generate([self.request(answers[i]) for i in sent], desc=desc)
        for i, completion in zip(sent, completions):
            out[i] = self.finish(answers[i], completion.text, completion.finish_reason)
        return out

    def finish(self, original: str, output: str, finish_reason: str | None = None) -> Condensed:
        """The rewrite, then GRAG's stop-word drop and our cut when it is still over the limit."""
        record: dict[str, Any] = {"words_before": word_count(original), "sent": True, "output": output,
                                  "finish_reason": finish_reason}
        text = clean_output(output)
        fallback = None
        if not text:  # a rewrite that says nothing would lose the answer: keep the original
            text, fallback = original.strip(), "condense_empty"
        record["words_condensed"] = word_count(text)
        record["dropped_stop_words"] = False
        if self.drop_stop_words and word_count(text) > self.words:
            text = " ".join(w for w in text.split() if w.lower() not in GRAG_STOP_WORDS)
            record["dropped_stop_words"] = True
        record["cut"] = word_count(text) > self.words
        text = cut_words(text, self.words)
        record["words"] = word_count(text)
        if fallback:
            record["fallback"] = fallback
        return Condensed(text, record, fallback)
