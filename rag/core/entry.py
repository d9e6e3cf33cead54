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

from rag.core.secrets import KEPT_IN_CONFIG, refuse_secret_arguments, value_problem

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


def guard_command_line(config_name: str, argv: list[str] | None = None) -> None:
    """The first act of every entry point: secrets by value and unchosen `???` groups end here, one line each."""
    argv = list(sys.argv[1:] if argv is None else argv)
    refuse_secret_arguments(argv)
    _fail(missing_groups(config_name, argv))


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
            problem = value_problem(where, value, KEPT_IN_CONFIG)
            if problem:
                secrets.append(problem)
    return missing + secrets


class EntryChecks(Callback):
    """Hydra callback: `config_problems` before a run or a multirun writes anything."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        _fail(config_problems(config))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _fail(config_problems(config))
