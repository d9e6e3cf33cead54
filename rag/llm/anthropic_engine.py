"""Anthropic Messages API engine (Claude Haiku, RAGtifier's second judge; LiveRAG judged with Claude).

Our chat messages map onto the Messages API as the API requires: system turns go to the top-level `system`
field, the user/assistant turns to `messages`. A batch runs as concurrent requests (thread pool bounded by
`concurrency`, to stay under the account's rate limit); rate limits (429), overload (529), timeouts, connection
and server errors are retried with exponential backoff (or the server's `Retry-After`) up to `max_retries`
times, the SDK's own retries being off so that the bound is ours. The key comes only from the environment
variable named by `api_key_env`; it is never stored on the engine, so it cannot reach a repr, a log or a config.

`cost_usd` sums the cost of real (uncached) calls from per-million-token prices (defaults: Claude Haiku 4.5's
list prices, $1 input / $5 output; set them in the config for other models). RAGtifier used Claude 3.5 Haiku
(`claude-3-5-haiku-20241022`), which Anthropic has retired: `check_model` (`python -m rag.llm.check_model`,
and the preflight when the key is set) asks `GET /v1/models` whether the configured id is still served.
"""

from __future__ import annotations

import inspect
import logging
import os
from typing import Any

from rag.core.errors import ServiceError
from rag.core.retry import AttemptCounter, call_with_retries
from rag.llm.base import Completion, LLMRequest
from rag.llm.cache import ResponseCache
from rag.llm.hosted import ConcurrentAPIEngine, EndpointUnreachableError, ResolvedModel, ServedModels

log = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}


class AnthropicEngineError(ServiceError):
    """An Anthropic API failure explained in one line (missing key, refused key, exhausted retries)."""


def is_retryable(err: BaseException) -> bool:
    import anthropic

    if isinstance(err, (anthropic.RateLimitError, anthropic.APIConnectionError, anthropic.InternalServerError)):
        return True
    return isinstance(err, anthropic.APIStatusError) and (err.status_code in RETRYABLE_STATUS
                                                          or err.status_code >= 500)


