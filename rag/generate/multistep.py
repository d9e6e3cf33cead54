"""Plumbing shared by the multi-step strategies (TrustRAG, InstructRAG, AstuteRAG, IterDRAG).

Each strategy names one prompt file per step (overridable in its YAML under `prompts:`), builds the step's
requests for every unfinished question, and sends them as ONE `engine.generate` batch, so a vLLM or HTTP
engine sees the whole question set at once and the response cache keys stay per request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from rag.generate.base import GenerationContext, Generator
from rag.llm.base import Completion, LLMRequest, SamplingParams
from rag.prompts import PromptTemplate


def norm_query(text: str) -> str:
    """A query's identity for a loop's repeated-search check: case, spacing and closing punctuation do not make a
    new search (IterDRAG's follow-ups, the search loops' queries)."""
    return " ".join(text.lower().split()).rstrip("?.! ")


class MultiStepGenerator(Generator):
    #: step name -> prompt file name (without .yaml)
    default_prompts: ClassVar[dict[str, str]] = {}

    def __init__(self, prompts: Mapping[str, str] | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        unknown = set(prompts or {}) - set(self.default_prompts)
        if unknown:
            raise ValueError(f"{type(self).__name__}: unknown prompt step(s) {sorted(unknown)}; "
                             f"known: {sorted(self.default_prompts)}")
        self.prompt_names = {**self.default_prompts, **dict(prompts or {})}

    def template(self, step: str) -> PromptTemplate:
        return self.prompt(self.prompt_names[step])

    def step_request(self, template: PromptTemplate, max_tokens: int | None = None, stop: Iterable[str] = (),
                     stop_plain: Sequence[str] | None = None, **variables: Any) -> LLMRequest:
        """A request with this step's token limit; `stop` applies to every engine, `stop_plain` (default: the
        prompt file's) only to plain-text rendering of base models."""
        params = SamplingParams(temperature=self.temperature, max_tokens=max_tokens or self.max_tokens,
                                stop=tuple(stop))
        plain = template.stop_plain if stop_plain is None else tuple(stop_plain)
        return LLMRequest(messages=template.messages(**variables), params=params, stop_plain=plain)

    @staticmethod
    def run_step(ctx: GenerationContext, requests: list[LLMRequest], desc: str) -> list[Completion]:
        """One engine call for the whole step (no call at all when nothing is left to do)."""
        return ctx.engine.generate(requests, desc=desc) if requests else []


def output_record(completion: Completion) -> dict[str, Any]:
    """What `steps` keeps of one LLM call: the raw text and why it ended."""
    return {"output": completion.text, "finish_reason": completion.finish_reason}
