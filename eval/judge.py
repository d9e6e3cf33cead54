"""Re-judge finished runs without regenerating: `python -m eval.judge RUN_DIR... --judge liverag`.

Reads each run's `answers.jsonl`, runs the judges and nuggets of a `conf/judge/*.yaml` (by name or path), and
writes the judged records and the merged `metrics.json` back atomically (or under `--out`). The judge config's
`${llm}` resolves to the run's own LLM config (from Hydra's `.hydra/config.yaml` in the run folder) unless
`--llm conf/llm/<name>.yaml` names another; `--set judges.0.params.max_tokens=64` overrides any judge key.

Example:
    python -m eval.judge outputs/2025-06-01/12-00-00 --judge full --llm conf/llm/gemma3_27b_vllm.yaml
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from eval.engines import build_engine, llm_key, to_plain
from eval.hook import evaluate_records
from rag.core.io import atomic_write_json, atomic_write_jsonl, read_jsonl
from rag.llm.base import LLMEngine

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
JUDGE_CONF_DIR = REPO_ROOT / "conf" / "judge"


def load_yaml(name_or_path: str, conf_dir: Path) -> DictConfig:
    """A YAML config by path, or by name from the project's config group folder."""
    path = Path(name_or_path)
    if not path.is_file():
        path = conf_dir / f"{name_or_path.removesuffix('.yaml')}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"no config {name_or_path!r} (looked for a file and in {conf_dir})")
    cfg = OmegaConf.load(path)
    if not isinstance(cfg, DictConfig):
        raise ValueError(f"{path}: expected a mapping")
    # a Hydra group file may carry a `defaults` list; it means nothing outside Hydra
    if "defaults" in cfg:
        cfg = OmegaConf.create({k: v for k, v in cfg.items() if k != "defaults"})
    return cfg


def run_config(run_dir: Path) -> DictConfig:
    """The run's composed config, as Hydra saved it (empty when the run folder has none)."""
    for candidate in (run_dir / ".hydra" / "config.yaml", run_dir / "config.yaml"):
        if candidate.is_file():
            cfg = OmegaConf.load(candidate)
            if isinstance(cfg, DictConfig):
                return cfg
    return OmegaConf.create({})


def compose(run_dir: Path, judge: str, llm: str | None, overrides: Sequence[str]) -> DictConfig:
    """Root config {run's config..., llm, judge} so that `${llm}` and `${paths...}` resolve as in the pipeline."""
    root = run_config(run_dir)
    root = OmegaConf.create({k: v for k, v in OmegaConf.to_container(root).items() if k != "judge"})
    if llm is not None:
        root.llm = load_yaml(llm, REPO_ROOT / "conf" / "llm")
    root.judge = load_yaml(judge, JUDGE_CONF_DIR)
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set expects key=value, got {item!r}")
        # values are read as YAML (numbers, booleans, {dicts}); list items are addressed by index: judges.0.x
        OmegaConf.update(root.judge, key.strip(), yaml.safe_load(value), merge=True)
    return root


def _run_cache_dir(root: DictConfig) -> Path:
    """The run's `paths.cache_dir`; ./cache when it is absent or uses a resolver that needs Hydra running."""
    try:
        value = OmegaConf.select(root, "paths.cache_dir", default=None)
    except Exception as err:  # e.g. ${hydra:runtime.cwd} outside a Hydra app
        log.warning("cannot resolve the run's paths.cache_dir (%s); using ./cache (or pass --cache-dir)", err)
        value = None
    return Path(value or "cache")


def _llm_cfgs(judge_cfg: Any) -> list[Any]:
    cfg = to_plain(judge_cfg) or {}
    out = [j["llm"] for j in cfg.get("judges") or [] if j.get("enabled", True) and j.get("llm")]
    if (cfg.get("nuggets") or {}).get("enabled") and cfg["nuggets"].get("llm"):
        out.append(cfg["nuggets"]["llm"])
    if (cfg.get("crucible") or {}).get("enabled") and cfg["crucible"].get("llm"):
        out.append(cfg["crucible"]["llm"])
    return out


def judge_run(run_dir: Path, judge_cfg: Any, cache_dir: Path, out_dir: Path,
              engines: dict[str, LLMEngine]) -> dict[str, Any]:
    """Judge one run folder; returns its merged metrics."""
    answers = run_dir / "answers.jsonl"
    if not answers.is_file():
        raise FileNotFoundError(f"{run_dir}: no answers.jsonl")
    records = read_jsonl(answers)
    metrics = evaluate_records(judge_cfg, records, out_dir, cache_dir, engines=engines)
    old = {}
    if (run_dir / "metrics.json").is_file():
        old = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    merged = {**old, **metrics}
    atomic_write_jsonl(out_dir / "answers.jsonl", records)
    atomic_write_json(out_dir / "metrics.json", merged)
    return merged


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.judge", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", nargs="+", type=Path, help="run folders holding answers.jsonl")
    parser.add_argument("--judge", default="liverag", help="conf/judge name or a judge YAML path")
    parser.add_argument("--llm", default=None, help="conf/llm name or an LLM YAML path for `${llm}`")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="cache root (default: the run's paths.cache_dir, else ./cache)")
    parser.add_argument("--out", type=Path, default=None,
                        help="write here instead of in place (one run: this folder; several: OUT/<run name>)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="judge config override as dotted key=value (repeatable)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    engines: dict[str, LLMEngine] = {}
    try:
        for run_dir in args.run_dirs:
            root = compose(run_dir, args.judge, args.llm, args.overrides)
            try:
                to_plain(root.judge)
            except InterpolationResolutionError as err:
                parser.error(f"{run_dir}: cannot resolve the judge config ({err}); the run folder has no "
                             f"saved `llm` config, so name one with --llm")
            cache_dir = args.cache_dir or _run_cache_dir(root)
            for llm_cfg in _llm_cfgs(root.judge):  # engines shared across runs: each model loads once
                key = llm_key(llm_cfg)
                if key not in engines:
                    engines[key] = build_engine(llm_cfg, cache_dir)
            out_dir = run_dir if args.out is None else (args.out if len(args.run_dirs) == 1
                                                        else args.out / run_dir.name)
            metrics = judge_run(run_dir, root.judge, cache_dir, out_dir, engines)
            shown = {k: v for k, v in metrics.items() if k.startswith(("judge/", "nuggets/", "crucible/"))
                     and not any(s in k for s in ("_share_", "_single", "_multi"))}
            print(f"{out_dir}: " + json.dumps(shown, indent=1, default=str))
    finally:
        for engine in engines.values():
            engine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
