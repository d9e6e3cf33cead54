"""The generator (strategy) interface.

A strategy receives the whole question set at once and must batch: every step of a multi-step method is one
`engine.generate` call over all unfinished questions. It returns, per question, the final answer, the final
prompt, and every intermediate output under `steps`, so a reader can see why an answer came out.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rag.llm.base import LLMEngine, LLMRequest, SamplingParams
from rag.prompts import PromptTemplate, load_prompt
from rag.records import GenerationResult, Question, ScoredPassage


@dataclass
class GenerationInput:
    question: Question
    #: the passages in prompt order (after ranking, cutting and ordering)
    passages: list[ScoredPassage]


#: retrieve (and rerank, cut) for new queries with the run's own stages; used by iterative strategies
RetrieveFn = Callable[[list[str]], list[list[ScoredPassage]]]


@dataclass
class GenerationContext:
    engine: LLMEngine | None
    retrieve: RetrieveFn | None = None
    prompt_dir: str | None = None
    #: where strategies keep artefacts made once per model (InstructRAG demonstrations, ...)
    cache_dir: str | None = None
    data_dir: str | None = None
    #: every question the run evaluates (not only this batch): what demonstrations and other prompt material may
    #: never be drawn from (empty: the batch's own questions stand for it)
    evaluated: tuple[Question, ...] = ()


def passage_views(passages: list[ScoredPassage]) -> list[dict[str, Any]]:
    """What prompt templates see of a passage: 1-based label in prompt order, ids and text."""
    return [{"label": i + 1, "text": p.passage.text, "title": p.passage.title, "doc_id": p.passage.doc_id,
             "passage_id": p.passage.passage_id, "rank": p.rank} for i, p in enumerate(passages)]


def cap_context_words(passages: list[ScoredPassage], max_words: int | None) -> list[ScoredPassage]:
    """The best-ranked passages up to `max_words` words in all (GRAG capped its context at 10,000 words): passages
    are taken in rank order, the one that crosses the cap is cut to the words left, the rest are dropped."""
    if not max_words:
        return list(passages)
    out, left = [], int(max_words)
    for item in passages:
        if left <= 0:
            break
        words = item.passage.text.split()
        if len(words) > left:
            item = ScoredPassage(dataclasses.replace(item.passage, text=" ".join(words[:left])), item.score, item.rank)
        out.append(item)
        left -= len(words)
    return out


class Generator(ABC):
    name: str = "generator"
    #: False for retrieval-only runs (`generator=none`): the pipeline then builds no LLM engine
    uses_llm: bool = True

    def __init__(self, max_answer_words: int | None = 200, temperature: float = 0.1, max_tokens: int = 256,
                 prompt_dir: str | None = None):
        self.max_answer_words = max_answer_words
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.prompt_dir = prompt_dir

    def prompt(self, name: str) -> PromptTemplate:
        return load_prompt(name, self.prompt_dir)

    def request(self, template: PromptTemplate, max_tokens: int | None = None,
                json_schema: dict[str, Any] | None = None, **variables: Any) -> LLMRequest:
        params = SamplingParams(temperature=self.temperature, max_tokens=max_tokens or self.max_tokens,
                                json_schema=json_schema)
        return LLMRequest(messages=template.messages(**variables), params=params, stop_plain=template.stop_plain)

    def check_engine(self, engine: LLMEngine) -> None:  # noqa: B027 - optional hook
        """Fail at start-up, in one line, when the engine lacks something the strategy needs (log-probs)."""

    @abstractmethod
    def generate(self, items: list[GenerationInput], ctx: GenerationContext) -> list[GenerationResult]:
        """Answer every item; batch each step across items."""

    @property
    def uses_ordering(self) -> bool:
        """False for strategies that manage their own context (IterDRAG keeps retrieval order)."""
        return True


def empty_fallback_name(generator: Generator) -> str:
    """What an answer's `fallback` says when `generator` answered in place of an empty LLM answer."""
    return f"empty answer: {generator.name}"
