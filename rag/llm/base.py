"""The engine interface every generator, judge and LLM reranker talks to.

An engine takes a whole batch of chat requests and returns completions in the same order. Engines that can
batch (vLLM) or run requests concurrently (HTTP endpoints) do so; the in-process llama.cpp engine works through
the batch itself. Before any backend runs, the response cache answers requests it has seen with the same model
(by content), engine settings, rendered prompt and sampling parameters, so sweeps and reruns pay only for new
work; each answer is stored as soon as it completes.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rag.core.errors import ConfigError
from rag.llm.cache import ResponseCache
from rag.llm.render import PlainTextRenderer

#: bump when the key's meaning changes, so older entries can never answer
CACHE_KEY_VERSION = 2
#: an empty or whitespace-only completion (a crashed server behind a proxy, a model that stops at once) is a
#: failed request: never cached, counted in `Usage`, and re-asked `LLMEngine.empty_retries` times in the same call
#: by engines behind a network (an in-process model answers the same request the same way: no re-ask)
EMPTY_RETRIES = 1


def is_empty(completion: Completion) -> bool:
    """No text and no alternatives: a request asked for its first token's alternatives (`top_logprobs`, how
    labels are read from log-probabilities) has its answer in them, even when the sampled token was a stop."""
    return not (completion.text or "").strip() and not completion.top_logprobs


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
    #: also return, at every generated position, the `top_logprobs` most likely tokens and their
    #: log-probabilities (0: none); `rag.llm.asking.ask_choices` reads a label's probability from them
    top_logprobs: int = 0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        # absent when off, so response-cache keys made before the options existed stay valid
        if not self.logprobs:
            del out["logprobs"]
        if not self.top_logprobs:
            del out["top_logprobs"]
        return out


@dataclass
class LLMRequest:
    """One chat request. `stop_plain` are extra stops used only when the engine renders plain text."""

    messages: list[dict[str, str]]
    params: SamplingParams = field(default_factory=SamplingParams)
    stop_plain: tuple[str, ...] = ()
    #: set by the engine when `fit` cut the prompt to its context (the completion then says `prompt_truncated`)
    truncated: bool = False


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
    #: per generated position, token text -> log-probability of the most likely tokens there, when the request
    #: asked for them (`SamplingParams.top_logprobs`)
    top_logprobs: list[dict[str, float]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Usage:
    """What an engine really did in this process (cache hits are counted apart).

    `retries` counts extra attempts of remote requests (timeouts, rate limits, server errors): a retried
    request was work for the backend, and its seconds are in `seconds` too.
    """

    calls: int = 0
    retries: int = 0
    cache_hits: int = 0
    #: completions that stayed empty (or whitespace) after `EMPTY_RETRIES` re-asks: never cached
    empty_completions: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def metrics(self, prefix: str = "") -> dict[str, Any]:
        """The counters as run metrics (`llm_calls`, ...; the judges' with `prefix` "eval/"), one naming for the
        pipeline and the judges (rag/metrics/registry.py declares them)."""
        return {f"{prefix}llm_calls": self.calls, f"{prefix}llm_retries": self.retries,
                f"{prefix}llm_cache_hits": self.cache_hits, f"{prefix}prompt_tokens": self.prompt_tokens,
                f"{prefix}completion_tokens": self.completion_tokens, f"{prefix}llm_seconds": round(self.seconds, 3)}


class LLMEngine(ABC):
    """Base class: caching, usage accounting and prompt rendering; subclasses implement `_generate`."""

    #: True when the backend returns per-token log-probabilities for `SamplingParams(logprobs=True)`
    supports_logprobs: bool = False
    #: re-asks of an empty completion within one call (remote engines: `EMPTY_RETRIES`)
    empty_retries: int = 0
    #: the config path of this engine's settings, for error messages (`judge.llm` for a judges' engine); set by
    #: `EngineFactory.get`
    setting: str = "llm"

    def __init__(self, model: str, chat_format: str = "auto", cache: ResponseCache | None = None,
                 supports_json_schema: bool = False):
        self.model = model
        #: "plain" renders messages as text with stop sequences (base models); "chat" uses the model's template
        self.chat_format = chat_format
        self.cache = cache
        # sampling settings belong to the caller (generator, judge, reranker config), never to the engine
        self.supports_json_schema = supports_json_schema
        self.usage = Usage()
        self._plain = PlainTextRenderer()
        self._identity: dict[str, Any] | None = None
        self._usage_lock = threading.Lock()

    @classmethod
    def gpu_memory_share(cls, node: Mapping[str, Any]) -> float | None:
        """The share of one GPU's memory an engine of this config holds while loaded (None: no GPU memory; a CPU,
        remote or served engine). The preflight adds up the engines a run holds at once (rag.preflight.cluster)."""
        return None

    # -- public API -------------------------------------------------------------------------------------------
    def generate(self, requests: Sequence[LLMRequest], desc: str = "generate") -> list[Completion]:
        """Complete every request; cached answers are free, the rest go to the backend as one batch.

        Empty completions are never cached: remote engines ask them again (`empty_retries`), and those still
        empty come back as they are, with `finish_reason="empty"`, counted in `usage.empty_completions`.
        """
        results = self._generate_cached(requests, desc)
        for _ in range(self.empty_retries):
            empty = [i for i, c in enumerate(results) if is_empty(c)]
            if not empty:
                break
            for i, completion in zip(empty, self._generate_cached([requests[i] for i in empty], desc)):
                results[i] = completion
        for completion in results:
            if is_empty(completion):
                completion.finish_reason = "empty"
                self.usage.empty_completions += 1
        return results

    def _generate_cached(self, requests: Sequence[LLMRequest], desc: str) -> list[Completion]:
        prepared = [self._prepare(r) for r in requests]
        results: list[Completion | None] = [None] * len(prepared)
        todo: list[int] = []
        for i, req in enumerate(prepared):
            hit = self.cache.get(self._cache_key(req)) if self.cache else None
            # an empty entry (older versions) never answers; one with a label's alternatives is not empty
            if hit is not None and ((hit.get("text") or "").strip() or hit.get("top_logprobs")):
                results[i] = Completion(**{**hit, "cached": True})
                self.usage.cache_hits += 1
            else:
                todo.append(i)
        if todo:
            batch = [prepared[i] for i in todo]
            recorded: set[int] = set()

            def completed(j: int, completion: Completion) -> None:
                # store each answer as soon as it exists, so a killed batch keeps its finished entries
                if j in recorded:
                    return
                recorded.add(j)
                if batch[j].truncated:
                    completion.finish_reason = "prompt_truncated"
                self.usage.calls += 1
                self.usage.prompt_tokens += completion.prompt_tokens
                self.usage.completion_tokens += completion.completion_tokens
                results[todo[j]] = completion
                if self.cache and not is_empty(completion):
                    self.cache.put(self._cache_key(batch[j]), completion.to_dict())

            start = time.perf_counter()
            self._on_completed = completed
            try:
                fresh = self._generate(batch, desc=desc)
            finally:
                self._on_completed = None
                self.usage.seconds += time.perf_counter() - start
            if len(fresh) != len(todo):
                raise RuntimeError(f"{type(self).__name__} returned {len(fresh)} completions for {len(todo)}")
            for j, completion in enumerate(fresh):
                completed(j, completion)  # engines that only return whole batches (vLLM) are stored here
        return [r for r in results if r is not None]

    def count_attempt(self, attempt: int) -> None:
        """`on_attempt` hook for `rag.core.retry.call_with_retries`: every attempt after the first is work."""
        if attempt > 1:
            with self._usage_lock:
                self.usage.retries += 1

    def render(self, request: LLMRequest) -> str:
        """The prompt text as the model sees it (stored as `final_prompt`): after `fit`, so a cut prompt is
        stored as it was sent."""
        request = self.fit(request)[0]
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
    _on_completed: Callable[[int, Completion], None] | None = None
    _identity: dict[str, Any] | None = None

    def _completed(self, index: int, completion: Completion) -> None:
        """Backends call this as each request of a batch finishes (`index` into the batch): cached at once."""
        if self._on_completed is not None:
            self._on_completed(index, completion)

    @abstractmethod
    def _generate(self, requests: Sequence[LLMRequest], desc: str) -> list[Completion]:
        """Run the backend on uncached requests, in order."""

    def fit(self, request: LLMRequest) -> tuple[LLMRequest, bool]:
        """The request as it will be sent, and whether it was cut to the engine's context. The default sends
        every request as it is; engines that know their context size (an OpenAI-compatible server) cut here."""
        return request, False

    def overflow(self, request: LLMRequest) -> int:
        """Tokens by which the request (with its `max_tokens`) exceeds the engine's context: what `fit` would cut.
        0 when it fits or the engine does not know its context. A strategy that can shorten its own prompt by its
        method's means (IterDRAG: fewer demonstrations, fewer passages per search) asks this before `fit` cuts."""
        return 0

    def _render_chat(self, messages: list[dict[str, str]]) -> str:
        """Fallback rendering for the cache key and logs when the backend applies its own template."""
        return "\n".join(f"<|{m['role']}|>\n{m['content']}" for m in messages)

    # -- internals --------------------------------------------------------------------------------------------
    def _prepare(self, request: LLMRequest) -> LLMRequest:
        params = request.params
        if self.uses_plain_text() and request.stop_plain:
            params = SamplingParams(**{**params.to_dict(),
                                       "stop": tuple(dict.fromkeys(params.stop + request.stop_plain))})
        fitted, cut = self.fit(request)
        return LLMRequest(messages=fitted.messages, params=params, stop_plain=request.stop_plain,
                          truncated=cut)

    def signature(self) -> dict[str, Any]:
        """Engine settings beyond the request that change outputs (they join the cache key)."""
        return {}

    def model_identity(self) -> dict[str, Any]:
        """Names the model by content where it is local (see `rag.llm.cache.model_identity`), else by name."""
        return {"name": self.model}

    def identity(self) -> dict[str, Any]:
        """What names this engine's answers apart from the request: the model's name, the model by content
        (`model_identity`) and the engine settings that change outputs (`signature`: backend and version, context,
        truncation, template, sampler). The response cache keys on it, and so does every cache of output derived
        from the model's answers (`rag.llm.cache.OutputCache`: nugget sets, UMBRELA grades, InstructRAG's
        rationales), so llama.cpp and vLLM engines of one GGUF under one name never share an entry."""
        if self._identity is None:
            self._identity = self.model_identity()
        out = {"model": self.model, "model_id": self._identity}
        signature = self.signature()
        if signature:
            out["engine"] = signature
        return out

    def _cache_key(self, request: LLMRequest) -> dict[str, Any]:
        """Everything that changes an answer: the engine's `identity` (model by content, engine settings), the
        rendered prompt and every sampling parameter (stops and JSON schema included)."""
        prompt = self.render(request)  # first: rendering may settle the engine's template (chat_format=auto)
        return {"v": CACHE_KEY_VERSION, **self.identity(), "prompt": prompt, "params": request.params.to_dict()}


def engine_metrics(engine: LLMEngine | None) -> dict[str, Any]:
    """A run's generation usage as metrics: the counters (`Usage.metrics`), empty completions, the token rate
    and the money of a hosted engine; zeros without an engine (generator=none)."""
    usage = engine.usage if engine is not None else Usage()
    m = {**usage.metrics(), "llm_empty_completions": usage.empty_completions}
    if usage.seconds > 0:
        m["llm_tokens_per_s"] = round((usage.prompt_tokens + usage.completion_tokens) / usage.seconds, 2)
    if engine is not None and hasattr(engine, "cost_usd"):
        m["llm_cost_usd"] = round(engine.cost_usd, 6)
    return m
