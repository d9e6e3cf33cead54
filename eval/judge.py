"""`python -m eval.judge RUN_DIR... --judge liverag`: the earlier command line, now a thin alias of `eval.main`.

Each run folder is re-judged by `eval.main.rejudge` with the config `python -m eval.main run_dir=RUN
judge=[...]` would compose; the judges' engines are shared across the run folders, so each model loads once.

    python -m eval.judge RUN_A RUN_B --judge liverag,nuggets --llm gemma3_27b --set liverag.params.max_tokens=32

`--judge` takes judge names (comma-separated) or `full`; `--llm` a conf/llm name or an LLM YAML file; `--set`
a dotted key under `judge` (`liverag.params.max_tokens=32`, `llm.n_ctx=4096`); `--out` a folder for the results.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf, open_dict

from eval.main import complete_from_run, rejudge, run_cache_dir, shown
from rag.core.errors import ConfigError
from rag.core.overrides import quote_folder_overrides
from rag.core.secrets import refuse_secret_arguments
from rag.llm.factory import EngineFactory

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"


def compose_eval(overrides: Sequence[str]) -> DictConfig:
    """The config `python -m eval.main <overrides>` would run with (Hydra's compose API, same files)."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="eval", overrides=list(overrides))


def _engine_sets(overrides: Sequence[str]) -> dict[str, Any]:
    """`--set llm.<key>=<value>`: settings of the judges' engine (`judge.llm`), which is `${llm}`, the run's own
    llm, read from its config after composition (so Hydra cannot override a key of it); parsed as Hydra parses a
    value. A `--set` without `=` or with a value Hydra cannot parse is one `ConfigError` line."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    found: dict[str, Any] = {}
    for override in overrides:
        if "=" not in override:
            raise ConfigError(f"--set {override}: expected a dotted key under judge and a value, e.g. "
                              f"--set llm.n_ctx=4096")
        if not override.lstrip("+~").startswith("llm."):
            continue
        try:
            [parsed] = OverridesParser.create().parse_overrides([override.lstrip("+~")])
        except HydraException as err:
            raise ConfigError(f"--set {override}: {' '.join(str(err).split())}") from None
        found[override] = parsed
    return found


def _set_engine(cfg: DictConfig, sets: dict[str, Any]) -> None:
    """Apply `--set llm.*` to the judges' engine: `judge.llm` becomes its own copy of the run's llm (resolved),
    with the settings merged in."""
    with open_dict(cfg):
        if OmegaConf.is_interpolation(cfg.judge, "llm"):
            cfg.judge.llm = OmegaConf.create(OmegaConf.to_container(cfg.judge.llm, resolve=True))
        for parsed in sets.values():
            OmegaConf.update(cfg.judge, parsed.key_or_group, parsed.value(), merge=True, force_add=True)


def _one_line(err: Exception) -> int:
    print(f"{type(err).__name__}: {err}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.judge", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", nargs="+", type=Path, help="run folders holding answers.jsonl")
    parser.add_argument("--judge", default="liverag", help="judge names, comma-separated, or `full`")
    parser.add_argument("--llm", default=None, help="conf/llm name or an LLM YAML path (default: the run's)")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="cache root (default: the run's paths.cache_dir, else ./cache)")
    parser.add_argument("--out", type=Path, default=None,
                        help="write here instead of in place (one run: this folder; several: OUT/<run name>)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="override under `judge` as dotted key=value (repeatable)")
    args = parser.parse_args(argv)
    # a secret by value in `--set` (or a key-shaped argument) is refused as eval.main refuses it (rag.core.entry)
    refuse_secret_arguments([*(f"judge.{o}" for o in args.overrides), *map(str, args.run_dirs), args.llm or "",
                             str(args.out or ""), str(args.cache_dir or "")])
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    judge = args.judge if args.judge in ("full", "none") else f"[{args.judge}]"
    llm_file = Path(args.llm) if args.llm and Path(args.llm).is_file() else None
    try:
        engine_sets = _engine_sets(args.overrides)
    except ConfigError as err:
        return _one_line(err)
    base = [f"judge={judge}", *(f"judge.{o}" for o in args.overrides if o not in engine_sets)]
    if args.llm and llm_file is None:
        base.append(f"llm={args.llm.removesuffix('.yaml')}")
    factory: EngineFactory | None = None
    try:
        for run_dir in args.run_dirs:
            overrides = [*quote_folder_overrides([f"run_dir={run_dir}"]), *base]
            if args.cache_dir:
                overrides.append(f"cache_dir={args.cache_dir}")
            if args.out:
                out = args.out if len(args.run_dirs) == 1 else args.out / run_dir.name
                overrides.append(f"out_dir={out}")
            try:
                cfg = compose_eval(overrides)
            except HydraException as err:  # a `--set` of a key the judges' config lacks, or a value Hydra rejects
                return _one_line(ConfigError(f"--set: {' '.join(str(err).split())}"))
            if llm_file is not None:
                with open_dict(cfg):
                    cfg.llm = OmegaConf.load(llm_file)
            if engine_sets:  # the judges' engine is the run's llm: known once the run's config has filled it in
                _set_engine(complete_from_run(cfg, run_dir), engine_sets)
            if factory is None:  # one factory for all runs: each judge model loads once
                factory = EngineFactory(run_cache_dir(complete_from_run(cfg, run_dir), run_dir))
            metrics = rejudge(cfg, factory)
            print(f"{cfg.out_dir or run_dir}: " + json.dumps(shown(metrics), indent=1, default=str))
    except ConfigError as err:
        raise SystemExit(_one_line(err)) from None
    finally:
        if factory is not None:
            factory.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
