"""Hydra callback: write the sweep summary (CSV, Markdown, one W&B run) when a multirun ends.

Registered by `conf/hydra/callbacks/sweep_summary.yaml` (`hydra/callbacks: sweep_summary` in config.yaml's
defaults). Hydra calls `on_multirun_end` only when every cell succeeded; after failures run
`python -m eval.summary SWEEP_DIR` by hand (it marks failed and missing cells).

With `pool: true` the sweep pools at its end: `python -m eval.pool sweep_dir=SWEEP` (one nugget set per topic
from the cells' UMBRELA-graded passages, every nugget-based judge of every cell re-scored against it, then the
summary), run as a child process on the machine that launched the sweep (for a SLURM sweep: where the launcher
waited for its jobs), with `pool_overrides` appended.

With `battles: true` the sweep's cells battle at its end, before the summary: `python -m eval.battles SWEEP
--no-summary` with `battles_overrides` appended (TREC RAG 2026's system-by-system comparison: an LLM judge, each
pair of cells per topic in both orders), so the summary that follows (and its W&B run) has the battle ranking in
its agreement table and summary.md, and the report its ratings figure.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)


#: the project root, put on the pooling child's path so it runs this checkout's code
ROOT = Path(__file__).resolve().parents[1]


class SweepSummaryCallback(Callback):
    def __init__(self, enabled: bool = True, wandb: bool = True, agreement: list[str] | None = None,
                 bootstrap: int = 200, agreement_reference: str = "auto", significance: Any = None,
                 pool: bool = False, pool_overrides: list[str] | None = None, battles: bool = False,
                 battles_overrides: list[str] | None = None):
        # keep construction cheap: the callback is pickled into every submitit job
        self.enabled, self.wandb, self.bootstrap = enabled, wandb, bootstrap
        #: eval.significance.Settings as a mapping (compare, baseline, correction, alpha, ...)
        self.significance = dict(significance or {})
        self.agreement_reference = agreement_reference
        self.agreement = list(agreement or [])
        self.pool = pool
        self.pool_overrides = [str(o) for o in pool_overrides or []]
        self.battles = battles
        self.battles_overrides = [str(o) for o in battles_overrides or []]

    @staticmethod
    def _child(command: list[str], what: str, rerun: str) -> bool:
        """Run one of the project's commands as a child process of this checkout; False (logged) when it failed."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                                           if p)}
        log.info("%s: %s", what, " ".join(command[1:]))
        done = subprocess.run(command, cwd=ROOT, env=env, check=False)
        if done.returncode:
            log.error("%s failed (exit %d); the summary is written without it; rerun `%s`", what, done.returncode,
                      rerun)
        return done.returncode == 0

    def battle_sweep(self, sweep_dir: Path) -> bool:
        """`python -m eval.battles` on the finished sweep, without its summary (the callback writes that next)."""
        return self._child([sys.executable, "-m", "eval.battles", str(sweep_dir), "--no-summary",
                            *self.battles_overrides], "the cells' battles", f"python -m eval.battles {sweep_dir}")

    def pool_sweep(self, sweep_dir: Path, wandb: bool) -> bool:
        """`python -m eval.pool` on the finished sweep (it writes the summary too); False when it failed."""
        command = [sys.executable, "-m", "eval.pool", f"sweep_dir={sweep_dir}", f"summary.wandb={str(wandb).lower()}",
                   f"summary.bootstrap={self.bootstrap}", f"summary.agreement_reference={self.agreement_reference}",
                   *self.pool_overrides]
        return self._child(command, "pooling the sweep's nuggets", f"python -m eval.pool sweep_dir={sweep_dir}")

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
        if self.battles:
            self.battle_sweep(sweep_dir)
        if self.pool and self.pool_sweep(sweep_dir, wandb=bool(self._wandb_settings(config))):
            from rag.report.build import report_after_sweep

            report_after_sweep(sweep_dir)
            return
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
