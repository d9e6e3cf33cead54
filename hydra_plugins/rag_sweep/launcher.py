"""The SLURM launcher of our sweeps: hydra-submitit-launcher's, with a wait that always ends.

submitit learns that a job ended from `sacct`; on a cluster without SLURM accounting a cell cancelled while
pending never writes a result and never shows up in `sacct`, so the stock launcher waited for it forever.
Here every job is watched through `jobs.scheduler.job_states` (sacct, then squeue, then scontrol): a job
that has left the queue without writing its result is given a grace period (results on a shared filesystem
can arrive late) and then counted as ended. When any cell ends without a result, the reason is logged one
line per cell and the sweep's callbacks (the summary of what completed) run before Hydra reports the failure.

`cells_per_job: N` (default 1) packs cells that share their LLM configs (`llm` and every judge's `llm`) into
jobs of up to N cells, run one after another in one process (`CellPack`): the process keeps loaded engines,
indexes and embedders between them (`rag.reuse`), so a 48-cell sweep over one model loads it 48/N times instead
of 48. Each cell keeps its own folder, resume, W&B run and result; a requeued pack skips the cells it finished.
"""

from __future__ import annotations

import json
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

# registers the launcher's structured config (`rag_slurm`); see that module for why it lives apart
from hydra_plugins.rag_sweep._config import RagSlurmQueueConf  # noqa: F401

log = logging.getLogger(__name__)


class JobEndedWithoutResult(RuntimeError):
    """A sweep cell's job left the scheduler (cancelled, node failure, vanished) without writing a result."""


#: one cell's arguments to the launcher's __call__: (overrides, job_dir_key, job_num, job_id)
CellArgs = tuple[list[str], str, int, str]


class CellPack:
    """Several sweep cells run one after another in one job, each exactly as a job of its own would run it.

    A cell that fails is returned as failed and the next one runs. On a requeue (submitit calls `checkpoint`,
    which pickles this object as it is) the cells already finished are not run again.
    """

    def __init__(self, launcher: SlurmLauncher):
        self.launcher = launcher
        self.finished: dict[int, JobReturn] = {}

    def __call__(self, cells: Sequence[CellArgs], singleton_state: dict[Any, Any]) -> list[JobReturn]:
        returns = []
        for overrides, job_dir_key, num, job_id in cells:
            if num not in self.finished:
                try:
                    self.finished[num] = self.launcher(list(overrides), job_dir_key, num, job_id, singleton_state)
                except Exception as err:  # noqa: BLE001 - one cell's crash must not take its pack-mates down
                    log.exception("cell %d failed", num)
                    self.finished[num] = _failed(overrides, err)
            returns.append(self.finished[num])
        return returns

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        import submitit

        return submitit.helpers.DelayedSubmission(self, *args, **kwargs)


