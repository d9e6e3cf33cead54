"""Response cache keyed by (model, rendered prompt, sampling parameters).

One small JSON file per response under `<root>/<model>/<hh>/<sha256>.json`, written by atomic rename, so
concurrent jobs on a shared filesystem never see a half-written entry and need no database lock.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from rag.io import atomic_write_text


def stable_hash(obj: Any, length: int = 64) -> str:
    payload = json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:length]


def slug(text: str) -> str:
    """A filesystem-safe, still readable name for a model or a parameter value."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(text)).strip("_")[:80] or "x"


class ResponseCache:
    def __init__(self, root: str | Path, enabled: bool = True):
        self.root = Path(root)
        self.enabled = enabled

    def _path(self, key: dict[str, Any]) -> Path:
        digest = stable_hash(key)
        return self.root / slug(key.get("model", "model")) / digest[:2] / f"{digest}.json"

    def get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        path = self._path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        # guard against hash collisions and truncated legacy entries
        if entry.get("key") != json.loads(json.dumps(key, default=str)):
            return None
        return entry["completion"]

    def put(self, key: dict[str, Any], completion: dict[str, Any]) -> None:
        if not self.enabled:
            return
        completion = {k: v for k, v in completion.items() if k != "cached"}
        entry = {"key": key, "completion": completion}
        atomic_write_text(self._path(key), json.dumps(entry, ensure_ascii=False, default=str))
