"""The one retry policy of every remote client (Pinecone, OpenSearch, OpenAI-compatible and Anthropic engines).

Bounded attempts, exponential backoff with jitter (or what the server's `Retry-After` asks, capped), and only
for errors the caller calls transient. `attempts` counts every try, so a retried request is counted as work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

T = TypeVar("T")


class RetryAfterOrBackoff:
    """Wait what the server's `Retry-After` header asks (capped at `maximum`), else exponential backoff."""

    def __init__(self, initial: float, maximum: float):
        self.backoff = wait_exponential_jitter(initial=initial, max=maximum)
        self.maximum = maximum

    def __call__(self, state: RetryCallState) -> float:
        err = state.outcome.exception() if state.outcome else None
        response = getattr(err, "response", None)
        headers = getattr(response, "headers", None)
        header = headers.get("retry-after") if headers is not None else None
        if header is not None:
            try:
                return min(max(0.0, float(header)), self.maximum)
            except ValueError:
                pass
        return self.backoff(state)


def retrying(max_retries: int, is_retryable: Callable[[BaseException], bool], initial_s: float = 1.0,
             max_s: float = 30.0) -> Retrying:
    """A tenacity `Retrying` for `max_retries + 1` attempts of transient errors; the last error is re-raised."""
    return Retrying(stop=stop_after_attempt(max_retries + 1), reraise=True,
                    wait=RetryAfterOrBackoff(initial_s, max_s), retry=retry_if_exception(is_retryable))


class AttemptCounter:
    """An `on_attempt` hook that remembers how many attempts one call made (its error message says so, never
    the configured maximum) and passes each on (`then`, e.g. the engine's work counter)."""

    def __init__(self, then: Callable[[int], None] | None = None):
        self.attempts = 0
        self.then = then

    def __call__(self, attempt: int) -> None:
        self.attempts = attempt
        if self.then is not None:
            self.then(attempt)

    def said(self) -> str:
        """`1 attempt` / `3 attempts`: how many requests were really sent."""
        return f"{self.attempts} attempt{'s' if self.attempts != 1 else ''}"


def call_with_retries(call: Callable[[], T], max_retries: int, is_retryable: Callable[[BaseException], bool],
                      initial_s: float = 1.0, max_s: float = 30.0,
                      on_attempt: Callable[[int], None] | None = None) -> T:
    """Run `call` under the policy; `on_attempt(n)` is told of every attempt (1, 2, ...) for work counters."""
    for attempt in retrying(max_retries, is_retryable, initial_s, max_s):
        with attempt:
            if on_attempt is not None:
                on_attempt(attempt.retry_state.attempt_number)
            return call()
    raise AssertionError("unreachable")  # pragma: no cover
