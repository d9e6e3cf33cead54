"""What a cluster would hit, seen in the composed config before anything is launched (called by `rag.preflight`).

A sweep that passes these checks can still fail on the cluster, but not for any of these reasons, each of which
used to surface only after GPU hours of retrieval and reranking in every cell:

- **Declared splits.** A component that learns from questions (InstructRAG's demonstrations, Crucible's ranker)
  declares them: `declared_splits(node, path)` on its class returns `DeclaredSplit`s. A split that shares a
  question (same id, or the same text) with the evaluated set is one line naming both and the fix.
- **GPU memory.** An engine declares its share of one device (`LLMEngine.gpu_memory_share(node)`: vLLM's
  `gpu_memory_utilization`; CPU, remote and served engines none). A run holds engines in phases: reranking (an
  LLM reranker's engine), generation (the generator's, plus the reranker's unless `generation.release_reranker`),
  judging (the judges' engines, plus those of generation unless `judge.release_generator`; with it, each new
  judge model first closes the others). The engines of one phase may not ask more than
  `preflight.gpu_memory_limit` of the device (0.95 by default). Engines are assumed to share their first device,
  as vLLM engines of one process do. Equal engine configs are one engine.
- **Reasoning endpoints.** An engine whose model spends hidden reasoning tokens out of the completion limit
  declares a floor (`reasoning_floor_tokens` in its config: `conf/llm/openai_reasoning.yaml`); every token limit of
  a caller of that engine (`max_tokens`, `*_max_tokens`, `*params.max_tokens`) below the floor is one line, as is a
  log-probability mode on an engine that refuses log-probabilities.
- **The judge is not the generator.** The seeds judge with other LLMs than the one that answered; a judge whose
  engine config is the generator's is one warning line (not a problem: the embedded default has one model).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rag.core.components import component_class
from rag.core.errors import ONE_LINE_ERRORS
from rag.core.hashing import stable_hash
from rag.data.questions import DeclaredSplit, shared_questions
from rag.records import Question

log = logging.getLogger(__name__)

#: the device share the engines of one phase may ask together, unless `preflight.gpu_memory_limit` says otherwise
GPU_MEMORY_LIMIT = 0.95


# -- the evaluated set ----------------------------------------------------------------------------------------------
_EVALUATED: dict[str, tuple[str, list[Question]]] = {}


def evaluated_questions(dataset_node: Mapping[str, Any]) -> tuple[str, list[Question]] | None:
    """(description, questions) of the dataset a config evaluates, loaded once per dataset config in this process;
    None when it cannot be loaded (a missing file is reported by the data-file check)."""
    key = stable_hash(dict(dataset_node), length=16)
    if key not in _EVALUATED:
        from hydra.utils import instantiate

        try:
            dataset = instantiate(dict(dataset_node), _convert_="all")
            questions = list(dataset.questions)
        except Exception as err:  # noqa: BLE001 - reported by the other checks (missing data, bad rows)
            log.debug("preflight: the evaluated set of %s was not loaded: %s", dataset_node.get("name"), err)
            return None
        first = int(dataset_node.get("offset") or 0) + 1
        _EVALUATED[key] = (f"dataset {dataset.name}, questions {first}..{first + len(questions) - 1}", questions)
    return _EVALUATED[key]


def split_problems(data: Mapping[str, Any], nodes: Iterable[tuple[str, Mapping[str, Any], Any]]) -> list[str]:
    """One line per declared split that shares questions with the evaluated set."""
    dataset = data.get("dataset")
    if not isinstance(dataset, Mapping) or "_target_" not in dataset:
        return []
    problems: list[str] = []
    evaluated = None
    for path, node, cls in nodes:
        declare: Callable[..., list[DeclaredSplit]] | None = getattr(cls, "declared_splits", None)
        if not callable(declare):
            continue
        try:
            splits = declare(node, path)
        except ONE_LINE_ERRORS as err:  # a split's file that cannot be read: the data checks name it
            log.debug("preflight: the declared splits of %s were not loaded: %s", path, err)
            continue
        if not splits:
            continue
        evaluated = evaluated or evaluated_questions(dataset)
        if evaluated is None:
            return problems
        described, questions = evaluated
        for split in splits:
            shared = shared_questions(split.questions, questions)
            if shared:
                ids = ", ".join(shared[:5]) + (", ..." if len(shared) > 5 else "")
                problems.append(f"{split.setting}: {split.what} ({split.where}) share {len(shared)} question(s) "
                                f"with the evaluated set ({described}; ids {ids}): {split.fix}")
    return problems


# -- engines --------------------------------------------------------------------------------------------------------
@dataclass
class EngineUse:
    """An engine config and the setting that names it (`llm`, `rerank.llm`, `judge.liverag.llm`)."""

    setting: str
    node: Mapping[str, Any]

    @property
    def key(self) -> str:
        from rag.llm.factory import llm_key

        return llm_key(dict(self.node))

    @property
    def share(self) -> float | None:
        from rag.llm.base import LLMEngine

        cls = _engine_class(self.node)
        if cls is None or not issubclass(cls, LLMEngine):
            return None
        return cls.gpu_memory_share(self.node)


def _engine_class(node: Mapping[str, Any]) -> Any:
    target = node.get("_target_")
    return component_class(str(target)) if target else None


def _llm_node(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) and value.get("_target_") else None


def generator_engine(data: Mapping[str, Any]) -> EngineUse | None:
    generator = data.get("generator")
    llm = _llm_node(data.get("llm"))
    if not isinstance(generator, Mapping) or llm is None:
        return None
    cls = _engine_class(generator)
    return EngineUse("llm", llm) if getattr(cls, "uses_llm", True) else None


def reranker_engine(data: Mapping[str, Any]) -> EngineUse | None:
    rerank = data.get("rerank")
    llm = _llm_node(rerank.get("llm")) if isinstance(rerank, Mapping) else None
    return EngineUse("rerank.llm", llm) if llm is not None else None


def judge_engines(data: Mapping[str, Any]) -> list[EngineUse]:
    """The engine of every composed judge (`judge.<name>.llm`) and of the nugget maker the nugget-based judges
    share (`judge.nuggetizer.llm`), in config order."""
    judge = data.get("judge")
    if not isinstance(judge, Mapping):
        return []
    from rag.judge.run import NUGGETIZER, SETTINGS

    out = []
    for name, node in judge.items():
        if (name not in SETTINGS or name == NUGGETIZER) and isinstance(node, Mapping) and node.get("_target_"):
            llm = _llm_node(node.get("llm")) or _llm_node(judge.get("llm"))
            if llm is not None:
                out.append(EngineUse(f"judge.{name}.llm", llm))
    return out


def _distinct(uses: Iterable[EngineUse | None]) -> list[EngineUse]:
    seen, out = set(), []
    for use in uses:
        if use is not None and use.key not in seen:
            seen.add(use.key)
            out.append(use)
    return out


def gpu_memory_problems(data: Mapping[str, Any]) -> list[str]:
    """One line per phase of a run whose engines ask more of one device than the limit."""
    limit = float(((data.get("preflight") or {}).get("gpu_memory_limit")) or GPU_MEMORY_LIMIT)
    generator, reranker = generator_engine(data), reranker_engine(data)
    judges = judge_engines(data)
    release_reranker = bool((data.get("generation") or {}).get("release_reranker", False))
    release_generator = bool((data.get("judge") or {}).get("release_generator", False))
    generation = [generator] + ([] if release_reranker else [reranker])
    phases: list[tuple[str, list[EngineUse], str]] = [
        ("generation", _distinct(generation),
         "set generation.release_reranker=true (the reranker ranks every question first, then makes room), or "
         "lower their gpu_memory_utilization"),
    ]
    if release_generator:  # each judge model closes every other engine before it loads
        phases += [("judging", _distinct([use]), "lower its gpu_memory_utilization") for use in judges]
    elif judges:
        phases.append(("judging", _distinct([*judges, *generation]),
                       "set judge.release_generator=true (a judge model closes the others before it loads), or "
                       "lower their gpu_memory_utilization"))
    problems = []
    for phase, uses, fix in phases:
        shares = [(use, use.share) for use in uses]
        shares = [(use, share) for use, share in shares if share]
        total = sum(share for _, share in shares)
        if len(shares) > 1 and total > limit + 1e-9:
            held = ", ".join(f"{use.setting} ({use.node.get('model') or use.node.get('model_name')}: "
                             f"gpu_memory_utilization {share:g})" for use, share in shares)
            problems.append(f"GPU memory: {phase} holds {held} on one device at once, {total:g} of it > "
                            f"preflight.gpu_memory_limit={limit:g}: {fix}")
        elif len(shares) == 1 and total > limit + 1e-9:
            use = shares[0][0]
            problems.append(f"{use.setting}.gpu_memory_utilization={total:g} > preflight.gpu_memory_limit={limit:g}")
    return problems


# -- reasoning endpoints --------------------------------------------------------------------------------------------
LOGPROB_MODES = (("assignment", "logprobs"), ("decisions", "logprobs"), ("mode", "logprobs"))


def _token_limits(node: Mapping[str, Any], path: str) -> Iterable[tuple[str, int]]:
    """Every completion-token limit a caller's node sets (its engine's and other engines' nodes left out)."""
    for key, value in node.items():
        here = f"{path}.{key}" if path else str(key)
        if isinstance(value, Mapping):
            if value.get("_target_") and key == "llm":
                continue
            yield from _token_limits(value, here)
        elif (str(key) == "max_tokens" or str(key).endswith("_max_tokens")) and isinstance(value, int) \
                and not isinstance(value, bool):
            yield here, value


