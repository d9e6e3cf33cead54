"""Response cache keyed by everything that changes an answer, and the model identities that key it.

One small JSON file per response under `<root>/<model>/<hh>/<sha256>.json`, written by atomic rename, so
concurrent jobs on a shared filesystem never see a half-written entry and need no database lock. The key
(built by `LLMEngine._cache_key`) names the model by content, not by name: a GGUF file by the SHA-256 of its
bytes, a Hugging Face model folder by its config, tokenizer/chat-template files and weights index. Hashing a
file is paid once per (path, size, mtime): the result is memoised under `<root>/_model_ids/`.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Protocol

from rag.core.hashing import slug, stable_hash
from rag.core.io import atomic_write_text
from rag.core.secrets import redact


class Identified(Protocol):
    """An engine as `OutputCache` sees it (`rag.llm.base.LLMEngine`): its display name and its identity."""

    model: str

    def identity(self) -> dict[str, Any]: ...

#: files of a model folder that decide its outputs besides the weights (configs, tokenizer, chat template)
FOLDER_FILES = ("config.json", "generation_config.json", "tokenizer_config.json", "tokenizer.json",
                "special_tokens_map.json", "chat_template.jinja", "chat_template.json", "tokenizer.model",
                "preprocessor_config.json")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")
_MEMO: dict[tuple[str, int, int], str] = {}


def file_sha256(path: str | Path, memo_dir: str | Path | None = None) -> str:
    """SHA-256 of a file's bytes, memoised by (absolute path, size, mtime) in this process and on disk."""
    path = Path(path).resolve()
    st = path.stat()
    memo_key = (str(path), st.st_size, st.st_mtime_ns)
    if memo_key in _MEMO:
        return _MEMO[memo_key]
    memo_file = Path(memo_dir) / f"{stable_hash(list(memo_key), 32)}.sha256" if memo_dir else None
    if memo_file is not None and memo_file.is_file():
        digest = memo_file.read_text().strip()
    else:
        h = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                h.update(block)
        digest = h.hexdigest()
        if memo_file is not None:
            atomic_write_text(memo_file, digest + "\n")
    _MEMO[memo_key] = digest
    return digest


def stored_key(key: dict[str, Any]) -> Any:
    """The key as an entry stores it: JSON types, secret-looking values masked (`+llm.extra_body.api_key=...`
    joins the key through the engine's settings, and must never sit in the cache in plain text)."""
    return redact(json.loads(json.dumps(key, default=str)))


def _head_sha256(path: Path, size: int = 1 << 20) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read(size)).hexdigest()


def model_identity(path: str | Path, memo_dir: str | Path | None = None) -> dict[str, Any]:
    """What names a local model by content.

    A file (GGUF): its SHA-256. A folder: the SHA-256 of its config, tokenizer and chat-template files and of its
    weights index (`*.index.json`); weights without an index are named by file name, size and the hash of their
    first MiB (a safetensors header lists every tensor's shape and offsets), so a 20 GB checkpoint is not read.
    """
    path = Path(path).expanduser()
    if path.is_file():
        return {"file": path.name, "sha256": file_sha256(path, memo_dir)}
    if not path.is_dir():
        raise FileNotFoundError(f"model path {path} does not exist")
    parts: dict[str, str] = {}
    for name in FOLDER_FILES:
        if (path / name).is_file():
            parts[name] = file_sha256(path / name, memo_dir)
    indexes = sorted(path.glob("*.index.json"))
    for index in indexes:
        parts[index.name] = file_sha256(index, memo_dir)
    if not indexes:
        for weights in sorted(p for p in path.iterdir() if p.suffix in WEIGHT_SUFFIXES):
            parts[weights.name] = f"{weights.stat().st_size}:{_head_sha256(weights)}"
    if not parts:
        raise FileNotFoundError(f"model folder {path} has no config, tokenizer or weights files to identify it")
    return {"folder": path.name, "sha256": stable_hash(parts)}


def local_model_identity(name_or_path: str, memo_dir: str | Path | None = None) -> dict[str, Any]:
    """A local path is named by content; a hub name (or an API model) only by its name."""
    expanded = os.path.expanduser(name_or_path)
    if os.path.exists(expanded):
        return model_identity(expanded, memo_dir)
    return {"name": name_or_path}


class ResponseCache:
    def __init__(self, root: str | Path, enabled: bool = True):
        self.root = Path(root)
        self.enabled = enabled

    @property
    def memo_dir(self) -> Path:
        """Where model-file hashes are memoised (beside the responses they key)."""
        return self.root / "_model_ids"

    def _path(self, key: dict[str, Any]) -> Path:
        # the file name hashes the whole key, secrets included (another key is another entry); only the stored
        # copy of the key is masked
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
        if entry.get("key") != stored_key(key):
            return None
        return entry["completion"]

    def put(self, key: dict[str, Any], completion: dict[str, Any]) -> None:
        if not self.enabled:
            return
        completion = {k: v for k, v in completion.items() if k != "cached"}
        entry = {"key": stored_key(key), "completion": completion}
        atomic_write_text(self._path(key), json.dumps(entry, ensure_ascii=False, default=str))

    def count(self) -> int:
        """Number of stored responses (for tests and reports; not `__len__`, so an empty cache stays truthy)."""
        return sum(1 for p in self.root.glob("*/*/*.json") if not p.parent.parent.name.startswith("_"))


class OutputCache:
    """Output a component derived from a model's answers (nugget sets, UMBRELA grades, InstructRAG's rationales),
    one JSON file per entry under `<root>/<kind>/<model>/<hh>/<sha256>.json`, written atomically.

    Keyed like the response cache: the engine's `identity()` (model by content, engine settings) joins the
    caller's key (its input, prompts and sampling settings), so one display name on two engines (llama.cpp and
    vLLM of one GGUF) never shares an entry. An entry whose stored key differs (a hash collision, an older
    format) is a miss.
    """

    def __init__(self, root: str | Path | None, kind: str):
        self.root = Path(root) / kind if root else None
        self.kind = kind

    @staticmethod
    def full_key(engine: Identified, key: dict[str, Any]) -> dict[str, Any]:
        return {**key, "engine_identity": engine.identity()}

    def path(self, engine: Identified, key: dict[str, Any]) -> Path | None:
        if self.root is None:
            return None
        digest = stable_hash(self.full_key(engine, key))
        return self.root / slug(engine.model) / digest[:2] / f"{digest}.json"

    def get(self, engine: Identified, key: dict[str, Any]) -> dict[str, Any] | None:
        """The stored entry (without its key), or None."""
        path = self.path(engine, key)
        if path is None or not path.is_file():
            return None
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None
        if not isinstance(entry, dict) or entry.get("key") != stored_key(self.full_key(engine, key)):
            return None
        return {k: v for k, v in entry.items() if k != "key"}

    def put(self, engine: Identified, key: dict[str, Any], value: dict[str, Any]) -> None:
        path = self.path(engine, key)
        if path is not None:
            entry = {"key": stored_key(self.full_key(engine, key)), **value}
            atomic_write_text(path, json.dumps(entry, ensure_ascii=False, default=str))
