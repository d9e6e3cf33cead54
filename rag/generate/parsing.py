"""Reading answers out of free-form model output, shared by the multi-step strategies.

Small models (Gemma 3 270M) often ignore the requested format, echo labels or stop mid-sentence. Every helper
here therefore returns None instead of raising when the format is missing, and `ParsedAnswer` carries the
name of the fallback rule a strategy applied, so the pipeline can count parse failures instead of crashing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: labels a model tends to echo at the start of an answer ("Answer: ...", "Final answer - ...")
_LEADING_LABEL = re.compile(r"^\s*(?:final\s+answer|short\s+answer|answer|response|output)\s*[:\-]\s*",
                            re.IGNORECASE)
_UNKNOWN = re.compile(r"\bi\s+(?:do\s+not|don['’]?t)\s+know\b", re.IGNORECASE)


@dataclass
class ParsedAnswer:
    """An extracted answer; `fallback` names the rule used when the method's format was not found."""

    answer: str
    parse_failed: bool = False
    fallback: str | None = None


def clean_output(text: str | None) -> str:
    """Whitespace-trimmed output without an echoed leading label such as "Answer:"."""
    if not text:
        return ""
    cleaned = text.strip()
    for _ in range(2):  # "Answer: Final answer: x" happens with base models
        cleaned = _LEADING_LABEL.sub("", cleaned, count=1).strip()
    return cleaned


def first_paragraph(text: str) -> str:
    """Text up to the first blank line (a base model often starts a new example after one)."""
    return re.split(r"\n\s*\n", text.strip(), maxsplit=1)[0].strip() if text else ""


def first_line(text: str) -> str:
    """The first non-empty line."""
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def find_marker(text: str, markers: list[str] | tuple[str, ...]) -> tuple[str, int] | None:
    """The earliest of `markers` in `text` (case-insensitive) as (marker, end offset), or None."""
    lowered = text.lower()
    best: tuple[str, int, int] | None = None
    for marker in markers:
        pos = lowered.find(marker.lower())
        if pos >= 0 and (best is None or pos < best[1]):
            best = (marker, pos, pos + len(marker))
    return (best[0], best[2]) if best else None


def after_last(text: str, marker: str) -> str | None:
    """The text after the last occurrence of `marker` (case-insensitive), or None if it is absent."""
    pos = text.lower().rfind(marker.lower())
    return None if pos < 0 else text[pos + len(marker):]


def before_marker(text: str, marker: str, last: bool = True) -> str:
    """The text before the last (or first) occurrence of `marker` (case-insensitive); all of it if absent."""
    lowered, key = text.lower(), marker.lower()
    pos = lowered.rfind(key) if last else lowered.find(key)
    return text if pos < 0 else text[:pos]


def tag_content(text: str, tag: str) -> str | None:
    """Content of the last complete `<tag>...</tag>`; an opened tag whose closing was cut off by a stop
    sequence counts too (the base model's stop list contains the closing tag). None when no tag opens."""
    complete = re.findall(rf"<{tag}>(.*?)</{tag}>", text, flags=re.IGNORECASE | re.DOTALL)
    if complete:
        return complete[-1].strip()
    opened = after_last(text, f"<{tag}>")
    return None if opened is None else opened.strip()


def says_unknown(text: str) -> bool:
    """True when the model declared it does not know ("I don't know")."""
    return bool(_UNKNOWN.search(text or ""))


def extract_answer(text: str, marker: str | None = None, tag: str | None = None,
                   single_line: bool = False) -> ParsedAnswer:
    """Answer after `marker` or inside `<tag>`; fallback rule "whole_output" (the cleaned output) when the
    format is missing, "empty_output" when there is nothing at all."""
    raw = text or ""
    found: str | None = None
    if tag is not None:
        found = tag_content(raw, tag)
    if found is None and marker is not None:
        found = after_last(raw, marker)
    if found is not None:
        found = clean_output(first_line(found) if single_line else first_paragraph(found))
        if found:
            return ParsedAnswer(found)
    whole = clean_output(re.sub(rf"</?{tag}>", " ", raw, flags=re.IGNORECASE) if tag else raw)
    if marker is None and tag is None and whole:
        return ParsedAnswer(whole)
    if whole:
        return ParsedAnswer(whole, parse_failed=True, fallback="whole_output")
    return ParsedAnswer("", parse_failed=True, fallback="empty_output")
