"""What every entry point checks before its work starts, in one place.

Two gates, the same for `rag.main` (run and sweep), `rag.live`, `rag.index`, `rag.datagen`, `eval.main`,
`eval.meta`, `eval.pool`, `rag.llm.serve` and `rag.llm.check_model`:

- `guard_command_line(config_name)`, the first statement under each `if __name__ == "__main__":`, before Hydra
  parses anything: a command line that carries a secret by value is refused (`rag.core.secrets`), and a config
  group the entry point's config leaves as `???` (`llm: ???`) that the command line does not choose is named.
- `EntryChecks`, a Hydra callback every entry point's config lists (conf/hydra/callbacks/entry_checks.yaml): once
  the config is composed and before Hydra writes `.hydra/`, `multirun.yaml` or a folder, every setting still
  `???` and every setting that holds a secret by value (a config file's too) is one line; exit status 2.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, ListConfig, OmegaConf

from rag.core.secrets import KEPT_IN_CONFIG, component_of, refuse_secret_arguments, value_problem

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
#: Hydra's own bookkeeping, never a user's setting (the command line in `hydra.overrides` is checked as argv)
_HYDRA_INTERNAL = ("hydra.runtime", "hydra.overrides", "hydra.help", "hydra.hydra_help")
#: command-line flags after which the primary config is another one (the group check would read the wrong file)
_OTHER_CONFIG = ("-cn", "--config-name", "-cp", "--config-path", "-cd", "--config-dir")


def _fail(lines: Iterable[str]) -> None:
    lines = list(lines)
    if lines:
        for line in lines:
            print(f"ConfigError: {line}", file=sys.stderr, flush=True)
        sys.exit(2)


def _comment_above(text: str, key: str) -> str | None:
    """What a YAML file says of `key: ???` (or `- key: ???`): its inline comment, else the comment lines right
    above it, joined; None when the file does not leave `key` as `???`."""
    lines = text.splitlines()
    pattern = re.compile(rf"^\s*(-\s*)?{re.escape(key)}\s*:\s*\?\?\?\s*(#\s*(?P<inline>.*))?$")
    for i, line in enumerate(lines):
        match = pattern.match(line)
        if match:
            if match.group("inline"):
                return match.group("inline").strip()
            words = []
            for above in reversed(lines[:i]):
                if not above.strip().startswith("#"):
                    break
                words.insert(0, above.strip().lstrip("#").strip())
            return " ".join(words)
    return None


def _missing_source(cfg: DictConfig, where: str) -> str:
    """Where a `???` setting comes from and what its file says of it: `conf/pool.yaml: the sweep folder ...` for a
    top-level key, `conf/labels/qrels.yaml: ...` for a key of a chosen group option, else `the config`."""
    choices = OmegaConf.select(cfg, "hydra.runtime.choices", default=None) or {}
    name = OmegaConf.select(cfg, "hydra.job.config_name", default=None)
    group, _, key = where.rpartition(".")
    candidates = [(f"{name}.yaml", where)] if not group and name else []
    if group and choices.get(group):
        candidates.append((f"{group}/{choices[group]}.yaml", key))
    for relative, key in candidates:
        try:
            said = _comment_above((CONF_DIR / relative).read_text(encoding="utf-8"), key)
        except OSError:
            continue
        if said is not None:
            return f"conf/{relative}" + (f": {said}" if said else "")
    return "the config"


def missing_groups(config_name: str, argv: list[str]) -> list[str]:
    """Config groups left `???` in conf/<config_name>.yaml's defaults that the command line does not choose."""
    import yaml

    if any(arg.split("=", 1)[0] in _OTHER_CONFIG for arg in argv):
        return []
    path = CONF_DIR / f"{config_name}.yaml"
    try:
        text = path.read_text(encoding="utf-8")
        defaults = (yaml.safe_load(text) or {}).get("defaults") or []
    except (OSError, yaml.YAMLError):
        return []
    given = {arg.split("=", 1)[0].lstrip("+~").split("@", 1)[0] for arg in argv if "=" in arg}
    lines = []
    for entry in defaults:
        if not isinstance(entry, dict):
            continue
        for group, choice in entry.items():
            if choice == "???" and str(group) not in given:
                options = sorted(p.stem for p in (CONF_DIR / str(group)).glob("*.yaml"))
                lines.append(f"{group}: required, and no option is chosen (??? in conf/{config_name}.yaml); add "
                             f"{group}=<one of {', '.join(options)}>")
    return lines


_ENV_SETTINGS = ("api_key_env", "user_env", "password_env")


def _yaml(path: Path) -> dict:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def _chosen(defaults: list, node: str) -> Path | None:
    """The file of the option `defaults` chooses for `node` (`- llm: gemma3_270m` -> conf/llm/gemma3_270m.yaml,
    `- /retriever@service: opensearch` -> conf/retriever/opensearch.yaml)."""
    for entry in defaults or []:
        if isinstance(entry, dict):
            for key, choice in entry.items():
                group, _, package = str(key).removeprefix("override ").lstrip("/").partition("@")
                if (package or group) == node and isinstance(choice, str):
                    return CONF_DIR / group / f"{choice}.yaml"
    return None


