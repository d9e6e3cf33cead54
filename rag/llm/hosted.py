"""Engines that call a remote API once per request (OpenAI-compatible endpoints, Anthropic).

A batch runs as concurrent calls bounded by `concurrency`; the real (uncached) calls are costed from
per-million-token prices into `cost_usd`, which the pipeline reports in metrics.json.

`check_model` asks the endpoint which models it serves (Anthropic's and OpenAI's `GET /v1/models`) and fails in
one line when the configured model is not among them: hosted providers retire model ids, and a retired id would
otherwise fail only at the first request of a run (`python -m rag.llm.check_model`, and `rag.preflight` when
the key is set).
"""

from __future__ import annotations

import difflib
from abc import abstractmethod
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from rag.core.errors import ServiceError
from rag.llm.base import EMPTY_RETRIES, Completion, LLMEngine, LLMRequest


def token_cost_usd(prompt_tokens: int, completion_tokens: int, input_per_mtok: float | None,
                   output_per_mtok: float | None) -> float:
    """Cost of one call from per-million-token prices (a missing price counts as free)."""
    return (prompt_tokens * (input_per_mtok or 0.0) + completion_tokens * (output_per_mtok or 0.0)) / 1e6


class EndpointUnreachableError(ServiceError):
    """No answer from the endpoint at all (connection refused, timeout): the preflight only warns about it, since
    the machine that checks a sweep is not always the one that runs it."""


class ModelNotServedError(ServiceError):
    """The endpoint answered, and the configured model is not among the models it serves."""


@dataclass(frozen=True)
class ServedModels:
    """What an endpoint says it serves."""

    ids: list[str]
    #: the server answers every model name with the one model it has loaded (llama.cpp's `llama-server`), so a
    #: name it does not list is no fault
    any_name: bool = False
    #: id -> what the endpoint says of a model headed for retirement (still served: said, not refused)
    deprecated: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ResolvedModel:
    """A model name the endpoint looked up (an alias, or an id its list leaves out)."""

    id: str
    #: still in the endpoint's catalogue, but requests naming it fail
    retired: bool = False


class ConcurrentAPIEngine(LLMEngine):
    #: an empty reply from a server is a fault (a crashed worker behind a proxy): asked again once
    empty_retries = EMPTY_RETRIES

    def __init__(self, *, concurrency: int = 8, price_input_per_mtok: float | None = None,
                 price_output_per_mtok: float | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.concurrency = max(1, concurrency)
        self.price_input_per_mtok, self.price_output_per_mtok = price_input_per_mtok, price_output_per_mtok
        #: dollars spent on real calls in this process (0 without prices, e.g. a local server)
        self.cost_usd = 0.0
        self._client = None

    @abstractmethod
    def _call(self, request: LLMRequest) -> Completion:
        """One request to the API, with the engine's retries."""

    @property
    @abstractmethod
    def client(self) -> Any:
        """The SDK client, built on first use (raises a clear error when credentials are missing)."""

    def _generate(self, requests: Sequence[LLMRequest], desc: str) -> list[Completion]:
        _ = self.client  # fail on missing credentials before starting threads
        completions: list[Completion | None] = [None] * len(requests)
        error: BaseException | None = None
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            futures = {pool.submit(self._call, r): i for i, r in enumerate(requests)}
            for future in tqdm(as_completed(futures), total=len(requests), unit="req",
                               desc=f"{desc} [{self.model}]", leave=False, disable=len(requests) < 2):
                if future.cancelled():
                    continue
                if future.exception() is not None:
                    if error is None:  # stop starting new calls; keep the answers of calls in flight
                        error = future.exception()
                        for other in futures:
                            other.cancel()
                    continue
                i = futures[future]
                completions[i] = c = future.result()
                self.cost_usd += token_cost_usd(c.prompt_tokens, c.completion_tokens, self.price_input_per_mtok,
                                                self.price_output_per_mtok)
                self._completed(i, c)  # cached as each future completes, in this (the caller's) thread
        if error is not None:
            raise error
        return [c for c in completions if c is not None]

    #: seconds to wait for the model list (a check, not a generation: no reason to wait the request timeout)
    MODEL_CHECK_TIMEOUT_S = 15.0

    def served_models(self) -> ServedModels:
        """Ask the endpoint which models it serves (one listing, no retries). Raises `EndpointUnreachableError`
        when nothing answers, another `ServiceError` when the endpoint refuses (a wrong key)."""
        raise NotImplementedError(f"{type(self).__name__} cannot list the models its endpoint serves")

    def resolve_model(self) -> ResolvedModel | None:
        """What the endpoint resolves the configured name to, for names it does not list (aliases, retired
        models); None where the endpoint has no such lookup or does not know the name."""
        return None

    def where(self) -> str:
        """The endpoint, credentials masked, for messages."""
        return str(getattr(self, "base_url", None) or "the default endpoint")

    def check_model(self, setting: str = "llm.model") -> str:
        """One line saying the configured model is served; raises `ModelNotServedError` in one line naming the
        setting, the endpoint and the closest ids it does serve."""
        served = self.served_models()
        if self.model in served.ids:
            note = served.deprecated.get(self.model)
            return f"{setting}={self.model}: served by {self.where()}" + (f" (deprecated: {note})" if note else "")
        if served.any_name:
            return (f"{setting}={self.model}: {self.where()} answers every model name with the model it has loaded "
                    f"({', '.join(served.ids) or 'unnamed'})")
        resolved = self.resolve_model()
        if resolved and not resolved.retired:
            return f"{setting}={self.model}: served by {self.where()} as {resolved.id}"
        close = difflib.get_close_matches(self.model, served.ids, n=3, cutoff=0.4)
        hint = f"closest: {', '.join(close)}" if close else \
            f"it serves {len(served.ids)} model(s){': ' + ', '.join(served.ids[:5]) if served.ids else ''}"
        what = "is retired at" if resolved else "is not served by"
        raise ModelNotServedError(f"{setting}={self.model} {what} {self.where()} ({hint}); set {setting} to a model "
                                  f"it serves")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
