"""Building judge engines from their own LLM configs, so judges can differ from the generator.

A judge's `llm` node is an ordinary engine config with a Hydra `_target_` (e.g. `rag.llm.llama_cpp.LlamaCppEngine`
or `rag.llm.vllm_engine.VLLMEngine`). Judges with identical configs share one engine, and the pipeline can hand
in engines it already holds (keyed by `llm_key`) so that judging with the run's own model loads it only once.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rag.core.hashing import stable_hash
from rag.llm.base import LLMEngine
from rag.llm.cache import ResponseCache

log = logging.getLogger(__name__)


def to_plain(cfg: Any) -> Any:
    """A resolved plain-Python copy of a config node (dicts and lists pass through unchanged)."""
    if isinstance(cfg, DictConfig) or OmegaConf.is_config(cfg):
        return OmegaConf.to_container(cfg, resolve=True)
    return cfg


def llm_key(llm_cfg: Any) -> str:
    """A stable identity for an engine config: equal configs can share one loaded model."""
    return stable_hash(to_plain(llm_cfg), length=16)


def build_engine(llm_cfg: Any, cache_dir: str | Path | None) -> LLMEngine:
    """Instantiate the engine named by `_target_`; add the shared response cache unless the config sets one.

    Keys the engine's constructor does not accept (bookkeeping such as `name`) are dropped with a debug log,
    so one `conf/llm/*.yaml` serves both the generator and the judges.
    """
    from hydra.utils import get_class, instantiate

    cfg = dict(to_plain(llm_cfg) or {})
    target = cfg.get("_target_")
    if not target:
        raise ValueError(f"judge llm config needs a `_target_` engine class, got keys {sorted(cfg)}")
    cls = get_class(target)
    params = inspect.signature(cls.__init__).parameters
    takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in cfg.items() if k != "_target_" and (takes_kwargs or k in params)}
    dropped = sorted(set(cfg) - set(kwargs) - {"_target_"})
    if dropped:
        log.debug("engine %s: ignoring config keys %s", target, dropped)
    extra: dict[str, Any] = {}
    if "cache" not in kwargs and "cache" in params and cache_dir is not None:
        extra["cache"] = ResponseCache(Path(cache_dir) / "llm")
    engine = instantiate({"_target_": target, **kwargs}, **extra)
    if not isinstance(engine, LLMEngine):
        raise TypeError(f"{target} is not an LLMEngine")
    return engine


class EnginePool:
    """Engines by config identity; closes only the engines it built itself."""

    def __init__(self, cache_dir: str | Path | None, engines: Mapping[str, LLMEngine] | None = None):
        self.cache_dir = cache_dir
        self._given = dict(engines or {})
        self._built: dict[str, LLMEngine] = {}

    def get(self, llm_cfg: Any) -> LLMEngine:
        key = llm_key(llm_cfg)
        if key in self._given:
            return self._given[key]
        if key not in self._built:
            self._built[key] = build_engine(llm_cfg, self.cache_dir)
        return self._built[key]

    def close(self) -> None:
        for engine in self._built.values():
            engine.close()
        self._built.clear()
