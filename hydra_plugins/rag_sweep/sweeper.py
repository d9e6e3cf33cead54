"""Hydra's basic sweeper, plus a preflight over every cell before any cell is launched.

`conf/hydra/sweeper/checked.yaml` makes this the default sweeper. It expands the sweep exactly as the basic
sweeper does (its own `split_arguments`, with `hydra.sweeper.params`), composes each cell with Hydra's config
loader (as every launcher will), and checks them with `rag.preflight`: one line per problem, exit status 2,
nothing launched or submitted, whichever launcher (basic, local, SLURM) is configured. It also masks secrets
passed as overrides in `multirun.yaml` right after Hydra writes it.

A cell that fails with a one-line error (`rag.core.errors.ONE_LINE_ERRORS`: it logged its line already) does not
stop the sweep with a traceback: the other cells run, the sweep's callbacks (the summary of what completed) run,
and the sweep ends with one line counting the failed cells and exit status 2. An unexpected exception (a bug)
still ends the sweep with its traceback.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobStatus
from omegaconf import OmegaConf

log = logging.getLogger(__name__)


class CheckedSweeper(BasicSweeper):
    def cells(self, arguments: list[str]) -> list[list[str]]:
        """Every cell's overrides in job order, as `BasicSweeper.sweep` will launch them."""
        params = self._parse_config()
        params.extend(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        batches = self.split_arguments(parser.parse_overrides(params), None)
        return [list(job) for batch in batches for job in batch]

    def preflight(self, arguments: list[str]) -> list[str]:
        from rag.preflight import check_cells

        loader = self.hydra_context.config_loader
        cfgs = [loader.load_sweep_config(master_config=self.config, sweep_overrides=cell)
                for cell in self.cells(arguments)]
        return [problem.line(len(cfgs)) for problem in check_cells(cfgs)]

    def sweep(self, arguments: list[str]) -> Any:
        from rag.core.secrets import mask_text

        problems = self.preflight(list(arguments))
        if problems:
            for line in problems:
                print(mask_text(line), file=sys.stderr)
            print(f"Preflight found {len(problems)} problem(s); no cell was launched", file=sys.stderr, flush=True)
            sys.exit(2)
        return self.launch_all(arguments)

    def launch_all(self, arguments: list[str]) -> Any:
        """`BasicSweeper.sweep`'s loop (multirun.yaml, then each batch validated and launched), except that a
        cell failed with a one-line error is counted, not raised: the other batches still run, then
        `end_failed_sweep`. (The launcher itself is left untouched: the SLURM launcher pickles itself into
        its jobs.)"""
        params = self._parse_config()
        params.extend(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        self.overrides = self.split_arguments(parser.parse_overrides(params), self.max_batch_size)
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        returns, failed, initial_job_idx = [], [], 0
        while not self.is_done():
            batch = self.get_job_batch()
            self.validate_batch_is_legal(batch)
            results = self.launcher.launch(batch, initial_job_idx=initial_job_idx)
            for position, result in enumerate(results):
                if result.status == JobStatus.FAILED and _said_in_one_line(result._return_value):
                    failed.append(initial_job_idx + position)
                else:
                    _ = result.return_value  # an unexpected failure (a bug) raises with its traceback
            initial_job_idx += len(batch)
            returns.append(results)
        if failed:
            self.end_failed_sweep(failed, initial_job_idx)
        return returns

    def end_failed_sweep(self, failed: list[int], n_cells: int) -> None:
        """The sweep's callbacks (Hydra runs them only after a sweep without failures; the SLURM launcher may have
        run them already), then one line, exit status 2."""
        from hydra._internal.callbacks import Callbacks

        if not getattr(self.launcher, "ran_end_callbacks", False):
            try:
                Callbacks(self.config).on_multirun_end(config=self.config, config_name=None)
            except Exception:  # noqa: BLE001 - the cells' results are on disk; never hide the sweep's failure
                log.exception("sweep callbacks failed")
        sweep_dir = self.config.hydra.sweep.dir
        print(f"sweep: {len(failed)} of {n_cells} cell(s) failed ({', '.join(map(str, failed))}), each said why in "
              f"one line above; `python -m jobs.status {sweep_dir}` lists them, `python -m jobs.resubmit "
              f"{sweep_dir}` reruns them", file=sys.stderr, flush=True)
        sys.exit(2)

    def validate_batch_is_legal(self, batch: Any) -> None:
        """Called after `multirun.yaml` is written and before the launch: mask the secrets in it first."""
        from rag.core.secrets import add_known_secrets, mask_file, secrets_in_overrides

        known = secrets_in_overrides(self.config.hydra.overrides.task)
        add_known_secrets(known)
        try:
            mask_file(Path(str(self.config.hydra.sweep.dir)) / "multirun.yaml", known)
        except OSError as err:
            log.warning("cannot mask secrets in multirun.yaml: %s", err)
        super().validate_batch_is_legal(batch)


def _said_in_one_line(err: Any) -> bool:
    """A cell's error that its own one line already explained (the cell logged it), or a job the SLURM launcher
    reported as ended without a result."""
    from rag.core.errors import ONE_LINE_ERRORS

    return isinstance(err, ONE_LINE_ERRORS) or type(err).__name__ == "JobEndedWithoutResult"