def command_line_variables(config_name: str, argv: list[str]):
    """`variables(node)`: the `*_env` settings (`api_key_env`, `user_env`, `password_env`) of config node `node`
    (`llm`, `backend.service`) as the command line composes it, read from the group files without Hydra (the
    guard runs before it), so a refusal names the very variable to export (`RAG_LLM_API_KEY` for
    `llm=llamacpp_server`); {} where it cannot tell. A `*_env` given on the command line is not echoed (it may be
    the secret itself)."""
    given = {a.split("=", 1)[0].lstrip("+~"): a.split("=", 1)[1].strip("'\"") for a in argv if "=" in a}
    primary = _yaml(CONF_DIR / f"{config_name}.yaml")

    def variables(node: str) -> dict[str, str]:
        parts = node.split(".") if node else []
        if not parts or not (CONF_DIR / parts[0]).is_dir():
            return {}
        file = CONF_DIR / parts[0] / f"{given[parts[0]]}.yaml" if parts[0] in given else \
            _chosen(primary.get("defaults"), parts[0])
        data = _yaml(file) if file else {}
        for part in parts[1:]:  # `backend.service`: conf/backend/opensearch.yaml's `/retriever@service: opensearch`
            inner, sub = _chosen(data.get("defaults"), part), data.get(part)
            data = {**(_yaml(inner) if inner else {}), **(sub if isinstance(sub, dict) else {})}
        return {key: data[key] for key in _ENV_SETTINGS if isinstance(data.get(key), str)}

    return variables


def null_groups(argv: list[str]) -> list[str]:
    """`llm=null`: a config group chosen as null, which Hydra refuses with a traceback ("Config group override must
    be a string or a list"); one line naming the group's options instead."""
    lines = []
    for arg in argv:
        name, eq, value = arg.partition("=")
        group = name.lstrip("+~").split("@", 1)[0]
        if not eq or name.startswith("-") or value.strip().strip("'\"").lower() not in ("null", "none", "~"):
            continue
        folder = CONF_DIR / group
        if not folder.is_dir() or (folder / f"{value.strip()}.yaml").is_file():
            continue
        options = sorted(p.stem for p in folder.glob("*.yaml"))
        lines.append(f"{arg}: {group} is a config group and null is none of its options; choose one: "
                     f"{group}=<one of {', '.join(options)}>")
    return lines


def guard_command_line(config_name: str, argv: list[str] | None = None) -> None:
    """The first act of every entry point: secrets by value, groups chosen as null and unchosen `???` groups end
    here, one line each."""
    argv = list(sys.argv[1:] if argv is None else argv)
    refuse_secret_arguments(argv, command_line_variables(config_name, argv))
    _fail(null_groups(argv) + missing_groups(config_name, argv))


def _leaves(node: Any, path: str = "") -> Iterator[tuple[str, Any, bool]]:
    """(dotted path, resolved value, is missing) of every leaf; a value that does not resolve yet (`${hydra:...}`
    before the job starts) is skipped."""
    if isinstance(node, DictConfig):
        keys: Iterable[Any] = node.keys()
    elif isinstance(node, ListConfig):
        keys = range(len(node))
    else:
        return
    for key in keys:
        where = f"{path}[{key}]" if isinstance(node, ListConfig) else f"{path}.{key}" if path else str(key)
        if where.startswith(_HYDRA_INTERNAL):
            continue
        if OmegaConf.is_missing(node, key):
            yield where, None, True
            continue
        try:
            value = node[key]
        except Exception:  # noqa: BLE001 - resolved later by Hydra, which reports its own errors
            continue
        if isinstance(value, (DictConfig, ListConfig)):
            if not OmegaConf.is_interpolation(node, key):  # `judge.llm: ${llm}` is checked where it points
                yield from _leaves(value, where)
        else:
            yield where, value, False


def _config_variables(cfg: DictConfig, node: str) -> dict[str, str]:
    """The `*_env` settings of the composed config's node `node` (`llm` -> {"api_key_env": "RAG_LLM_API_KEY"})."""
    found = {}
    for key in _ENV_SETTINGS:
        try:
            value = OmegaConf.select(cfg, f"{node}.{key}", default=None) if node else None
        except Exception:  # noqa: BLE001 - an interpolation that resolves later: the advice stays generic
            value = None
        if isinstance(value, str):
            found[key] = value
    return found


def config_problems(cfg: DictConfig) -> list[str]:
    """Every `???` setting the command line did not fill, and every setting holding a secret, one line each."""
    overridden = {str(o).split("=", 1)[0].lstrip("+~") for o in OmegaConf.select(cfg, "hydra.overrides.task",
                                                                                 default=[]) or []}
    missing, secrets = [], []
    for where, value, is_missing in _leaves(cfg):
        if is_missing:
            # a multirun's swept value fills it in each job; Hydra fills its own (hydra.job.id) at launch
            if where not in overridden and not where.startswith("hydra."):
                missing.append(f"{where}: required, and not given (??? in {_missing_source(cfg, where)}); "
                               f"add {where}=<value>")
        else:
            problem = value_problem(where, value, KEPT_IN_CONFIG, _config_variables(cfg, component_of(where)))
            if problem:
                secrets.append(problem)
    return missing + secrets


class EntryChecks(Callback):
    """Hydra callback: `config_problems` before a run or a multirun writes anything."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        _fail(config_problems(config))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _fail(config_problems(config))
