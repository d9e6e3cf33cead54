"""Any OpenAI-compatible HTTP endpoint: vLLM serve, llama.cpp server, hosted services.

A batch is sent as concurrent requests (bounded by `concurrency`) with bounded retries and backoff on rate
limits, connection errors and server errors. The API key is read from the environment variable named in the
config, never from the config itself, so it never reaches a config dump or a log. Hosted endpoints that bill by
token can be given per-million-token prices; `cost_usd` then sums the cost of the real (uncached) calls.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from rag.core.errors import ConfigError, ServiceError
from rag.core.retry import AttemptCounter, call_with_retries
from rag.core.secrets import mask_text, mask_url
from rag.llm.base import Completion, LLMRequest
from rag.llm.cache import ResponseCache
from rag.llm.hosted import ConcurrentAPIEngine, EndpointUnreachableError, ServedModels

log = logging.getLogger(__name__)

#: where the token limit goes (`llm.limit_param`): OpenAI's reasoning models (o-series, gpt-5) refuse
#: `max_tokens` and take `max_completion_tokens`, which also bounds their hidden reasoning tokens
LIMIT_PARAMS = ("max_tokens", "max_completion_tokens")
#: request fields a model may refuse (`llm.refused_params`; reasoning models: temperature, top_p, and on o3 /
#: o4-mini stop, logprobs): left out of its requests, chosen by config, never guessed from the model's name
REFUSABLE_PARAMS = ("temperature", "top_p", "seed", "stop", "logprobs", "top_logprobs")


def check_request_shape(limit_param: str, refused_params: Sequence[str], chat_format: str) -> None:
    """One line naming the setting when the configured request shape cannot be sent."""
    if limit_param not in LIMIT_PARAMS:
        raise ConfigError(f"llm.limit_param={limit_param!r}: must be one of {', '.join(LIMIT_PARAMS)}")
    unknown = [p for p in refused_params if p not in REFUSABLE_PARAMS]
    if unknown:
        raise ConfigError(f"llm.refused_params: {', '.join(map(str, unknown))} cannot be left out (these can: "
                          f"{', '.join(REFUSABLE_PARAMS)})")
    if limit_param == "max_completion_tokens" and chat_format != "chat":
        raise ConfigError("llm.limit_param=max_completion_tokens is a chat-completions field; /v1/completions "
                          f"(llm.chat_format={chat_format}) takes max_tokens")


class UnreadableAnswer(Exception):
    """An HTTP 200 whose body is no completion: not JSON (a proxy's or a login page, a body cut short), or JSON
    without `choices`. Retried (a gateway's page while the server restarts goes away); `shown` is the start of
    what came back, on one line."""

    def __init__(self, what: str, body: Any):
        text = body if isinstance(body, str) else json.dumps(body, default=str)[:400]
        self.what, self.shown = what, " ".join(mask_text(text).split())[:SHOWN_BYTES]
        super().__init__(f"{what}: {self.shown!r}")


#: how much of an unreadable answer a message shows
SHOWN_BYTES = 120


def _readable(resp: Any) -> Any:
    """`resp` when it is a completion with choices, else `UnreadableAnswer` (the SDK returns a body that is not
    JSON as a plain string when its content type is not JSON)."""
    if isinstance(resp, (str, bytes)):
        raise UnreadableAnswer("the body is not JSON", resp.decode("utf-8", "replace") if isinstance(resp, bytes)
                               else resp)
    if not getattr(resp, "choices", None):
        dump = resp.model_dump(exclude_unset=True) if hasattr(resp, "model_dump") else resp
        raise UnreadableAnswer("the JSON holds no choices", dump)
    return resp


def _retryable(err: BaseException) -> bool:
    import openai

    if isinstance(err, UnreadableAnswer):
        return True
    if isinstance(err, (openai.RateLimitError, openai.APIConnectionError, openai.APITimeoutError,
                        openai.InternalServerError)):
        return True
    return isinstance(err, openai.APIStatusError) and err.status_code in (408, 409, 429) or (
        isinstance(err, openai.APIStatusError) and err.status_code >= 500)


#: what stands where the middle of an over-long prompt was cut
CUT_MARK = b" [...] "


def _served_by_llamacpp(body: Any) -> bool:
    data = body.get("data") if isinstance(body, dict) else None
    return any(isinstance(e, dict) and e.get("owned_by") == "llamacpp" for e in data or [])


def _props_n_ctx(body: Any) -> int | None:
    """llama.cpp server `/props`: `default_generation_settings.n_ctx` (or `n_ctx` at the top in some builds)."""
    if not isinstance(body, dict):
        return None
    settings = body.get("default_generation_settings") or {}
    value = settings.get("n_ctx") if isinstance(settings, dict) else None
    return value or body.get("n_ctx")


def response_logprobs(choice: Any) -> list[float]:
    """Token log-probabilities of one choice: chat responses carry `logprobs.content[i].logprob`, completions
    responses `logprobs.token_logprobs` (both shapes of the OpenAI API, which vLLM and llama.cpp servers use)."""
    logprobs = getattr(choice, "logprobs", None)
    if logprobs is None:
        return []
    content = getattr(logprobs, "content", None)
    if content is not None:
        return [float(t.logprob) for t in content if getattr(t, "logprob", None) is not None]
    values = getattr(logprobs, "token_logprobs", None)
    if values is None and isinstance(logprobs, dict):
        values = logprobs.get("token_logprobs")
    return [float(v) for v in values or [] if v is not None]


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def response_top_logprobs(choice: Any) -> list[dict[str, float]]:
    """The most likely tokens at each generated position: chat responses carry `logprobs.content[i].top_logprobs`
    (a list of `{token, logprob}`), completions responses `logprobs.top_logprobs` (a list of token -> logprob)."""
    logprobs = _field(choice, "logprobs")
    if logprobs is None:
        return []
    content = _field(logprobs, "content")
    if content is not None:
        return [{str(_field(alt, "token")): float(_field(alt, "logprob")) for alt in _field(t, "top_logprobs") or []}
                for t in content]
    return [{str(k): float(v) for k, v in (position or {}).items()} for position in _field(logprobs, "top_logprobs") or []]


class OpenAICompatibleEngine(ConcurrentAPIEngine):
    supports_logprobs = True
    def __init__(self, model: str, base_url: str, api_key_env: str | None = "OPENAI_API_KEY",
                 chat_format: str = "chat", json_mode: str = "json_schema", concurrency: int = 8,
                 timeout_s: float = 120.0, max_retries: int = 4, cache: ResponseCache | None = None,
                 extra_body: dict[str, Any] | None = None,
                 price_input_per_mtok: float | None = None, price_output_per_mtok: float | None = None,
                 n_ctx: int | None = None, limit_param: str = "max_tokens",
                 refused_params: Sequence[str] | None = None, reasoning_floor_tokens: int | None = None):
        """`reasoning_floor_tokens`: a reasoning model spends hidden tokens out of the completion limit; the
        preflight names every caller whose limit is below this floor (rag.preflight.cluster)."""
        check_request_shape(limit_param, list(refused_params or ()), chat_format)
        if reasoning_floor_tokens is not None and reasoning_floor_tokens < 1:
            raise ConfigError(f"llm.reasoning_floor_tokens={reasoning_floor_tokens}: a positive number of tokens, "
                              f"or null")
        self.reasoning_floor_tokens = reasoning_floor_tokens
        #: the body field of the token limit, and the fields this model refuses (see LIMIT_PARAMS)
        self.limit_param, self.refused_params = limit_param, tuple(refused_params or ())
        self._said_dropped = False
        super().__init__(model=model, chat_format=chat_format, cache=cache,
                         supports_json_schema=json_mode != "none", concurrency=concurrency,
                         price_input_per_mtok=price_input_per_mtok, price_output_per_mtok=price_output_per_mtok)
        self.base_url = base_url
        self.api_key_env = api_key_env
        #: "json_schema" (OpenAI, vLLM), "json_object" (llama.cpp server chat: schema inside json_object),
        #: "gbnf" (llama.cpp server, any endpoint: the schema compiled to a GBNF grammar), "none"
        self.json_mode = json_mode
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.extra_body = dict(extra_body or {})
        self._endpoint_ok = False
        if n_ctx is not None and n_ctx < 1:
            raise ValueError(f"llm.n_ctx={n_ctx}: must be at least 1 (or null to ask the server)")
        #: the model's context in tokens: configured, else asked of the server once (`context_size`)
        self.n_ctx = n_ctx
        self._asked_context = n_ctx is not None

    #: a conservative bytes-per-token ratio for fitting prompts without the server's tokenizer: English text is
    #: about 4 bytes per token in the tokenizers of the models we serve, so 3 leaves room
    BYTES_PER_TOKEN = 3
    #: tokens kept free beside the prompt and `max_tokens` (chat template, special tokens)
    CONTEXT_MARGIN = 32

    def context_size(self) -> int | None:
        """`llm.n_ctx`, else what the server says, once: vLLM's `/v1/models` (`max_model_len` of the model), or
        for a llama.cpp server (its `/v1/models` entries are `owned_by: llamacpp`) `/props`
        (`default_generation_settings.n_ctx`); None when neither says. The `/models` answer also proves the
        endpoint is there (`check_endpoint` is then not repeated)."""
        if self._asked_context:
            return self.n_ctx
        import httpx

        base = self.base_url.rstrip("/")
        key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        try:
            response = httpx.get(base + "/models", headers=headers, timeout=self.ENDPOINT_CHECK_TIMEOUT_S)
        except httpx.HTTPError:
            return None  # unreachable: the first request's endpoint check says so in one line
        self._asked_context = self._endpoint_ok = True
        try:
            body = response.json()
        except ValueError:
            body = {}
        found = self._max_model_len(body)
        if not found and _served_by_llamacpp(body):
            root = base[:-3] if base.endswith("/v1") else base
            try:
                found = _props_n_ctx(httpx.get(root + "/props", headers=headers,
                                               timeout=self.ENDPOINT_CHECK_TIMEOUT_S).json())
            except (httpx.HTTPError, ValueError):
                found = None
        if found:
            self.n_ctx = int(found)
            log.info("llm endpoint %s: context of %d tokens", mask_url(self.base_url), self.n_ctx)
        else:
            log.warning("llm endpoint %s did not say its context size: prompts are sent uncut (set llm.n_ctx to "
                        "fit them)", mask_url(self.base_url))
        return self.n_ctx

    def _max_model_len(self, body: Any) -> int | None:
        for entry in (body or {}).get("data", []) if isinstance(body, dict) else []:
            if isinstance(entry, dict) and entry.get("id") == self.model and entry.get("max_model_len"):
                return int(entry["max_model_len"])
        return None

    def overflow(self, request: LLMRequest) -> int:
        """Tokens over the context, estimated as `fit` estimates them (BYTES_PER_TOKEN bytes per token)."""
        n_ctx = self.context_size()
        if not n_ctx:
            return 0
        rendered = self._plain.render(request.messages) if self.uses_plain_text() else \
            self._render_chat(request.messages)
        budget = n_ctx - request.params.max_tokens - self.CONTEXT_MARGIN
        return max(0, -(-(len(rendered.encode("utf-8")) - budget * self.BYTES_PER_TOKEN) // self.BYTES_PER_TOKEN))

    def fit(self, request: LLMRequest) -> tuple[LLMRequest, bool]:
        """Cut the middle of the longest message (the passages, in RAG prompts) so the prompt fits the context:
        the head quarter (instructions) and the tail (the question) survive, as the in-process engine cuts."""
        n_ctx = self.context_size()
        if not n_ctx:
            return request, False
        budget = n_ctx - request.params.max_tokens - self.CONTEXT_MARGIN
        if budget < 1:
            raise ConfigError(f"max_tokens={request.params.max_tokens} leaves no room for a prompt in the "
                              f"{n_ctx}-token context of {self.model} (llm.n_ctx or the server's)")
        rendered = self._plain.render(request.messages) if self.uses_plain_text() else \
            self._render_chat(request.messages)
        excess = len(rendered.encode("utf-8")) - budget * self.BYTES_PER_TOKEN
        if excess <= 0:
            return request, False
        longest = max(range(len(request.messages)), key=lambda i: len(request.messages[i]["content"]))
        text = request.messages[longest]["content"].encode("utf-8")
        keep = len(text) - excess - len(CUT_MARK)
        if keep < 1:
            raise ConfigError(f"a prompt of {len(rendered.encode('utf-8')):,} bytes cannot be cut to the "
                              f"{n_ctx}-token context of {self.model}: its other messages alone are too long")
        head = keep // 4
        cut = (text[:head] + CUT_MARK + text[len(text) - (keep - head):]).decode("utf-8", errors="ignore")
        messages = [dict(m) for m in request.messages]
        messages[longest]["content"] = cut
        log.warning("prompt of about %d tokens cut to fit the %d-token context of %s",
                    len(rendered.encode("utf-8")) // self.BYTES_PER_TOKEN, n_ctx, self.model)
        return LLMRequest(messages=messages, params=request.params, stop_plain=request.stop_plain), True

    #: waits before each attempt of the endpoint check (3 s in all, plus up to 2 s per attempt)
    ENDPOINT_CHECK_DELAYS = (0.0, 1.0, 2.0)
    ENDPOINT_CHECK_TIMEOUT_S = 2.0

    @staticmethod
    def required_env(node: dict) -> list[str]:
        """The key variable, for endpoints that are not on this machine (local servers accept any key)."""
        host = urlsplit(str(node.get("base_url") or "")).hostname or ""
        local = host in ("localhost", "127.0.0.1", "::1", "0.0.0.0")
        return [node["api_key_env"]] if node.get("api_key_env") and not local else []

    def check_endpoint(self) -> None:
        """One GET of `<base_url>/models`, retried briefly: an unreachable endpoint fails in seconds with one
        line naming it, instead of after the per-request retries of the first batch. Any HTTP answer (even
        401 or 404) proves the server is there; the requests themselves report what it refuses."""
        import httpx

        url = self.base_url.rstrip("/") + "/models"
        key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        reason = ""
        for delay in self.ENDPOINT_CHECK_DELAYS:
            time.sleep(delay)
            try:
                httpx.get(url, headers=headers, timeout=self.ENDPOINT_CHECK_TIMEOUT_S)
                self._endpoint_ok = True
                return
            except httpx.HTTPError as err:
                reason = f"{type(err).__name__}: {err}".splitlines()[0]
        raise ServiceError(f"{self.setting}: the OpenAI-compatible endpoint {mask_url(self.base_url)} cannot be "
                           f"reached ({reason}; {len(self.ENDPOINT_CHECK_DELAYS)} attempts); start the server or "
                           f"correct {self.setting}.base_url")

    def where(self) -> str:
        return mask_url(self.base_url)

    def served_models(self) -> ServedModels:
        """`GET <base_url>/models` through the SDK, once (`data[].id`). llama.cpp's servers answer a name they do
        not list with their (default) model: `llama-server` with one model loaded (`owned_by: llamacpp`), and
        llama-cpp-python's server (`owned_by: me`, which falls back to its default `--model_alias`)."""
        import openai

        client = self.client.with_options(timeout=self.MODEL_CHECK_TIMEOUT_S, max_retries=0)
        try:
            models = list(client.models.list())
        except (openai.APIConnectionError, openai.APITimeoutError) as err:
            raise EndpointUnreachableError(f"llm endpoint {self.where()} cannot be reached to list its models "
                                           f"({type(err).__name__}); start the server or correct {self.setting}.base_url") from None
        except openai.APIStatusError as err:
            refused = f"refused the key in {self.api_key_env}" if err.status_code in (401, 403) else "failed"
            message = " ".join(str(getattr(err, "message", "") or err).split())[:200]
            raise ServiceError(f"llm endpoint {self.where()}: listing its models {refused} (HTTP {err.status_code}): "
                               f"{message}") from None
        owners = [getattr(m, "owned_by", None) for m in models]
        any_name = owners == ["llamacpp"] or (bool(owners) and set(owners) == {"me"})
        return ServedModels(ids=[m.id for m in models], any_name=any_name)

    def _generate(self, requests: Sequence[LLMRequest], desc: str) -> list[Completion]:
        if not self._endpoint_ok:
            self.check_endpoint()
        return super()._generate(requests, desc)

    def signature(self) -> dict[str, Any]:
        """The endpoint decides which model answers (a local server may serve any file under any name)."""
        out = {"base_url": self.base_url, "json_mode": self.json_mode, "extra_body": self.extra_body,
               "rendering": self.chat_format}
        if self.limit_param != "max_tokens" or self.refused_params:  # absent at the defaults: old keys stay valid
            out["request_shape"] = {"limit_param": self.limit_param, "refused": sorted(self.refused_params)}
        return out

    @property
    def client(self):
        if self._client is None:
            from openai import OpenAI

            key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
            # local servers accept any key; the client refuses an empty one
            self._client = OpenAI(base_url=self.base_url, api_key=key or "not-needed",
                                  timeout=self.timeout_s, max_retries=0)
        return self._client

    def build_payload(self, request: LLMRequest) -> dict[str, Any]:
        """The exact JSON body sent to the endpoint (tested as the contract)."""
        p = request.params
        body: dict[str, Any] = {"model": self.model, "temperature": p.temperature, "top_p": p.top_p,
                                "max_tokens": p.max_tokens, "seed": p.seed}
        if p.stop:
            body["stop"] = list(p.stop)
        if self.uses_plain_text():
            body["prompt"] = self._plain.render(request.messages)
            if p.logprobs or p.top_logprobs:  # /v1/completions: the number of top alternatives per position
                body["logprobs"] = max(1, p.top_logprobs)
        else:
            body["messages"] = request.messages
            if p.logprobs or p.top_logprobs:
                body["logprobs"] = True
            if p.top_logprobs:
                body["top_logprobs"] = p.top_logprobs
        if p.json_schema is not None and self.json_mode == "json_schema":
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "response", "schema": p.json_schema}}
        elif p.json_schema is not None and self.json_mode == "json_object":
            body["response_format"] = {"type": "json_object", "schema": p.json_schema}
        elif p.json_schema is not None and self.json_mode == "gbnf":
            from llama_cpp.llama_grammar import json_schema_to_gbnf

            body["grammar"] = json_schema_to_gbnf(json.dumps(p.json_schema))
        return self.shaped_for_model(body)

    def shaped_for_model(self, body: dict[str, Any]) -> dict[str, Any]:
        """The body as this model takes it (`llm.limit_param`, `llm.refused_params`): refused sampling fields are
        left out (the model samples its own way); log-probabilities a caller needs are an error, never dropped."""
        needed = [k for k in ("logprobs", "top_logprobs") if k in self.refused_params and body.get(k)]
        if needed:
            raise ConfigError(f"llm.refused_params lists {', '.join(needed)}: {self.model} returns no "
                              f"log-probabilities, and this caller needs them (use an engine that returns them)")
        if self.limit_param != "max_tokens":
            body[self.limit_param] = body.pop("max_tokens")
        dropped = [k for k in self.refused_params if body.pop(k, None) is not None]
        if dropped and not self._said_dropped:
            self._said_dropped = True
            log.info("llm %s: %s not sent (llm.refused_params); token limit sent as %s", self.model,
                     ", ".join(dropped), self.limit_param)
        return body

    def retryable(self, err: BaseException) -> bool:
        """Whether a failed request is sent again (rate limits, timeouts, connection and server errors); a
        subclass that knows its server is gone (rag.llm.served) says no at once."""
        return _retryable(err)

    def service_error(self, err: BaseException, attempts: str = "") -> BaseException:
        """A failed request as one line naming the endpoint (credentials masked), the model, how many requests
        were sent (`attempts`, e.g. `1 attempt`) and the setting to change, under this engine's config path
        (`judge.llm.base_url` for the judges' engine); errors that are not the API's own come back unchanged."""
        import openai

        where = f"{self.setting} endpoint {mask_url(self.base_url)} (model {self.model})"
        after = f" after {attempts}" if attempts else ""
        s = self.setting
        if isinstance(err, UnreadableAnswer):
            return ServiceError(f"{where}: HTTP 200{after}, but {err.what} (a proxy's page, or {s}.base_url not "
                                f"the API's /v1 root?); it began: {err.shown!r}")
        if isinstance(err, openai.APITimeoutError):
            return ServiceError(f"{where}: no answer within {s}.timeout_s={self.timeout_s:g} s{after}; raise "
                                f"{s}.timeout_s, lower {s}.concurrency, or check the server")
        if isinstance(err, openai.APIConnectionError):
            return ServiceError(f"{where}: connection failed{after} ({err}); is the server still running? "
                                f"({s}.base_url)")
        if isinstance(err, openai.APIStatusError):
            message = " ".join(str(getattr(err, "message", "") or err).split())[:300]
            if err.status_code in (401, 403):
                key = f"the key in ${self.api_key_env}" if self.api_key_env else "no key"
                return ServiceError(f"{where}: HTTP {err.status_code}{after}: the endpoint refused {key} "
                                    f"({s}.api_key_env names the variable): {message}")
            return ServiceError(f"{where}: HTTP {err.status_code}{after}: {message}")
        return err

    def _call(self, request: LLMRequest) -> Completion:
        body = self.build_payload(request)
        # fields the SDK does not type (grammar, response_format on /completions) travel in extra_body
        untyped = ("response_format", "grammar") if "prompt" in body else ("grammar",)
        kwargs = {k: v for k, v in body.items() if k not in untyped}
        extra = {**self.extra_body, **{k: body[k] for k in untyped if k in body}}

        def once():
            try:
                if "prompt" in body:
                    resp = _readable(self.client.completions.create(**kwargs, extra_body=extra or None))
                    return resp, resp.choices[0].text
                resp = _readable(self.client.chat.completions.create(**kwargs, extra_body=extra or None))
                return resp, resp.choices[0].message.content or ""
            except json.JSONDecodeError as err:  # a JSON content type over a body that is none (a proxy's page)
                raise UnreadableAnswer("the body is not JSON", err.doc) from None

        sent = AttemptCounter(then=self.count_attempt)
        try:
            resp, text = call_with_retries(once, self.max_retries, self.retryable, 1.0, 30.0, on_attempt=sent)
        except Exception as err:
            raise self.service_error(err, sent.said()) from None
        usage = resp.usage
        return Completion(text=text.strip(), prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                          completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
                          finish_reason=resp.choices[0].finish_reason or "stop",
                          prompt=body.get("prompt") or self._render_chat(request.messages),
                          token_logprobs=response_logprobs(resp.choices[0]) if request.params.logprobs else None,
                          top_logprobs=response_top_logprobs(resp.choices[0]) if request.params.top_logprobs
                          else None)

