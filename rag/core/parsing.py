"""Tolerant parsing of LLM replies (judges, nuggets, data generation), for engines or models that ignore a schema.

Structured decoding makes a well-formed object the normal case, but free-text engines and small models still
wrap JSON in prose, code fences or curly quotes, write `correctness: 2` (or `correctness score: 2`) instead of
JSON, or return Python-style lists. Every parser here returns `None` when it cannot find a valid value, so the
caller can re-ask and, in the end, count a parse failure instead of guessing a score. Integer scales take
integers only: `1.5` or `0.9` is a parse failure, never truncated to 1 or 0 (`2.0` is the integer 2).
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2033": '"', "\u2018": "'", "\u2019": "'"})
_DECODER = json.JSONDecoder(strict=False)


def normalise_quotes(text: str) -> str:
    """Curly quotes (as in the paper's Figure 2) are a frequent reason a model's JSON fails to load."""
    return text.translate(_QUOTES)


def _values_from(text: str, opener: str) -> list[Any]:
    """Every JSON value that starts at an `opener` character, in order of position."""
    out = []
    pos = text.find(opener)
    while pos != -1:
        try:
            value, _end = _DECODER.raw_decode(text, pos)
            out.append(value)
        except json.JSONDecodeError:
            pass
        pos = text.find(opener, pos + 1)
    return out


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object in `text`, in order (prose, code fences and curly quotes around them are tolerated)."""
    return [v for v in _values_from(normalise_quotes(text or ""), "{") if isinstance(v, dict)]


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text` (code fences and surrounding prose are ignored)."""
    text = normalise_quotes(text or "")
    for value in _values_from(text, "{"):
        if isinstance(value, dict):
            return value
    return None


def _lower_keys(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k).strip().strip("'\"").lower(): v for k, v in obj.items()}


def _coerce(value: Any, allowed: Sequence[Any]) -> Any | None:
    """Map a parsed value onto an allowed one: "2" -> 2, 2.0 -> 2, "Better" -> "better"."""
    if isinstance(value, bool):
        return None
    if all(isinstance(a, int) for a in allowed):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        elif isinstance(value, str):
            m = re.fullmatch(r"\s*([+-]?\d+)(?:\.0+)?\s*", value)  # "2", "2.0"; never "1.5"
            value = int(m.group(1)) if m else None
        return value if isinstance(value, int) and value in allowed else None
    if isinstance(value, str):
        norm = value.strip().strip(".*'\"").lower().replace(" ", "_").replace("-", "_")
        for a in allowed:
            if norm == str(a).lower():
                return a
    return None


def parse_fields(text: str, fields: Mapping[str, Sequence[Any]],
                 free_text: Sequence[str] = ()) -> dict[str, Any] | None:
    """Read every field of `fields` (name -> allowed values) from a judge output, or return None.

    Order of attempts: the first JSON object; then `name: value` patterns (e.g. "correctness: 2",
    "**Verdict**: tie"). `free_text` fields (explanations) are copied when present and never required.
    """
    text = text or ""
    out: dict[str, Any] = {}
    obj = extract_json_object(text)
    if obj is not None:
        lowered = _lower_keys(obj)
        for name, allowed in fields.items():
            if name in lowered:
                value = _coerce(lowered[name], allowed)
                if value is not None:
                    out[name] = value
        for name in free_text:
            if isinstance(lowered.get(name), str):
                out[name] = lowered[name]
    plain = normalise_quotes(text)
    for name, allowed in fields.items():
        if name in out:
            continue
        # "correctness: 2", "**Correctness score**: 2", "correctness = 2"
        label = rf"{re.escape(name)}(?:[\s_-]*score)?[\"'*\s]*[:=][\"'*\s]*"
        if all(isinstance(a, int) for a in allowed):
            # the whole number as written (1.5 stays 1.5 and is refused), not its integer prefix
            pattern = label + r"([+-]?\d+(?:\.\d+)?)(?![\d.]*\d)"
        else:
            alts = "|".join(sorted((re.escape(str(a)) for a in allowed), key=len, reverse=True))
            pattern = label + rf"({alts})\b"
        m = re.search(pattern, plain, flags=re.IGNORECASE)
        if m:
            value = _coerce(m.group(1), allowed)
            if value is not None:
                out[name] = value
    if any(name not in out for name in fields):
        return None
    return out


def parse_string_list(text: str, key: str = "nuggets") -> list[str] | None:
    """A list of strings: `{"nuggets": [...]}`, a JSON list, or a Python-literal list (nuggetizer's format)."""
    text = normalise_quotes(text or "")
    obj = extract_json_object(text)
    candidates: list[Any] = []
    if obj is not None:
        lowered = _lower_keys(obj)
        if key in lowered:
            candidates.append(lowered[key])
    candidates.extend(_values_from(text, "["))
    cleaned = text.replace("```python", "").replace("```json", "").replace("```", "")
    start, end = cleaned.find("["), cleaned.rfind("]")
    if start != -1 and end > start:
        with contextlib.suppress(ValueError, SyntaxError, MemoryError, RecursionError):
            candidates.append(ast.literal_eval(cleaned[start:end + 1]))
    for cand in candidates:
        if isinstance(cand, list) and all(isinstance(x, str) for x in cand):
            return [x.strip() for x in cand if x.strip()]
    return None


def parse_label_list(text: str, n: int, allowed: Sequence[str], key: str = "labels",
                     aliases: Mapping[str, str] | None = None) -> list[str] | None:
    """Exactly `n` labels from `allowed` (extra labels beyond n are dropped; fewer is a failure).

    nuggetizer zips labels with nuggets and so silently drops nuggets when the model returns too few labels;
    we treat that as a parse failure instead, so it is re-asked and, in the end, counted.
    """
    aliases = dict(aliases or {})

    def norm(label: Any) -> str | None:
        if not isinstance(label, str):
            return None
        s = label.strip().strip(".*'\"").lower().replace("-", "_").replace(" ", "_")
        s = aliases.get(s, s)
        return s if s in allowed else None

    text = normalise_quotes(text or "")
    raw: list[Any] | None = None
    obj = extract_json_object(text)
    if obj is not None and isinstance(_lower_keys(obj).get(key), list):
        raw = _lower_keys(obj)[key]
    if raw is None:
        raw = parse_string_list(text, key=key)
    if raw is None:
        # bare labels separated by commas or new lines
        vocab = sorted(set(allowed) | set(aliases), key=len, reverse=True)
        pattern = "|".join(re.escape(v).replace("_", "[ _-]") for v in vocab)
        raw = re.findall(rf"\b({pattern})\b", text, flags=re.IGNORECASE)
    labels = [norm(x) for x in raw]
    if len(labels) < n or any(label is None for label in labels[:n]):
        return None
    return [label for label in labels[:n] if label is not None]