class AnthropicEngine(ConcurrentAPIEngine):
    def __init__(self, model: str = "claude-haiku-4-5-20251001", api_key_env: str = "ANTHROPIC_API_KEY",
                 base_url: str | None = None, concurrency: int = 4, timeout_s: float = 120.0, max_retries: int = 6,
                 backoff_initial_s: float = 2.0, backoff_max_s: float = 60.0,
                 price_input_per_mtok: float | None = 1.0, price_output_per_mtok: float | None = 5.0,
                 cache: ResponseCache | None = None):
        super().__init__(model=model, chat_format="chat", cache=cache,
                         supports_json_schema=False, concurrency=concurrency,
                         price_input_per_mtok=price_input_per_mtok, price_output_per_mtok=price_output_per_mtok)
        self.api_key_env = api_key_env
        self.base_url = base_url or None
        self.timeout_s, self.max_retries = timeout_s, max_retries
        self.backoff_initial_s, self.backoff_max_s = backoff_initial_s, backoff_max_s

    @staticmethod
    def required_env(node: dict) -> list[str]:
        """Environment variables a run needs (checked by `rag.preflight` before any cell is launched)."""
        return [node.get("api_key_env") or "ANTHROPIC_API_KEY"]

    def __repr__(self) -> str:
        return f"AnthropicEngine(model={self.model!r}, base_url={self.base_url!r}, concurrency={self.concurrency})"

    @property
    def client(self):
        if self._client is None:
            key = os.environ.get(self.api_key_env, "").strip()
            if not key:
                raise AnthropicEngineError(f"llm=anthropic: environment variable {self.api_key_env} is not set; "
                                           f"export your Anthropic API key there (never in a config)")
            try:
                from anthropic import Anthropic
            except ImportError:
                raise AnthropicEngineError("llm=anthropic needs the SDK: pip install anthropic "
                                           "(or the project's `services` extra)") from None
            kwargs: dict[str, Any] = {"api_key": key, "timeout": self.timeout_s, "max_retries": 0}
            if self.base_url:
                kwargs["base_url"] = self.base_url
            self._client = Anthropic(**kwargs)
        return self._client

    def where(self) -> str:
        return self.base_url or "api.anthropic.com"

    def _check_failed(self, err: BaseException) -> ServiceError:
        """A failed model listing as one line: unreachable, or refused (a wrong key says which variable)."""
        import anthropic

        if isinstance(err, (anthropic.APIConnectionError, anthropic.APITimeoutError)):
            return EndpointUnreachableError(f"llm=anthropic: cannot reach {self.where()} to list its models "
                                            f"({type(err).__name__})")
        status = getattr(err, "status_code", None)
        if status in (401, 403):
            return AnthropicEngineError(f"llm=anthropic: {self.where()} refused the key in {self.api_key_env} "
                                        f"(HTTP {status})")
        message = " ".join(str(getattr(err, "message", err)).split())[:300]
        return AnthropicEngineError(f"llm=anthropic: listing the models of {self.where()} failed (HTTP {status}): "
                                    f"{message}")

    def served_models(self) -> ServedModels:
        """`GET /v1/models`, every page (active and deprecated models; retired ones are not listed)."""
        import anthropic

        client = self.client.with_options(timeout=self.MODEL_CHECK_TIMEOUT_S)
        try:
            models = list(client.models.list(limit=1000))  # iterating follows `has_more` / `last_id`
        except anthropic.APIError as err:
            raise self._check_failed(err) from None
        deprecated = {m.id: f"retires {m.retires_at:%Y-%m-%d}" if getattr(m, "retires_at", None) else "no date yet"
                      for m in models if getattr(m, "lifecycle", None) == "deprecated"}
        return ServedModels(ids=[m.id for m in models], deprecated=deprecated)

    def resolve_model(self) -> ResolvedModel | None:
        """`GET /v1/models/{name}` resolves an alias (`claude-haiku-4-5`) to the id the list shows; a retired
        model is still found there, marked retired."""
        import anthropic

        client = self.client.with_options(timeout=self.MODEL_CHECK_TIMEOUT_S)
        try:
            info = client.models.retrieve(self.model)
        except anthropic.NotFoundError:
            return None
        except anthropic.APIError as err:
            raise self._check_failed(err) from None
        return ResolvedModel(id=info.id, retired=getattr(info, "lifecycle", None) == "retired")

    def usage_report(self) -> dict[str, Any]:
        """Tokens, calls and dollars of this process, for run summaries."""
        return {**self.usage.to_dict(), "cost_usd": self.cost_usd}

    def build_payload(self, request: LLMRequest) -> dict[str, Any]:
        """The exact JSON body sent to POST /v1/messages (tested as the contract)."""
        p = request.params
        system = "\n\n".join(m["content"] for m in request.messages if m["role"] == "system")
        turns = [{"role": m["role"], "content": m["content"]} for m in request.messages if m["role"] != "system"]
        body: dict[str, Any] = {"model": self.model, "max_tokens": p.max_tokens, "messages": turns,
                                "temperature": p.temperature}
        if system:
            body["system"] = system
        if p.top_p < 1.0:  # Anthropic advises setting temperature or top_p, not both
            body["top_p"] = p.top_p
        if p.stop:
            body["stop_sequences"] = list(p.stop)
        return body

    def _create_kwargs(self, create: Any, body: dict[str, Any]) -> dict[str, Any]:
        """Split the body into the SDK's keyword arguments and `extra_body` for fields this SDK release does not
        name (SDK 2.x dropped `temperature`/`top_p` from its signature; the API still takes them), so the wire
        body is the same whatever the SDK version."""
        try:
            names = set(inspect.signature(create).parameters)
        except (TypeError, ValueError):
            names = set(body)
        kwargs = {k: v for k, v in body.items() if k in names}
        extra = {k: v for k, v in body.items() if k not in names}
        if extra:
            kwargs["extra_body"] = extra
        return kwargs

    def _explain(self, err: BaseException, attempts: str = "") -> str:
        """One line: what failed, after how many requests really sent (`attempts`)."""
        status = getattr(err, "status_code", None)
        where = self.base_url or "api.anthropic.com"
        after = f" after {attempts}" if attempts else ""
        if status in (401, 403):
            return f"llm=anthropic: {where} refused the key in {self.api_key_env} (HTTP {status})"
        if isinstance(status, int):
            message = " ".join(str(getattr(err, "message", err)).split())[:300]
            return f"llm=anthropic: {self.model} request failed with HTTP {status}{after}: {message}"
        return f"llm=anthropic: cannot reach {where}{after} ({type(err).__name__})"

    def _call(self, request: LLMRequest) -> Completion:
        body = self.build_payload(request)
        client = self.client
        kwargs = self._create_kwargs(client.messages.create, body)
        sent = AttemptCounter(then=self.count_attempt)
        try:
            resp = call_with_retries(lambda: client.messages.create(**kwargs), self.max_retries, is_retryable,
                                     self.backoff_initial_s, self.backoff_max_s, on_attempt=sent)
        except Exception as err:
            import anthropic

            if isinstance(err, anthropic.APIError):
                raise AnthropicEngineError(self._explain(err, sent.said())) from None
            raise
        text = "".join(getattr(block, "text", "") for block in resp.content if block.type == "text")
        usage = resp.usage
        return Completion(text=text.strip(), prompt_tokens=usage.input_tokens or 0,
                          completion_tokens=usage.output_tokens or 0,
                          finish_reason=_FINISH.get(resp.stop_reason or "", resp.stop_reason or "stop"),
                          prompt=self._render_chat(request.messages))

