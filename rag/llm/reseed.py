"""An engine whose every request is sampled again: seed moved, temperature optionally replaced.

Repeated draws of the same requests (`judge.repeats` for judges' noise, `generation.repeats` for generation's
consistency) go through the engine itself, so calls and cache hits are counted where they always are; the response
cache keys on the seed, so each repeat is its own cache entry and a rerun draws nothing again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from rag.llm.base import Completion, LLMEngine, LLMRequest

#: seed distance between repeats (re-asks move the seed by 1000 per attempt: `rag.llm.asking.retry_params`)
REPEAT_SEED_STRIDE = 1_000_000


class ReseededEngine:
    """An engine as repeat `repeat` sees it: every request's seed moved by `repeat * REPEAT_SEED_STRIDE`
    and its temperature replaced by `temperature` (when set). Everything else is the engine itself (cache, usage,
    capabilities), so calls and cache hits are counted where they always are."""

    def __init__(self, engine: LLMEngine, repeat: int, temperature: float | None = None):
        self._engine, self.repeat, self.temperature = engine, repeat, temperature

    def params(self, request: LLMRequest) -> LLMRequest:
        changes: dict[str, Any] = {"seed": request.params.seed + self.repeat * REPEAT_SEED_STRIDE}
        if self.temperature is not None:
            changes["temperature"] = float(self.temperature)
        return dataclasses.replace(request, params=dataclasses.replace(request.params, **changes))

    def generate(self, requests: Sequence[LLMRequest], desc: str = "generate") -> list[Completion]:
        return self._engine.generate([self.params(r) for r in requests], desc=f"{desc} (repeat {self.repeat})")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)
