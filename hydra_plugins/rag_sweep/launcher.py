"""The SLURM launcher of our sweeps: hydra-submitit-launcher's, with a wait that always ends.

submitit learns that a job ended from `sacct`; on a cluster without SLURM accounting a cell cancelled while
pending never writes a result and never shows up in `sacct`, so the stock launcher waited for it forever.
Here every job is watched through `jobs.scheduler.job_states` (sacct, then squeue, then scontrol): a job
that has left the queue without writing its result is given a grace period (results on a shared filesystem
can arrive late) and then counted as ended. When any cell ends without a result, the reason is logged one
line per cell and the sweep's callbacks (the summary of what completed) run before Hydra reports the failure.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
from omegaconf import OmegaConf

log = logging.getLogger(__name__)


class JobEndedWithoutResult(RuntimeError):
    """A sweep cell's job left the scheduler (cancelled, node failure, vanished) without writing a result."""


class WatchedSlurmLauncher(SlurmLauncher):
    #: seconds between scheduler polls, and how long a job may be gone from the queue before its result must exist
    POLL_S = float(os.environ.get("RAG_SWEEP_POLL_S", "5"))
    GRACE_S = float(os.environ.get("RAG_SWEEP_GRACE_S", "60"))

    def _executor(self) -> Any:
        """A submitit executor with the launcher's parameters (as the stock launcher builds it)."""
        import submitit

        params = dict(self.params)
        init = {"folder": params.pop("submitit_folder")}
        if "max_num_timeout" in params:
            init["slurm_max_num_timeout"] = params.pop("max_num_timeout")
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, **init)
        common = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(**{
            (key if key in common else f"{self._EXECUTOR}_{key}"):
                OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
            for key, value in params.items()})
        return executor

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        assert self.config is not None
        executor = self._executor()
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        log.info("Submitit 'slurm' sweep output dir : %s", sweep_dir)
        args = []
        for offset, overrides in enumerate(job_overrides):
            num = initial_job_idx + offset
            log.info("\t#%d : %s", num, " ".join(filter_overrides(overrides)))
            args.append((list(overrides), "hydra.sweep.dir", num, f"job_id_for_{num}", Singleton.get_state()))
        jobs = executor.map_array(self, *zip(*args))
        results = self.wait(jobs, job_overrides, initial_job_idx)
        if any(r.status != JobStatus.COMPLETED for r in results):
            self._run_end_callbacks()
        return results

    def wait(self, jobs: Sequence[Any], job_overrides: Sequence[Sequence[str]],
             initial_job_idx: int) -> list[JobReturn]:
        """Results in job order; a job gone from the scheduler without a result becomes a failed JobReturn."""
        from jobs.scheduler import ACTIVE_STATES, job_states

        results: list[JobReturn | None] = [None] * len(jobs)
        gone_since: dict[int, float] = {}
        last_state: dict[int, str] = {}
        while any(r is None for r in results):
            open_ = [i for i, r in enumerate(results) if r is None]
            states = job_states([jobs[i].job_id for i in open_])
            for i in open_:
                job = jobs[i]
                if job.paths.result_pickle.exists():
                    results[i] = self._result(job, job_overrides[i])
                    continue
                state = states.get(job.job_id)
                if state in ACTIVE_STATES:
                    gone_since.pop(i, None)
                    continue
                last_state[i] = state or "no longer known to the scheduler"
                if time.monotonic() - gone_since.setdefault(i, time.monotonic()) >= self.GRACE_S:
                    num = initial_job_idx + i
                    message = (f"cell {num} (job {job.job_id}) ended without a result: {last_state[i]}; "
                               f"`python -m jobs.resubmit {self.config.hydra.sweep.dir}` reruns it")
                    log.error("%s", message)
                    results[i] = _failed(job_overrides[i], JobEndedWithoutResult(message))
            if any(r is None for r in results):
                time.sleep(self.POLL_S)
        return [r for r in results if r is not None]

    @staticmethod
    def _result(job: Any, overrides: Sequence[str]) -> JobReturn:
        try:
            return job.results()[0]
        except Exception as err:  # noqa: BLE001 - the job itself crashed outside the task (submitit's error)
            return _failed(overrides, err)

    def _run_end_callbacks(self) -> None:
        """Hydra runs `on_multirun_end` only after a fully successful sweep: run it here so the summary of
        the cells that did complete is written before the failure is reported."""
        try:
            from hydra._internal.callbacks import Callbacks

            Callbacks(self.config).on_multirun_end(config=self.config, config_name=None)
        except Exception:  # noqa: BLE001 - the cells' results are on disk; never hide the sweep's failure
            log.exception("sweep callbacks failed")


def _failed(overrides: Sequence[str], err: BaseException) -> JobReturn:
    ret = JobReturn()
    ret.overrides = list(overrides)
    ret.status = JobStatus.FAILED
    ret.return_value = err
    return ret
