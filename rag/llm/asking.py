"""Batched asking with bounded, batched re-asks of only the items whose output failed to parse: the one
re-ask loop of every LLM caller (judges, nuggets, Crucible's metrics, data generation).

Each retry changes the seed (and raises a zero temperature to `retry_temperature`, as castorini/nuggetizer does)
so that neither the response cache nor greedy decoding hands back the same bad output again. Items that still
fail are returned as `None` with their last raw text: the caller records and counts them as parse failures.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from rag.llm.base import LLMEngine, LLMRequest, SamplingParams

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class Asked(Generic[T]):
    """One item's outcome: the parsed value (None = parse failure), its raw text and how many calls it took."""

    value: T | None
    raw: str
    attempts: int
    finish_reason: str = ""


def retry_params(params: SamplingParams, attempt: int, retry_temperature: float) -> SamplingParams:
    """Parameters for re-ask number `attempt` (1, 2, ...): new seed, temperature at least `retry_temperature`."""
    return dataclasses.replace(params, seed=params.seed + 1000 * attempt,
                               temperature=max(params.temperature, retry_temperature))


def ask_with_retries(engine: LLMEngine, requests: Sequence[LLMRequest], parse: Callable[[int, str], T | None],
                     max_retries: int = 2, retry_temperature: float = 0.2,
                     desc: str = "judge") -> list[Asked[T]]:
    """Ask all requests in one batch, then re-ask the failures (one batch per round) at most `max_retries` times.

    `parse(i, text)` returns the parsed value for request i or None when the text is unusable.
    """
    results: list[Asked[T]] = [Asked(None, "", 0) for _ in requests]
    todo = list(range(len(requests)))
    for attempt in range(max_retries + 1):
        if not todo:
            break
        batch = [requests[i] if attempt == 0 else
                 dataclasses.replace(requests[i], params=retry_params(requests[i].params, attempt, retry_temperature))
                 for i in todo]
        completions = engine.generate(batch, desc=desc if attempt == 0 else f"{desc} retry {attempt}")
        failed = []
        for i, completion in zip(todo, completions):
            value = parse(i, completion.text)
            results[i] = Asked(value, completion.text, attempt + 1, completion.finish_reason)
            if value is None:
                failed.append(i)
        if failed and attempt < max_retries:
            log.info("%s: %d of %d outputs unparsable, re-asking", desc, len(failed), len(todo))
        todo = failed
    if todo:
        log.warning("%s: %d outputs still unparsable after %d retries; recorded as parse failures",
                    desc, len(todo), max_retries)
    return results


def make_params(params: dict[str, Any] | None, engine: LLMEngine, schema: dict[str, Any] | None) -> SamplingParams:
    """Judge decoding settings (kept apart from the generator's defaults) plus the schema where supported."""
    values = dict(params or {})
    if "stop" in values:
        values["stop"] = tuple(values["stop"] or ())
    return SamplingParams(**values, json_schema=schema if engine.supports_json_schema else None)


@dataclass
class Chosen:
    """One item's label read from log-probabilities: the most likely label (None when no label was among the
    returned alternatives) and each label's probability, renormalised over the labels found."""

    label: str | None
    probabilities: dict[str, float]
    raw: str = ""
    #: how many alternatives the engine returned at the position read (0: it returned no log-probabilities, as
    #: some proxies and hosted APIs do even when asked)
    alternatives: int = 0


def label_probabilities(alternatives: dict[str, float], labels: Sequence[str]) -> dict[str, float]:
    """Each label's probability mass among a position's alternatives: a token counts for the one label whose
    text starts with it (case and surrounding spaces, quotes and brackets ignored), so "not", "not_" and
    "Not" all count for `not_support`; a token that starts no label, or more than one, counts for none."""
    import math

    mass = dict.fromkeys(labels, 0.0)
    for token, logprob in alternatives.items():
        word = token.strip().strip("\"'`[{(:").lower()
        if not word:
            continue
        owners = [label for label in labels if label.lower().startswith(word)]
        if len(owners) == 1:
            mass[owners[0]] += math.exp(logprob)
    total = sum(mass.values())
    return {label: p / total for label, p in mass.items()} if total > 0 else {}


def ask_choices(engine: LLMEngine, requests: Sequence[LLMRequest], labels: Sequence[str], top_k: int = 20,
                desc: str = "choose", skip_blank: bool = False) -> list[Chosen]:
    """Pick one of `labels` per request from the engine's log-probabilities instead of parsing generated text:
    one batch, one generated token per request, the `top_k` most likely first tokens, each label's mass read with
    `label_probabilities` and the most likely label chosen. No re-ask: greedy scoring of the same prompt gives
    the same distribution, so an item with no label among its alternatives is returned as `label=None` (the
    caller counts it as unreadable). Labels must differ in their first token (support / partial_support /
    not_support do). With `skip_blank`, two tokens are generated and the label is read at the second position
    when the most likely first token is blank (tokenizers such as Gemma's emit the space before a digit as a token
    of its own: after `score:` the first token is " ", the digit comes next)."""
    engine.require_logprobs(desc)
    batch = [dataclasses.replace(r, params=dataclasses.replace(r.params, max_tokens=2 if skip_blank else 1,
                                                               top_logprobs=top_k, json_schema=None, logprobs=False))
             for r in requests]
    out = []
    for completion in engine.generate(batch, desc=desc):
        positions = completion.top_logprobs or [{}]
        first = positions[0]
        if skip_blank and len(positions) > 1 and first and not max(first, key=first.get).strip():
            first = positions[1]
        probabilities = label_probabilities(first, labels)
        best = max(probabilities, key=probabilities.get) if probabilities else None
        out.append(Chosen(best, {k: round(v, 6) for k, v in probabilities.items()}, completion.text, len(first)))
    return out
