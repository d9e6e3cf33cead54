"""Engines that call a remote API once per request (OpenAI-compatible endpoints, Anthropic).

A batch runs as concurrent calls bounded by `concurrency`; the real (uncached) calls are costed from
per-million-token prices into `cost_usd`, which the pipeline reports in metrics.json.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from tqdm.auto import tqdm

from rag.llm.base import EMPTY_RETRIES, Completion, LLMEngine, LLMRequest


def token_cost_usd(prompt_tokens: int, completion_tokens: int, input_per_mtok: float | None,
                   output_per_mtok: float | None) -> float:
    """Cost of one call from per-million-token prices (a missing price counts as free)."""
    return (prompt_tokens * (input_per_mtok or 0.0) + completion_tokens * (output_per_mtok or 0.0)) / 1e6


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

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
