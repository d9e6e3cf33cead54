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
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rag.core.hashing import stable_hash

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
