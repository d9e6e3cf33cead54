"""Loaded components kept across the runs of one process, so a sweep loads each model and index once.

Hydra's basic launcher runs sweep cells one after another in one process. Each cell composes its own config;
when a cell's `llm`, `retriever`, `rerank` or `dataset` config (and the cache folder) equals the previous cell's,
the pipeline takes the already built and loaded component from here instead of building it again. One
component is kept per slot: a cell with another config closes the kept one and builds its own, so memory holds
at most one model per slot. Per-run state (usage counters, rerank statistics) is reset by the pipeline.
"""

from __future__ import annotations

import atexit
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rag.core.hashing import stable_hash
from rag.llm.base import LLMEngine
from rag.llm.factory import EngineFactory, build_engine
from rag.retrieve.base import Retriever

log = logging.getLogger(__name__)


class LoadedComponents:
    def __init__(self) -> None:
        self._kept: dict[str, tuple[str, Any]] = {}
        #: components built (not reused) per slot in this process
        self.builds: dict[str, int] = {}

    @staticmethod
    def key(node: DictConfig | dict[str, Any], *extra: Any) -> str:
        config = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node
        return stable_hash([config, *[str(e) for e in extra]])

    def get(self, slot: str, key: str, build: Callable[[], Any]) -> tuple[Any, bool]:
        """The kept component for `slot` if its key matches, else a new one (the old one is closed)."""
        kept = self._kept.get(slot)
        if kept is not None and kept[0] == key:
            return kept[1], True
        if kept is not None:
            self._close(kept[1])
        component = build()
        self._kept[slot] = (key, component)
        self.builds[slot] = self.builds.get(slot, 0) + 1
        return component, False

    def holds(self, component: Any) -> bool:
        return any(component is obj for _, obj in self._kept.values())

    def clear(self) -> None:
        """Close and forget everything (tests; the end of the process)."""
        for _, component in self._kept.values():
            self._close(component)
        self._kept.clear()

    @staticmethod
    def _close(component: Any) -> None:
        close = getattr(component, "close", None)
        if callable(close):
            try:
                close()
            except Exception as err:  # closing must not fail a run
                log.warning("closing %s failed: %s", type(component).__name__, err)


#: the process-wide registry the pipeline uses (when `cache.reuse_loaded` is true)
LOADED = LoadedComponents()
atexit.register(LOADED.clear)


def reuse_loaded(cfg: DictConfig) -> bool:
    """`cache.reuse_loaded`: true, false, or auto (reuse within a Hydra multirun, i.e. a sweep)."""
    setting = cfg.cache.get("reuse_loaded", "auto")
    if setting != "auto":
        return bool(setting)
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def model_loads(component: Any, seen: set[int] | None = None) -> int:
    """Weight loads counted by a component and the embedders or engines inside it, each object once (an LLM
    reranker holding the generator's own engine does not count its loads again)."""
    seen = set() if seen is None else seen
    if component is None or id(component) in seen:
        return 0
    seen.add(id(component))
    own = getattr(component, "model_loads", 0)
    inner = [getattr(component, name, None) for name in ("embedder", "engine")]
    inner += component.parts() if isinstance(component, Retriever) else []
    return (own if isinstance(own, int) else 0) + sum(model_loads(part, seen) for part in inner if part is not None)


class RunLoader:
    """Where one run's components come from: built from their config, or (`cache.reuse_loaded`) taken from an
    earlier sweep cell of this process (`LOADED`); and how many weight loads the run itself made, so a reused
    component counts 0."""

    def __init__(self, reuse: bool, cache_dir: Path, engines: EngineFactory):
        self.reuse, self.cache_dir, self.engines = reuse, cache_dir, engines
        #: the loads each slot's component had before this run
        self.loads_before: dict[str, int] = {}

    def shared(self, slot: str, node: Any, build: Callable[[], Any], *extra: Any) -> tuple[Any, bool]:
        """Build a component, or take the one an earlier cell of this process built from the same config."""
        if not self.reuse:
            return build(), False
        return LOADED.get(slot, LOADED.key(node, self.cache_dir, *extra), build)

    def engine_for(self, llm_cfg: Any) -> LLMEngine:
        """An engine from the run's factory; one kept for later sweep cells is adopted, not owned, so the
        factory's `close()` leaves it loaded for the next cell."""
        if not self.reuse:
            return self.engines.get(llm_cfg)
        engine = build_engine(llm_cfg, self.engines.cache)
        self.engines.adopt(llm_cfg, engine)
        return engine

    def generator_engine(self, llm_cfg: Any, *extra: Any) -> LLMEngine:
        """The generator's engine: kept from an earlier cell (its per-run accounting starts from zero) or built."""
        engine, reused = self.shared("llm", llm_cfg, lambda: self.engine_for(llm_cfg), *extra)
        if reused:
            engine.usage = type(engine.usage)()
            if hasattr(engine, "cost_usd"):
                engine.cost_usd = 0.0
            self.engines.adopt(llm_cfg, engine)
        self.loads_before["llm"] = model_loads(engine) if reused else 0
        return engine

    def note_loads(self, **parts: Any) -> None:
        """Remember the loads `parts` (slot=component) had before this run."""
        self.loads_before.update({slot: model_loads(part) for slot, part in parts.items()})

    def loads(self, **parts: Any) -> int:
        """Model weights loaded by this run (LLM and embedders); 0 for every component reused from a previous
        sweep cell. An engine shared by the generator and an LLM reranker counts once."""
        seen: set[int] = set()
        return sum(max(0, model_loads(part, seen) - self.loads_before.get(slot, 0)) for slot, part in parts.items()
                   if part is not None)
