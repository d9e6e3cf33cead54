"""Stable hashes and filesystem-safe names: the keys of every cache (stage files, indexes, LLM responses)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any


def stable_hash(obj: Any, length: int = 64) -> str:
    """sha256 of a JSON rendering with sorted keys: equal for equal content across processes and machines."""
    payload = json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:length]


def slug(text: str) -> str:
    """A filesystem-safe, still readable name for a model or a parameter value."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(text)).strip("_")[:80] or "x"
