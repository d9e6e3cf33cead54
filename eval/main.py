"""Re-judge finished runs: a second Hydra entry point over the same config groups as the pipeline.

    python -m eval.main run_dir=RUN judge=[liverag]                 # the run's own llm judges
    python -m eval.main run_dir=RUN judge=full llm=gemma3_27b       # another model (conf/llm/gemma3_27b.yaml)
    python -m eval.main run_dir=RUN judge=[liverag] judge.liverag.params.max_tokens=32 out_dir=/tmp/rejudged

Reads the run's `answers.jsonl` (old runs included: the record format is backward compatible), takes the run's
`llm`, `seed` and `dataset` from its saved config where this command does not set them, runs the judges the
`judge` group composed, and writes the judged records, the merged `metrics.json` (metrics of the judges run
here replace their old values; others are kept) and `eval_report.md` atomically. Same records, same judge
config and the response cache give the same scores as judging inside the pipeline.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf, open_dict

from rag.core.errors import ONE_LINE_ERRORS, ConfigError, MissingDataError
from rag.core.overrides import quote_folder_overrides
from rag.folders import RunFolder, measured_work
from rag.judge.base import Judge
from rag.judge.run import build_judges, evaluate_records
from rag.llm.factory import EngineFactory

log = logging.getLogger(__name__)

#: what a run's saved config lends to re-judging when this command does not set it
FROM_RUN = ("llm", "seed", "dataset")


def saved_run_config(run_dir: Path) -> dict[str, Any]:
    """The run's composed config: config.json (resolved, as the pipeline wrote it), else Hydra's copy."""
    folder = RunFolder(run_dir)
    if folder.config_path.is_file():
        return folder.config()
    hydra_copy = run_dir / ".hydra" / "config.yaml"
    if hydra_copy.is_file():
        return OmegaConf.to_container(OmegaConf.load(hydra_copy), resolve=False)  # type: ignore[return-value]
    return {}


def complete_from_run(cfg: DictConfig, run_dir: Path) -> DictConfig:
    """Fill `llm`, `seed`, `dataset` from the run where missing; fail clearly when no `llm` can be found."""
    saved = saved_run_config(run_dir)
    with open_dict(cfg):
        for key in FROM_RUN:
            if OmegaConf.select(cfg, key, default=None) is None and saved.get(key) is not None:
                cfg[key] = saved[key]
    if OmegaConf.select(cfg, "llm", default=None) is None:
        raise ConfigError(f"{run_dir}: the run folder has no saved config with an `llm`; name the judges' model "
                          f"with llm=<conf/llm name> or judge.llm={{...}}")
    return cfg


def run_cache_dir(cfg: DictConfig, run_dir: Path) -> Path:
    """`cache_dir` if set, else the run's own paths.cache_dir (resolved in its config.json), else paths.cache_dir."""
    if cfg.get("cache_dir"):
        return Path(str(cfg.cache_dir))
    saved = saved_run_config(run_dir).get("paths") or {}
    value = saved.get("cache_dir")
    if isinstance(value, str) and "${" not in value:
        return Path(value)
    return Path(str(cfg.paths.cache_dir))


def _stale(key: str, judges: list[Judge]) -> bool:
    """Old metrics of a judge that runs again (under its prefix, and its judge noise `noise/<prefix>...`), and
    the old evaluation cost."""
    return key.startswith(("eval/", *(j.metric_prefix for j in judges), *(f"noise/{j.metric_prefix}" for j in judges)))


def rejudge(cfg: DictConfig, factory: EngineFactory | None = None) -> dict[str, Any]:
    """Judge one run folder as `cfg` says; returns the merged metrics."""
    run_dir = Path(str(cfg.run_dir)).expanduser()
    run = RunFolder(run_dir)
    if not run.has_answers:
        raise MissingDataError(f"run_dir={run_dir}: no {RunFolder.ANSWERS} (is this a finished run folder?)")
    cfg = complete_from_run(cfg, run_dir)
    out_dir = Path(str(cfg.out_dir)).expanduser() if cfg.get("out_dir") else run_dir
    cache_dir = run_cache_dir(cfg, run_dir)
    judges = build_judges(cfg.judge)
    if not judges:
        raise ConfigError("judge: no judges selected; e.g. judge=[liverag] or judge=full")
    out = RunFolder(out_dir)
    with out.held():  # one execution writes a folder at a time: never a run still writing it, or another judging
        records = run.records()
        own = factory is None
        engines = factory or EngineFactory(cache_dir, cache_enabled=bool(OmegaConf.select(
            cfg, "cache.llm_responses", default=True)))
        try:
            metrics = evaluate_records(cfg.judge, records, out_dir, cache_dir, engines)
        finally:
            if own:
                engines.close()
        old = run.metrics()
        merged = {**{k: v for k, v in old.items() if not _stale(k, judges)}, **metrics}
        # judging from the response cache alone keeps the judges' measured cost (issue 36: no measurement lost)
        merged = measured_work(old, merged, answered=0)
        out.write_answers(records)
        out.write_metrics(merged)
    return merged


def shown(metrics: dict[str, Any]) -> dict[str, Any]:
    """The judge and nugget means over all answers, and the evaluation cost, for the terminal."""
    return {k: v for k, v in metrics.items()
            if (k.startswith(("judge/", "nuggets/")) and k.endswith("/all") and "_share_" not in k)
            or k.startswith("eval/")}


@hydra.main(version_base="1.3", config_path="../conf", config_name="eval")
def main(cfg: DictConfig) -> None:
    try:
        metrics = rejudge(cfg)
    except ONE_LINE_ERRORS as err:
        log.error("%s: %s", type(err).__name__, err)
        raise SystemExit(2) from None
    out = cfg.out_dir or cfg.run_dir
    print(f"{out}: " + json.dumps(shown(metrics), indent=1, default=str), flush=True)


if __name__ == "__main__":
    from rag.core.entry import guard_command_line

    guard_command_line("eval")
    sys.argv[1:] = quote_folder_overrides(sys.argv[1:])  # sweep cell folders contain `=` and `,`
    main()
