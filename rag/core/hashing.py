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


#: longest folder name we write (file systems refuse names over 255 bytes; Hydra's `<num>_` prefix comes on top)
MAX_NAME_BYTES = 200


def cap_name(name: str, limit: int = MAX_NAME_BYTES) -> str:
    """`name` when it fits in `limit` bytes; else its start and `~<hash of the whole name>`, still unique."""
    data = name.encode("utf-8")
    if len(data) <= limit:
        return name
    head = data[: limit - 11].decode("utf-8", errors="ignore")
    return f"{head}~{stable_hash(name, 10)}"
