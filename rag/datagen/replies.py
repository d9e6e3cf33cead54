"""Readers for data generation's replies: a (question, answer) pair, a yes/no verdict (built on `rag.core.parsing`).

The re-ask loop that calls them is `rag.llm.asking.ask_with_retries`; each returns None when it cannot read a
value, so the item is asked again and in the end counted as unreadable.
"""

from __future__ import annotations

import re
from typing import Any

from rag.core.parsing import json_objects

#: re-asks of an unreadable reply sample at least this warm (a new seed alone rarely fixes a format slip)
RETRY_TEMPERATURE = 0.7


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
