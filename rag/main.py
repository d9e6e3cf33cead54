"""Entry point: `python -m rag.main [overrides]`, or `-m` for a Hydra multirun (sweep).

Each run writes into its Hydra output folder: the composed config, `answers.jsonl` and `metrics.json`.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from rag.core.errors import ConfigError, DataError, MissingDataError, ServiceError
from rag.pipeline import Pipeline, format_metrics_table
from rag.sweep.cells import sweep_group

log = logging.getLogger(__name__)

#: errors whose message already says what is wrong and where: printed as one line, exit status 2
CLEAR_ERRORS = (DataError, MissingDataError, ServiceError, ConfigError, FileNotFoundError)


def run(cfg: DictConfig, run_dir: Path, name: str | None = None, group: str | None = None,
        tags: list[str] | None = None) -> dict[str, Any]:
    """Run the pipeline for one composed config and log it (also used by tests and the sweep launcher)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never download a model silently
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    pipeline = Pipeline(cfg)
    try:
        metrics = pipeline.run(run_dir)
        logger = instantiate(cfg.logger)
        from rag.core.io import read_jsonl

        logger.log_run(OmegaConf.to_container(cfg, resolve=True), metrics, read_jsonl(run_dir / "answers.jsonl"),
                       run_dir, name=name or run_dir.name, group=group, tags=tags)
    finally:
        pipeline.close()
    return metrics


def _sweep_identity() -> tuple[str, str | None, list[str]]:
    """Run name, sweep group and tags (one per overridden value) from Hydra's runtime."""
    hc = HydraConfig.get()
    overrides = [o for o in hc.overrides.task if not o.startswith(("paths.", "hydra."))]
    name = hc.job.override_dirname or hc.job.name
    group = sweep_group(hc.sweep.dir) if hc.mode.name == "MULTIRUN" else None
    return name, group, overrides


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    name, group, tags = _sweep_identity()
    try:
        try:
            metrics = run(cfg, run_dir, name=name, group=group, tags=tags)
        except InstantiationException as err:  # a component's constructor refused its config
            raise (err.__cause__ if isinstance(err.__cause__, CLEAR_ERRORS) else err) from None
    except CLEAR_ERRORS as err:
        # bad input or an unreachable service: one clear message, no stack trace (nothing half-written)
        log.error("%s: %s", type(err).__name__, err)
        if HydraConfig.get().mode.name == "MULTIRUN" or "SUBMITIT_EXECUTOR" in os.environ:
            raise  # launchers record a failed cell from the exception; SystemExit would leave no result
        sys.exit(2)
    print(f"\nRun folder: {run_dir}\n{format_metrics_table(metrics)}", flush=True)
    objective = cfg.get("objective")
    return metrics.get(objective) if objective else None


if __name__ == "__main__":
    main()
