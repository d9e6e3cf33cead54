"""Response cache keyed by (model, rendered prompt, sampling parameters).

One small JSON file per response under `<root>/<model>/<hh>/<sha256>.json`, written by atomic rename, so
concurrent jobs on a shared filesystem never see a half-written entry and need no database lock.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rag.core.hashing import slug, stable_hash
from rag.core.io import atomic_write_text


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
