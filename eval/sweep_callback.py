"""Hydra callback: write the sweep summary (CSV, Markdown, one W&B run) when a multirun ends.

Registered by `conf/hydra/callbacks/sweep_summary.yaml` (`hydra/callbacks: sweep_summary` in config.yaml's
defaults). Hydra calls `on_multirun_end` only when every cell succeeded; after failures run
`python -m eval.summary SWEEP_DIR` by hand (it marks failed and missing cells).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)


class SweepSummaryCallback(Callback):
    def __init__(self, enabled: bool = True, wandb: bool = True, agreement: list[str] | None = None,
                 bootstrap: int = 200, agreement_reference: str = "auto", significance: Any = None):
        # keep construction cheap: the callback is pickled into every submitit job
        self.enabled, self.wandb, self.bootstrap = enabled, wandb, bootstrap
        #: eval.significance.Settings as a mapping (compare, baseline, correction, alpha, ...)
        self.significance = dict(significance or {})
        self.agreement_reference = agreement_reference
        self.agreement = list(agreement or [])

    def _wandb_settings(self, config: DictConfig) -> dict[str, Any] | bool:
        """The sweep's own logger settings: W&B only when the cells logged to W&B."""
        logger = config.get("logger")
        if not self.wandb or logger is None or not str(logger.get("_target_", "")).endswith("WandbLogger"):
            return False
        resolved = OmegaConf.to_container(logger, resolve=True)
        return {k: resolved.get(k) for k in ("project", "entity", "mode")}

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if not self.enabled:
            return
        from eval.summary import summarize

        sweep_dir = Path(str(config.hydra.sweep.dir))
        try:
            summary = summarize(sweep_dir, wandb=self._wandb_settings(config), agreement=self.agreement,
                                n_boot=self.bootstrap, agreement_reference=self.agreement_reference,
                                significance=self.significance)
        except Exception:  # the cells' results are on disk already: never fail the sweep over its summary
            log.exception("sweep summary failed; rerun `python -m eval.summary %s`", sweep_dir)
            return
        log.info("sweep summary: %d of %d cells complete -> %s", summary.n_complete, len(summary.rows),
                 summary.files.get("markdown"))
        from rag.report.build import report_after_sweep

        report_after_sweep(sweep_dir)  # figures and report.md in SWEEP_DIR/report/; logs, never raises