class WatchedSlurmLauncher(SlurmLauncher):
    #: seconds between scheduler polls, and how long a job may be gone from the queue before its result must exist
    POLL_S = float(os.environ.get("RAG_SWEEP_POLL_S", "5"))
    GRACE_S = float(os.environ.get("RAG_SWEEP_GRACE_S", "60"))

    def __init__(self, **params: Any) -> None:
        cells_per_job = params.pop("cells_per_job", 1)
        super().__init__(**params)
        self.cells_per_job = max(1, int(cells_per_job or 1))

    def _executor(self) -> Any:
        """A submitit executor with the launcher's parameters (as the stock launcher builds it)."""
        return executor_for(dict(self.params), self._EXECUTOR)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        assert self.config is not None
        executor = self._executor()
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        log.info("Submitit 'slurm' sweep output dir : %s", sweep_dir)
        cells: list[CellArgs] = []
        for offset, overrides in enumerate(job_overrides):
            num = initial_job_idx + offset
            log.info("\t#%d : %s", num, " ".join(filter_overrides(overrides)))
            cells.append((list(overrides), "hydra.sweep.dir", num, f"job_id_for_{num}"))
        state = Singleton.get_state()
        packs = self.packs(job_overrides) if self.cells_per_job > 1 else [[i] for i in range(len(cells))]
        if all(len(pack) == 1 for pack in packs):
            jobs = executor.map_array(self, *zip(*[(*cells[i], state) for [i] in packs]))
        else:
            log.info("%d cells in %d jobs (cells_per_job=%d, packed by LLM config): %s", len(cells), len(packs),
                     self.cells_per_job, " ".join("+".join(str(cells[i][2]) for i in p) for p in packs))
            jobs = executor.map_array(CellPack(self), [[cells[i] for i in p] for p in packs], [state] * len(packs))
        outcomes = self.wait(jobs, [[cells[i][2] for i in pack] for pack in packs])
        results: list[JobReturn | None] = [None] * len(cells)
        for pack, outcome in zip(packs, outcomes):
            for position, i in enumerate(pack):
                if isinstance(outcome, BaseException):
                    results[i] = _failed(job_overrides[i], outcome)
                else:
                    value = outcome[position] if isinstance(outcome, list) else outcome
                    results[i] = value if isinstance(value, JobReturn) else _failed(job_overrides[i], value)
        done = [r for r in results if r is not None]
        if any(r.status != JobStatus.COMPLETED for r in done):
            self._run_end_callbacks()
        return done

    def packs(self, job_overrides: Sequence[Sequence[str]]) -> list[list[int]]:
        """Cell positions grouped by their LLM configs (first appearance order), each group cut into jobs of at
        most `cells_per_job` cells."""
        assert self.config is not None and self.hydra_context is not None
        loader = self.hydra_context.config_loader
        groups: dict[str, list[int]] = {}
        for i, overrides in enumerate(job_overrides):
            cfg = loader.load_sweep_config(self.config, list(overrides))
            groups.setdefault(llm_identity(cfg), []).append(i)
        size = self.cells_per_job
        return [group[start:start + size] for group in groups.values() for start in range(0, len(group), size)]

    def wait(self, jobs: Sequence[Any], nums: Sequence[Sequence[int]]) -> list[Any]:
        """Per job, in job order: what it returned, or the error of a job gone from the scheduler without a
        result (`nums`: the sweep's cell numbers each job runs)."""
        from jobs.scheduler import ACTIVE_STATES, job_states

        outcomes: list[Any] = [None] * len(jobs)
        pending = set(range(len(jobs)))
        gone_since: dict[int, float] = {}
        last_state: dict[int, str] = {}
        while pending:
            states = job_states([jobs[i].job_id for i in sorted(pending)])
            for i in sorted(pending):
                job = jobs[i]
                if job.paths.result_pickle.exists():
                    outcomes[i] = self._result(job)
                    pending.discard(i)
                    continue
                state = states.get(job.job_id)
                if state in ACTIVE_STATES:
                    gone_since.pop(i, None)
                    continue
                last_state[i] = state or "no longer known to the scheduler"
                if time.monotonic() - gone_since.setdefault(i, time.monotonic()) >= self.GRACE_S:
                    which = ",".join(map(str, nums[i]))
                    message = (f"cell{'s' if len(nums[i]) > 1 else ''} {which} (job {job.job_id}) ended without a "
                               f"result: {last_state[i]}; `python -m jobs.resubmit {self.config.hydra.sweep.dir}` "
                               f"reruns {'them' if len(nums[i]) > 1 else 'it'}")
                    log.error("%s", message)
                    outcomes[i] = JobEndedWithoutResult(message)
                    pending.discard(i)
            if pending:
                time.sleep(self.POLL_S)
        return outcomes

    @staticmethod
    def _result(job: Any) -> Any:
        """The job's return value (a JobReturn, or a pack's list of them), or the error it crashed with."""
        try:
            return job.results()[0]
        except Exception as err:  # noqa: BLE001 - the job itself crashed outside the task (submitit's error)
            return err

    def _run_end_callbacks(self) -> None:
        """Hydra runs `on_multirun_end` only after a fully successful sweep: run it here so the summary of
        the cells that did complete is written before the failure is reported."""
        self.ran_end_callbacks = True  # the sweeper does not run them again (hydra_plugins/rag_sweep/sweeper.py)
        try:
            from hydra._internal.callbacks import Callbacks

            Callbacks(self.config).on_multirun_end(config=self.config, config_name=None)
        except Exception:  # noqa: BLE001 - the cells' results are on disk; never hide the sweep's failure
            log.exception("sweep callbacks failed")


def executor_for(params: dict[str, Any], cluster: str = "slurm") -> Any:
    """A submitit executor from a submitit launcher's settings (`hydra.launcher` without `_target_`), as the stock
    launcher builds it; also the served model's job (`python -m rag.llm.serve hydra/launcher=slurm`)."""
    import submitit

    params = dict(params)
    init = {"folder": params.pop("submitit_folder")}
    if "max_num_timeout" in params:
        init[f"{cluster}_max_num_timeout"] = params.pop("max_num_timeout")
    executor = submitit.AutoExecutor(cluster=cluster, **init)
    common = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{
        (key if key in common else f"{cluster}_{key}"):
            OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
        for key, value in params.items()})
    return executor


def llm_identity(cfg: Any) -> str:
    """The LLM configs a cell loads (its `llm` and every judge's `llm`), as one comparable string."""
    def plain(node: Any) -> Any:
        try:
            return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
        except Exception:  # noqa: BLE001 - an interpolation that resolves only inside the job: compare unresolved
            return OmegaConf.to_container(node, resolve=False)

    judges = OmegaConf.select(cfg, "judge") or {}
    parts = {"llm": plain(OmegaConf.select(cfg, "llm")),
             "judges": {name: plain(OmegaConf.select(cfg, f"judge.{name}.llm")) for name in judges}}
    return json.dumps(parts, sort_keys=True, default=str)


def _failed(overrides: Sequence[str], err: BaseException) -> JobReturn:
    ret = JobReturn()
    ret.overrides = list(overrides)
    ret.status = JobStatus.FAILED
    ret.return_value = err
    return ret
