"""The reranker interface. `k` cuts the reranked list; `k: null` keeps every candidate."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag.core.hashing import stable_hash
from rag.prompts import PromptTemplate, load_prompt
from rag.records import ScoredPassage, with_ranks

if TYPE_CHECKING:
    from rag.llm.base import LLMEngine
    from rag.retrieve.base import Retriever


class Reranker(ABC):
    kind: str = "reranker"

    def __init__(self, k: int | None = None):
        if k is not None and k < 1:
            raise ValueError(f"rerank.k must be >= 1 or null, got {k}")
        self.k = k

    @property
    @abstractmethod
    def key(self) -> str:
        """Names everything that changes the reranked order (not k, which only cuts)."""

    @property
    def is_identity(self) -> bool:
        """True when reranking keeps the retriever's order (nothing to compute or cache)."""
        return False

    @abstractmethod
    def score(self, queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[float]]:
        """One relevance score per candidate (higher is better), for a whole batch of queries."""

    def rerank(self, queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[ScoredPassage]]:
        """Full reranked lists (uncut): the cacheable part. Stable for ties."""
        scores = self.score(queries, candidates)
        out = []
        for cands, cand_scores in zip(candidates, scores):
            order = sorted(range(len(cands)), key=lambda i: (-cand_scores[i], i))
            out.append(with_ranks([ScoredPassage(cands[i].passage, float(cand_scores[i])) for i in order]))
        return out

    def prepare(self, cache_dir: str | Path, retriever: Retriever | None = None) -> None:  # noqa: B027
        """Optional hook, called once the retriever's index is ready: reuse what it holds (dense vectors)."""

    def cut(self, ranked: list[ScoredPassage]) -> list[ScoredPassage]:
        return ranked if self.k is None else ranked[: self.k]

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release model memory."""


class NoRerank(Reranker):
    """Keep the retriever's order; `rerank.k` still cuts the list handed to the generator."""

    kind = "none"

    @property
    def key(self) -> str:
        return "none"

    @property
    def is_identity(self) -> bool:
        return True

    def score(self, queries, candidates):
        return [[p.score for p in cands] for cands in candidates]

    def rerank(self, queries, candidates):
        return candidates


def take_stats(reranker: Any, into: dict[str, float]) -> None:
    """Add the numeric `stats` a reranker counted over its last batches (BGE's seconds, Rank-R1's questions) to a
    run's totals `into`, and reset them, so a chunked run sums every chunk once."""
    stats = getattr(reranker, "stats", None)
    for key, value in (stats or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            into[key] = into.get(key, 0) + value
    if stats:
        reranker.stats = {}


def rerank_metrics(stats: dict[str, float]) -> dict[str, Any]:
    """A run's reranker totals as `rerank/<name>` metrics, with the latency per question where questions were
    counted (LLM rerankers: Rank-R1, as the seed reports)."""
    stats = dict(stats)
    if stats.get("questions"):
        stats["seconds_per_question"] = stats.get("seconds", 0.0) / stats["questions"]
    return {f"rerank/{k}": round(v, 4) if isinstance(v, float) else v for k, v in stats.items()}


class PromptedReranker(Reranker):
    """A reranker that asks an LLM with one prompt file (`rerank.prompt`, `rerank.prompt_dir`): Rank-R1, the
    pointwise yes/no reranker and the diversity selector. Subclasses set `engine`, `prompt_name`, `prompt_dir`."""

    engine: LLMEngine | None
    prompt_name: str
    prompt_dir: str | None

    @property
    def template(self) -> PromptTemplate:
        return load_prompt(self.prompt_name, self.prompt_dir)

    def key_parts(self, *settings: Any) -> tuple[str, str]:
        """(digest, model name) for this reranker's key (`prompted_key`)."""
        return prompted_key(self.engine, self.template, *settings)


def prompted_key(engine: LLMEngine | None, template: PromptTemplate, *settings: Any) -> tuple[str, str]:
    """(digest, model name) for an LLM reranker's key: the digest hashes the engine by identity, the prompt's text
    and `settings`, so equal keys mean equal requests and the stage cache may replay them; the model's display
    name ("no-llm" without an engine) goes after it, where the 80-character slug may cut it."""
    identity = engine.identity() if engine is not None else None
    model = engine.model if engine is not None else "no-llm"
    return stable_hash([identity, template.system, template.user, list(template.stop_plain), *settings], 10), model


def rerank_llm(cfg: Any) -> Any:
    """The LLM reranker's engine config (`rerank.llm`, Rank-R1's or GRAG's), or None for other rerankers."""
    rerank = cfg.get("rerank")
    return rerank.get("llm") if hasattr(rerank, "get") else None


def takes_turns(cfg: Any, generator_uses_llm: bool) -> bool:
    """Whether the reranker ranks every question ahead and closes its engine before generation, so that it and the
    generator take turns on one GPU: `generation.release_reranker` with an LLM reranker whose engine is not the
    generator's."""
    from rag.llm.factory import llm_key

    llm = rerank_llm(cfg)
    if not llm or not bool(cfg.generation.get("release_reranker", False)):
        return False
    return not generator_uses_llm or llm_key(llm) != llm_key(cfg.llm)