def _logprob_settings(node: Mapping[str, Any], path: str) -> Iterable[str]:
    for key, value in node.items():
        here = f"{path}.{key}" if path else str(key)
        if isinstance(value, Mapping) and not (value.get("_target_") and key == "llm"):
            yield from _logprob_settings(value, here)
        elif (str(key), value) in LOGPROB_MODES:
            yield f"{here}={value}"


def _callers(data: Mapping[str, Any]) -> Iterable[tuple[str, Mapping[str, Any], EngineUse]]:
    """(path, node, engine) of every component that asks an engine: the generator (the run's `llm`), an LLM
    reranker, each judge."""
    generator = generator_engine(data)
    if generator is not None:
        yield "generator", data["generator"], generator
    reranker = reranker_engine(data)
    if reranker is not None:
        yield "rerank", data["rerank"], reranker
    judge = data.get("judge") or {}
    for use in judge_engines(data):
        name = use.setting.split(".")[1]
        yield f"judge.{name}", judge[name], use


def reasoning_problems(data: Mapping[str, Any]) -> list[str]:
    problems = []
    for path, node, use in _callers(data):
        floor = use.node.get("reasoning_floor_tokens")
        if isinstance(floor, int) and floor > 0:
            for setting, value in _token_limits(node, path):
                if value < floor:
                    problems.append(f"{setting}={value} is below {use.setting}.reasoning_floor_tokens={floor}: "
                                    f"{use.node.get('model')} spends hidden reasoning tokens out of the same limit "
                                    f"and would return empty replies; raise {setting} to at least {floor}")
        refused = {str(p) for p in use.node.get("refused_params") or ()}
        if {"logprobs", "top_logprobs"} & refused:
            for setting in _logprob_settings(node, path):
                problems.append(f"{setting} reads log-probabilities, which {use.setting} ({use.node.get('model')}) "
                                f"refuses (refused_params); use the text mode or another engine")
    return problems


_WARNED: set[str] = set()


def self_judging_warnings(data: Mapping[str, Any]) -> list[str]:
    """A judge whose engine is the generator's: the seeds judge with another LLM than the one that answered."""
    generator = generator_engine(data)
    if generator is None:
        return []
    same = [use.setting for use in judge_engines(data) if use.key == generator.key]
    if not same:
        return []
    model = generator.node.get("model_name") or generator.node.get("model") or generator.node.get("model_package")
    return [f"{', '.join(same)}: the judge is the generator's own model ({model}); the papers judge with another "
            f"LLM than the one that answered (set judge.llm, e.g. +llm@judge.llm=<option>)"]


def cluster_problems(data: Mapping[str, Any], nodes: Sequence[tuple[str, Mapping[str, Any], Any]]) -> list[str]:
    """Every problem above for one resolved config (`nodes`: (path, node, class) of its components)."""
    for line in self_judging_warnings(data):
        if line not in _WARNED:  # once per process, not once per sweep cell
            _WARNED.add(line)
            log.warning("preflight: %s", line)
    return [*split_problems(data, nodes), *gpu_memory_problems(data), *reasoning_problems(data)]
