"""Batched engine calls with re-asks of only the unparsable outputs, and tolerant parsing of JSON replies.

Every step of the generator is one `engine.generate` call over all pending items. Outputs that cannot be read
are asked again, in one batch per round, with a new seed (and at least `retry_temperature`), so that neither
greedy decoding nor the response cache hands back the same bad text; what still fails is returned as `None`
for the caller to count and skip.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from rag.llm.base import LLMEngine, LLMRequest

T = TypeVar("T")
_DECODER = json.JSONDecoder(strict=False)
_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'"})


@dataclass
class Asked(Generic[T]):
    value: T | None
    raw: str
    attempts: int


def ask(engine: LLMEngine, requests: Sequence[LLMRequest], parse: Callable[[str], T | None], retries: int,
        retry_temperature: float = 0.7, desc: str = "datagen") -> list[Asked[T]]:
    """Ask all requests in one batch, then re-ask the unparsable ones (one batch per round) `retries` times."""
    results: list[Asked[T]] = [Asked(None, "", 0) for _ in requests]
    todo = list(range(len(requests)))
    for attempt in range(retries + 1):
        if not todo:
            break
        batch = [requests[i] if attempt == 0 else dataclasses.replace(
            requests[i], params=dataclasses.replace(
                requests[i].params, seed=requests[i].params.seed + 7919 * attempt,
                temperature=max(requests[i].params.temperature, retry_temperature)))
            for i in todo]
        completions = engine.generate(batch, desc=desc if attempt == 0 else f"{desc} retry {attempt}")
        failed = []
        for i, completion in zip(todo, completions):
            value = parse(completion.text)
            results[i] = Asked(value, completion.text, attempt + 1)
            if value is None:
                failed.append(i)
        todo = failed
    return results


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object in `text`, in order (prose, code fences and curly quotes around them are tolerated)."""
    text = (text or "").translate(_QUOTES)
    out, pos = [], text.find("{")
    while pos != -1:
        try:
            value, _ = _DECODER.raw_decode(text, pos)
            if isinstance(value, dict):
                out.append(value)
        except json.JSONDecodeError:
            pass
        pos = text.find("{", pos + 1)
    return out


def _clean(value: Any) -> str:
    return " ".join(str(value).split()) if isinstance(value, (str, int, float)) else ""


def parse_pair(text: str) -> tuple[str, str] | None:
    """(question, answer) from a JSON object, or from `Question: ... Answer: ...` lines; None if either is empty."""
    for obj in json_objects(text):
        lowered = {str(k).strip().lower(): v for k, v in obj.items()}
        question, answer = _clean(lowered.get("question", "")), _clean(lowered.get("answer", ""))
        if question and answer:
            return question, answer
    m = re.search(r"question\s*[:=]\s*(.+?)\s*(?:\n|\s)answer\s*[:=]\s*(.+)", text or "", flags=re.I | re.S)
    if m:
        question, answer = _clean(m.group(1)), _clean(m.group(2))
        if question and answer:
            return question, answer
    return None


def parse_yes_no(text: str, key: str = "answerable") -> bool | None:
    """True/False from `{"<key>": "yes"|"no"}` (or a bare yes/no reply); None when neither can be read."""
    for obj in json_objects(text):
        lowered = {str(k).strip().lower(): v for k, v in obj.items()}
        value = lowered.get(key)
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower().strip(".!\"'") in ("yes", "no"):
            return value.strip().lower().startswith("y")
    m = re.match(r"\s*[\"'*]*(yes|no)\b", text or "", flags=re.I)
    return None if m is None else m.group(1).lower() == "yes"
