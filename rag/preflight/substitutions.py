"""Substitutions: what runs on a laptop in place of the components an experiment names but this machine cannot
run (hosted indexes, GPU models, hub downloads), declared once in `conf/substitutions/<name>.yaml`.

An experiment keeps its published settings (`experiment=liverag_grag` names OpenSearch, Pinecone and
Falcon3-10B); `substitutions=embedded` swaps, wherever they sit in the composed config (the retriever, a fusion
retriever's sources, a reranker chain's steps, the judges' engine), every node whose `_target_` (and, when given,
`match` keys) equals a swap's with that swap's `use` node, keeping the settings named in `keep` (a retriever's
`k`, a reranker's `k`). Each swap says `why`. The run's config.json and fingerprint hold the substituted config
and the `substitutions` node, so a substituted run never resumes or reads as an unsubstituted one.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext

from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict

from rag.core.errors import ConfigError

log = logging.getLogger(__name__)


def _matches(node: DictConfig, swap: DictConfig) -> bool:
    if node.get("_target_") != swap.target:
        return False
    for key, value in (swap.get("match") or {}).items():
        if OmegaConf.is_interpolation(node, key) or node.get(key) != value:
            return False
    return True


def _replacement(child: DictConfig, swap: DictConfig) -> DictConfig:
    """The swap's `use` node, with the replaced node's `keep` settings (an interpolation stays one)."""
    out = OmegaConf.create(OmegaConf.to_container(swap.use, resolve=False))
    for kept in swap.get("keep") or []:
        if kept in child:
            out[kept] = child._get_node(kept)._value()
    return out


def _walk(node: DictConfig | ListConfig, path: str, swaps: dict[str, DictConfig], done: list[str],
          skip: tuple[str, ...] = ()) -> None:
    keys = list(node.keys()) if isinstance(node, DictConfig) else list(range(len(node)))
    for key in keys:
        if key in skip or node._get_node(key)._is_interpolation():
            continue  # `judge.llm: ${llm}` follows whatever `llm` becomes
        child = node[key]
        where = f"{path}.{key}" if path else str(key)
        if isinstance(child, DictConfig):
            name = next((n for n, swap in swaps.items() if _matches(child, swap)), None)
            if name is not None:
                node[key] = _replacement(child, swaps[name])
                done.append(f"{where}: {name}")
                continue
        if isinstance(child, (DictConfig, ListConfig)):
            with open_dict(child) if isinstance(child, DictConfig) else nullcontext():
                _walk(child, where, swaps, done)


def apply_substitutions(cfg: DictConfig) -> list[str]:
    """Swap the config's nodes in place as `cfg.substitutions.swaps` says; returns `path: swap` per node swapped
    (logged once). No `substitutions` node, or one without swaps: nothing changes."""
    node = cfg.get("substitutions") if isinstance(cfg, DictConfig) else None
    if not node or not node.get("swaps"):
        return []
    swaps: dict[str, DictConfig] = {}
    for name, swap in node.swaps.items():
        if not isinstance(swap, DictConfig) or not swap.get("target") or swap.get("use") is None:
            raise ConfigError(f"substitutions.swaps.{name}: needs `target` (a class path) and `use` (the node "
                              f"that replaces it)")
        swaps[str(name)] = swap
    done: list[str] = []
    with open_dict(cfg):
        _walk(cfg, "", swaps, done, skip=("substitutions", "hydra"))
    if done:
        log.info("substitutions=%s: %s", node.get("name", "?"), "; ".join(done))
    return done
