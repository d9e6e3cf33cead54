"""Rerankers applied one after another (`rerank=bge_diversity`): each step's cut list is the next step's input.

LiveRAG's winners stacked rerankers: Magikarp ranked 2,000 candidates with a pretrained reranker before its LLM picked a
diverse few. A chain composes such pipelines from the `rerank` group without a class per combination: `steps` is a
mapping from a name to a reranker's config (a defaults list `- /rerank@steps.bge: bge`, then
`- /rerank@steps.diversity: diversity`), applied in the mapping's order; each step reranks what the previous one
handed on and `step.k` cuts it, and the chain's own `k` cuts the end.

The chain builds its steps itself (`_recursive_: false` on its node), so that every step whose node has an `llm` key
gets the engine the pipeline built for the chain's `rerank.llm` (`llm: ${llm}`: the generator's own engine, shared,
never loaded twice) instead of instantiating that config as a second engine. `prepare`, `close` and `stats` reach
every step; a step's statistics come out as `<step>.<stat>` (metrics.json: `rerank/diversity.elements`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.utils import instantiate

from rag.core.hashing import slug, stable_hash
from rag.llm.base import LLMEngine
from rag.records import ScoredPassage
from rag.rerank.base import Reranker

if TYPE_CHECKING:
    from rag.retrieve.base import Retriever

#: keys longer than this are shortened (readable prefix + hash), as rag/retrieve/hybrid.py does, so cache file
#: names stay well under 255 bytes
MAX_KEY_CHARS = 100


class ChainReranker(Reranker):
    kind = "chain"

    def __init__(self, steps: Mapping[str, Any], k: int | None = None, llm: LLMEngine | None = None):
        super().__init__(k)
        if not steps:
            raise ValueError("rerank.steps is empty: a chain needs at least one reranker")
        #: the engine handed to LLM steps (not `engine`: the steps count its loads, once)
        self.llm = llm
        #: the steps by name, in the order they are applied
        self.steps: dict[str, Reranker] = {str(name): _build(str(name), node, llm) for name, node in steps.items()}

    @property
    def key(self) -> str:
        """The steps' keys in order, each with the `k` that cuts what it hands on (it changes the next step's
        input, so it names the chain's output, unlike the chain's own `k`)."""
        parts = [f"{step.key}-k{step.k if step.k is not None else 'all'}" for step in self.steps.values()]
        full = "chain--" + "--".join(parts)
        if len(full) <= MAX_KEY_CHARS:
            return full
        return slug(f"chain-{stable_hash(parts, 10)}-{'-'.join(self.steps)}")

    @property
    def is_identity(self) -> bool:
        return all(step.is_identity and step.k is None for step in self.steps.values())

    def rerank(self, queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[ScoredPassage]]:
        """Every step in order, each one's cut feeding the next; the last step's cut list (the chain's `k` cuts it)."""
        lists = candidates
        for step in self.steps.values():
            ranked = lists if step.is_identity else step.rerank(queries, lists)
            lists = [step.cut(r) for r in ranked]
        return lists

    def score(self, queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[float]]:
        """Scores counting down along the chain's list; -inf for candidates a step cut or dropped."""
        out = []
        for cands, ranked in zip(candidates, self.rerank(queries, candidates)):
            position: dict[str, int] = {}
            for n, p in enumerate(ranked):
                position.setdefault(p.passage.passage_id, n)
            out.append([float(len(ranked) - position[c.passage.passage_id]) if c.passage.passage_id in position
                        else float("-inf") for c in cands])
        return out

    def prepare(self, cache_dir: str | Path, retriever: Retriever | None = None) -> None:
        for step in self.steps.values():
            step.prepare(cache_dir, retriever)

    def close(self) -> None:
        for step in self.steps.values():
            step.close()

    @property
    def stats(self) -> dict[str, Any]:
        """Every step's statistics as `<step>.<stat>` (no "/", so metric names stay `rerank/<stat>`)."""
        return {f"{name}.{key}": value for name, step in self.steps.items()
                for key, value in (getattr(step, "stats", None) or {}).items()}

    @stats.setter
    def stats(self, value: Mapping[str, Any]) -> None:
        """The pipeline empties `stats` once it has summed them: empty every step's."""
        if value:
            raise ValueError("a chain's stats are its steps'; only resetting them ({}) is supported")
        for step in self.steps.values():
            if hasattr(step, "stats"):
                step.stats = {}

    @property
    def model_loads(self) -> int:
        """Model weight loads of the steps and of the embedders and engines inside them, each object once (steps
        share the chain's engine)."""
        seen: dict[int, Any] = {}
        todo: list[Any] = list(self.steps.values())
        while todo:
            part = todo.pop()
            if part is None or id(part) in seen:
                continue
            seen[id(part)] = part
            todo += [getattr(part, name, None) for name in ("embedder", "engine")]
        loads = (getattr(part, "model_loads", 0) for part in seen.values())
        return sum(n for n in loads if isinstance(n, int))


def _build(name: str, node: Any, llm: LLMEngine | None) -> Reranker:
    """A step from its config (the chain's engine for a node with an `llm` key), or a reranker given as it is."""
    if isinstance(node, Reranker):
        return node
    step = instantiate(node, llm=llm) if "llm" in node else instantiate(node)
    if not isinstance(step, Reranker):
        raise TypeError(f"rerank.steps.{name} built a {type(step).__name__}, not a reranker")
    return step

