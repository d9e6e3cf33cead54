"""The engine interface every generator, judge and LLM reranker talks to.

An engine takes a whole batch of chat requests and returns completions in the same order. Engines that can
batch (vLLM) or run requests concurrently (HTTP endpoints) do so; the in-process llama.cpp engine works through
the batch itself. Before any backend runs, the response cache answers requests it has seen with the same model,
rendered prompt and sampling parameters, so sweeps and reruns pay only for new work.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rag.core.errors import ConfigError
from rag.llm.cache import ResponseCache
from rag.llm.render import PlainTextRenderer


@dataclass(frozen=True)
class SamplingParams:
    """Decoding settings. Default temperature 0.1 follows RAGtifier's Falcon3-10B runs."""

    temperature: float = 0.1
    top_p: float = 1.0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    seed: int = 0
    #: JSON schema to constrain the output to (judges); engines without support fall back to free text.
    json_schema: dict[str, Any] | None = None
    #: ask for the log-probability of every generated token (Crucible's extraction confidence)
    logprobs: bool = False

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.logprobs:  # absent when off, so response-cache keys made before the option stay valid
            del out["logprobs"]
        return out


@dataclass
class LLMRequest:
    """One chat request. `stop_plain` are extra stops used only when the engine renders plain text."""

    messages: list[dict[str, str]]
    params: SamplingParams = field(default_factory=SamplingParams)
    stop_plain: tuple[str, ...] = ()


@dataclass
class Completion:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"
    cached: bool = False
    #: the exact prompt the model saw (rendered chat template or plain text)
    prompt: str = ""
    #: log-probability of each generated token, when the request asked for them (`SamplingParams.logprobs`)
    token_logprobs: list[float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Usage:
    """What an engine really did in this process (cache hits are counted apart)."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class LLMEngine(ABC):
    """Base class: caching, usage accounting and prompt rendering; subclasses implement `_generate`."""

    #: True when the backend returns per-token log-probabilities for `SamplingParams(logprobs=True)`
    supports_logprobs: bool = False

    def __init__(self, model: str, chat_format: str = "auto", cache: ResponseCache | None = None,
                 default_params: dict[str, Any] | None = None, supports_json_schema: bool = False):
        self.model = model
        #: "plain" renders messages as text with stop sequences (base models); "chat" uses the model's template
        self.chat_format = chat_format
        self.cache = cache
        self.default_params = SamplingParams(**{k: (tuple(v) if k == "stop" else v)
                                                for k, v in (default_params or {}).items()})
        self.supports_json_schema = supports_json_schema
        self.usage = Usage()
        self._plain = PlainTextRenderer()

    # -- public API -------------------------------------------------------------------------------------------
    def generate(self, requests: Sequence[LLMRequest], desc: str = "generate") -> list[Completion]:
        """Complete every request; cached answers are free, the rest go to the backend as one batch."""
        prepared = [self._prepare(r) for r in requests]
        results: list[Completion | None] = [None] * len(prepared)
        todo: list[int] = []
        for i, req in enumerate(prepared):
            hit = self.cache.get(self._cache_key(req)) if self.cache else None
            if hit is not None:
                results[i] = Completion(**{**hit, "cached": True})
                self.usage.cache_hits += 1
            else:
                todo.append(i)
        if todo:
            start = time.perf_counter()
            fresh = self._generate([prepared[i] for i in todo], desc=desc)
            self.usage.seconds += time.perf_counter() - start
            if len(fresh) != len(todo):
                raise RuntimeError(f"{type(self).__name__} returned {len(fresh)} completions for {len(todo)}")
            for i, completion in zip(todo, fresh):
                self.usage.calls += 1
                self.usage.prompt_tokens += completion.prompt_tokens
                self.usage.completion_tokens += completion.completion_tokens
                results[i] = completion
                if self.cache:
                    self.cache.put(self._cache_key(prepared[i]), completion.to_dict())
        return [r for r in results if r is not None]

    def render(self, request: LLMRequest) -> str:
        """The prompt text as the model sees it (stored as `final_prompt`)."""
        if self.uses_plain_text():
            return self._plain.render(request.messages)
        return self._render_chat(request.messages)

    def uses_plain_text(self) -> bool:
        return self.chat_format == "plain"

    def require_logprobs(self, who: str) -> None:
        """Fail at start-up, in one line, when a component needs log-probabilities this engine cannot give."""
        if not self.supports_logprobs:
            raise ConfigError(f"{who} needs token log-probabilities, which engine {type(self).__name__} "
                             f"({self.model}) does not return; use llama.cpp, vLLM or an OpenAI-compatible engine")

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release model memory or connections."""

    # -- for subclasses ---------------------------------------------------------------------------------------
    @abstractmethod
    def _generate(self, requests: Sequence[LLMRequest], desc: str) -> list[Completion]:
        """Run the backend on uncached requests, in order."""

    def _render_chat(self, messages: list[dict[str, str]]) -> str:
        """Fallback rendering for the cache key and logs when the backend applies its own template."""
        return "\n".join(f"<|{m['role']}|>\n{m['content']}" for m in messages)

    # -- internals --------------------------------------------------------------------------------------------
    def _prepare(self, request: LLMRequest) -> LLMRequest:
        params = request.params
        if self.uses_plain_text() and request.stop_plain:
            params = SamplingParams(**{**params.to_dict(),
                                       "stop": tuple(dict.fromkeys(params.stop + request.stop_plain))})
        return LLMRequest(messages=request.messages, params=params, stop_plain=request.stop_plain)

    def signature(self) -> dict[str, Any]:
        """Engine settings beyond the request that change outputs (they join the cache key)."""
        return {}

    def _cache_key(self, request: LLMRequest) -> dict[str, Any]:
        key = {"model": self.model, "prompt": self.render(request), "params": request.params.to_dict()}
        if self.signature():
            key["engine"] = self.signature()
        return key
