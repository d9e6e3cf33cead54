"""The one place LLM engines are built: the generator's, the judges' and an LLM reranker's (Rank-R1).

An engine config is an ordinary `conf/llm/*.yaml` node with a Hydra `_target_`. Equal configs (after resolving)
share one engine, so a judge configured with the run's own `${llm}` reuses the loaded generator model. When a
different model must load on a machine that holds only one (a 10B generator and a 27B judge on one GPU), the
factory can release the engines it holds first (`release_others`); a released engine reloads on its next use.
Usage (calls, tokens, seconds, retries) is read per engine, so evaluation cost can be reported apart from
generation.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rag.core.errors import ConfigError
from rag.core.hashing import stable_hash
from rag.llm.base import LLMEngine, Usage
from rag.llm.cache import ResponseCache

log = logging.getLogger(__name__)


def to_plain(cfg: Any) -> Any:
    """A resolved plain-Python copy of a config node (dicts and lists pass through unchanged)."""
    if isinstance(cfg, DictConfig) or OmegaConf.is_config(cfg):
        return OmegaConf.to_container(cfg, resolve=True)
    return cfg


def llm_key(llm_cfg: Any) -> str:
    """A stable identity for an engine config: equal configs share one loaded model."""
    return stable_hash(to_plain(llm_cfg), length=16)


def build_engine(llm_cfg: Any, cache: ResponseCache | None = None) -> LLMEngine:
    """Instantiate the engine named by `_target_`, with `cache` unless the config sets its own.

    Keys the engine's constructor does not accept (bookkeeping such as `name`) are dropped with a debug log,
    so one `conf/llm/*.yaml` serves the generator, the judges and Rank-R1.
    """
    from hydra.utils import get_class, instantiate

    cfg = dict(to_plain(llm_cfg) or {})
    target = cfg.get("_target_")
    if not target:
        raise ConfigError(f"llm config needs a `_target_` engine class, got keys {sorted(cfg)}")
    cls = get_class(target)
    params = inspect.signature(cls.__init__).parameters
    takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in cfg.items() if k != "_target_" and (takes_kwargs or k in params)}
    dropped = sorted(set(cfg) - set(kwargs) - {"_target_"})
    if dropped:
        log.debug("engine %s: ignoring config keys %s", target, dropped)
    extra: dict[str, Any] = {}
    if "cache" not in kwargs and "cache" in params and cache is not None:
        extra["cache"] = cache
    engine = instantiate({"_target_": target, **kwargs}, **extra)
    if not isinstance(engine, LLMEngine):
        raise ConfigError(f"llm._target_={target} is not an LLMEngine")
    return engine


def process_tree_rss() -> int | None:
    """Resident memory of this process and all its descendants in bytes (None without psutil)."""
    try:
        import psutil
    except ImportError:
        return None
    total = 0
    me = psutil.Process()
    for proc in [me, *me.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue  # exited while being measured
    return total


def _gib(value: int | None) -> str:
    return "unknown" if value is None else f"{value / 2**30:.2f} GiB"


def usage_delta(after: Usage, before: Usage) -> Usage:
    return Usage(**{k: getattr(after, k) - getattr(before, k) for k in Usage.__dataclass_fields__})


class EngineFactory:
    """Engines by config identity, with one response cache; closes only the engines it built."""

    def __init__(self, cache_dir: str | Path | None = None, cache_enabled: bool = True):
        self.cache = ResponseCache(Path(cache_dir) / "llm", enabled=cache_enabled) if cache_dir else None
        self._engines: dict[str, LLMEngine] = {}
        self._owned: set[str] = set()
        #: engines closed to make room for another model (reloaded on their next use)
        self.released = 0
        #: (RSS bytes before, after) of this process and its children, per `release` that closed an engine
        self.release_rss: list[tuple[int | None, int | None]] = []

    def get(self, llm_cfg: Any, release_others: bool = False, setting: str = "llm") -> LLMEngine:
        """The engine for `llm_cfg`, built on first use. With `release_others`, a new model first frees the
        memory of every engine held (they reload lazily if asked again). `setting` is where its config lives
        (`judge.llm`): its errors name that path; an engine shared with an earlier caller keeps its first."""
        key = llm_key(llm_cfg)
        if key not in self._engines:
            if release_others:
                self.release(keep=key)
            self._engines[key] = build_engine(llm_cfg, self.cache)
            self._engines[key].setting = setting
            self._owned.add(key)
        return self._engines[key]

    def adopt(self, llm_cfg: Any, engine: LLMEngine) -> None:
        """Share an engine built elsewhere under its config (the factory never closes it on `close`)."""
        self._engines.setdefault(llm_key(llm_cfg), engine)

    def release(self, keep: str | None = None) -> int:
        """Close every held engine except `keep` (frees model memory; the objects stay usable).

        The memory of this process and its children (vLLM runs its model in worker processes) is measured
        before and after, logged, and kept in `release_rss` as (bytes before, bytes after), so a run shows that
        the generator's model really left before the judge's loads."""
        before = process_tree_rss()
        n = 0
        for key, engine in self._engines.items():
            if key != keep:
                engine.close()
                n += 1
        if n:
            after = process_tree_rss()
            self.release_rss.append((before, after))
            log.info("released %d engine(s) before loading another model: memory (RSS of this process and its "
                     "children) %s -> %s", n, _gib(before), _gib(after))
        self.released += n
        return n

    def release_config(self, llm_cfg: Any) -> bool:
        """Close the engine of one config (an LLM reranker's, before the generator's loads); it reloads lazily if
        asked again. False when no such engine is held."""
        engine = self._engines.get(llm_key(llm_cfg))
        if engine is None:
            return False
        before = process_tree_rss()
        engine.close()
        after = process_tree_rss()
        self.release_rss.append((before, after))
        self.released += 1
        log.info("released the engine of %s: memory (RSS of this process and its children) %s -> %s",
                 getattr(engine, "model", "?"), _gib(before), _gib(after))
        return True

    @property
    def engines(self) -> Mapping[str, LLMEngine]:
        return dict(self._engines)

    def usage(self) -> dict[str, Usage]:
        """A snapshot of every held engine's usage (copies), by config key."""
        return {k: Usage(**e.usage.to_dict()) for k, e in self._engines.items()}

    def cost_usd(self) -> dict[str, float]:
        return {k: float(getattr(e, "cost_usd", 0.0)) for k, e in self._engines.items()}

    def close(self) -> None:
        for key in list(self._owned):
            self._engines[key].close()
        self._engines = {k: v for k, v in self._engines.items() if k not in self._owned}
        self._owned.clear()
