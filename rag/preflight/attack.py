"""A corpus attack (`attack=poisonedrag | prompt_injection`, rag/attack/) crossed with the run's other options.

- `add_attack_metrics(cfg)`: a run with an attack measures it. The attack's config names the metric options it
  needs (`attack.metrics`, options of conf/metrics/); those the run's `metrics` list lacks are added to
  `cfg.metrics` before the config is checked, fingerprinted and saved, so the default metrics of an attacked run
  report attack/asr, attack/asr_poisonedrag, attack/attack_accuracy and attack/poisoned_*. It applies at any
  `attack.n_passages`: with none planted the targets are still set, and the run measures the baseline (the first
  column of `experiment=poisoning`).
- `unreached_index(data)`: an attack plants its passages in the local corpus, before indexing; a retriever whose
  class does not index the run's corpus (`Retriever.indexes_local_corpus` false: every `RemoteRetriever`, such as
  Pinecone and OpenSearch, and the sharded index `python -m rag.index` built beforehand), alone or as a part of a
  composite retriever (fusion sources, hybrid's two, sharded's base), would search passages the attack never
  reached while the run reported an attack. The preflight refuses it in one line, and the pipeline again before
  any index is built when the preflight was bypassed. `attack.n_passages=0` plants nothing: it may run with any
  retriever.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from rag.core.components import component_class
from rag.core.errors import ConfigError


def retriever_classes(node: Any, path: str) -> Iterable[tuple[str, type]]:
    """Every retriever of a resolved retriever node, its own first, then the retrievers it holds (any depth)."""
    if not isinstance(node, Mapping):
        return
    from rag.retrieve.base import Retriever

    cls = component_class(str(node["_target_"])) if node.get("_target_") else None
    if isinstance(cls, type) and issubclass(cls, Retriever):
        yield path, cls
    for key, value in node.items():
        if isinstance(value, Mapping):
            yield from retriever_classes(value, f"{path}.{key}")


def unreached_index(data: Mapping[str, Any]) -> str | None:
    """The problem of an attack that plants passages while the retriever (or one of its parts) searches an index
    the attack cannot reach, decided by the retriever classes; None when the attack reaches what is searched, or
    plants nothing (`attack.n_passages=0` runs with any retriever: its targets are set, nothing is planted)."""
    attack = data.get("attack")
    if not isinstance(attack, Mapping):
        return None
    planted = attack.get("n_passages", 1)  # left out: the attack's own default, which plants
    if isinstance(planted, (int, float)) and not isinstance(planted, bool) and planted <= 0:
        return None
    target = str(attack.get("_target_") or "?")
    option = getattr(component_class(target), "option", None) or target.rsplit(".", 1)[-1]
    found = list(retriever_classes(data.get("retriever"), "retriever"))
    hosted = [(path, cls) for path, cls in found if not cls.indexes_local_corpus]
    if not hosted:
        return None
    path, cls = hosted[0]
    setting = f"retriever={cls.kind}" if path == "retriever" else f"retriever={found[0][1].kind} ({path}={cls.kind})"
    return (f"attack={option} plants passages in the local corpus, but {setting} searches {cls.searched_index} it "
            f"cannot reach: use a local retriever (retriever=bm25|dense|hybrid) or attack=none")


def answerless_targets(data: Mapping[str, Any]) -> str | None:
    """The problem of an attack on questions without gold answers: its incorrect target answer needs a correct one
    to differ from, so no question becomes a target and nothing is planted, while the run would report an attack.
    Decided by the question loader's class (`QuestionLoader.has_answers`); an attack file (`attack.attack_file`)
    brings its own targets, and `attack.n_passages=0` plants nothing."""
    attack = data.get("attack")
    dataset = data.get("dataset")
    if not isinstance(attack, Mapping) or not isinstance(dataset, Mapping) or attack.get("attack_file"):
        return None
    planted = attack.get("n_passages", 1)
    if isinstance(planted, (int, float)) and not isinstance(planted, bool) and planted <= 0:
        return None
    questions = dataset.get("questions")
    target = questions.get("_target_") if isinstance(questions, Mapping) else None
    if not target or getattr(component_class(str(target)), "has_answers", True):
        return None
    option = getattr(component_class(str(attack.get("_target_"))), "option", None) or "attack"
    return (f"attack={option} sets an incorrect target answer per question, but dataset={dataset.get('name')}'s "
            f"questions have no gold answers, so nothing would be planted: attack a QA dataset (hotpotqa, "
            f"squad_v1, liverag_dev, ...) or give the targets in attack.attack_file")


def check_attack_reaches_index(cfg: DictConfig) -> None:
    """The pipeline's guard: `unreached_index` of the run's config raised as a one-line ConfigError."""
    if not cfg.get("attack"):
        return
    problem = unreached_index({"attack": OmegaConf.to_container(cfg.attack, resolve=True),
                               "retriever": OmegaConf.to_container(cfg.retriever, resolve=True)})
    if problem:
        raise ConfigError(problem)


def add_attack_metrics(cfg: DictConfig) -> list[str]:
    """Add to `cfg.metrics` the metric options the configured attack names (`attack.metrics`) that it lacks, read
    from conf/metrics/<name>.yaml; returns the names added (none without an attack). Idempotent."""
    from rag.core.entry import CONF_DIR

    attack = cfg.get("attack")
    names = list(attack.get("metrics") or []) if isinstance(attack, DictConfig) else []
    present = cfg.get("metrics")
    missing = [str(n) for n in names if not (isinstance(present, DictConfig) and str(n) in present)]
    if not missing:
        return []
    with open_dict(cfg):
        if not isinstance(cfg.get("metrics"), DictConfig):
            cfg.metrics = {}
        with open_dict(cfg.metrics):
            for name in missing:
                path = CONF_DIR / "metrics" / f"{name}.yaml"
                if not path.is_file():
                    raise ConfigError(f"attack.metrics: no metric option {name!r} (conf/metrics/{name}.yaml)")
                cfg.metrics[name] = OmegaConf.load(path)
    return missing
