"""What the scheduler and submitit know about a sweep's jobs.

Sources, best first: `sacct` (needs SLURM accounting), `squeue` (pending and running jobs), `scontrol show job`
(recently finished jobs, kept for MinJobAge), then submitit's own files under `SWEEP_DIR/.submitit/<job id>/`
(`*_result.pkl` says success or error, `*_log.err` holds the traceback). Local (submitit_local) job ids are
process ids, checked through /proc.
"""

from __future__ import annotations

import logging
import pickle
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: SLURM states of a job that may still produce results: never resubmit these
ACTIVE_STATES = {"PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "COMPLETING",
                 "RESIZING", "SUSPENDED", "SIGNALING", "STAGE_OUT"}


@dataclass
class SubmititJob:
    """One submitit job folder: `.submitit/<job id>/` with logs, the submission and (when done) the result."""

    job_id: str
    folder: Path
    #: the sweep's cell numbers this job runs (from the pickled submission; several for a pack), when readable
    nums: list[int] = field(default_factory=list)
    #: "success" / "error" from the result pickle; None while running or when killed hard
    outcome: str | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def _log(self, suffix: str) -> Path | None:
        found = sorted(self.folder.glob(f"{self.job_id}_*_{suffix}"))
        return found[0] if found else None

    @property
    def stderr(self) -> Path | None:
        return self._log("log.err")

    @property
    def stdout(self) -> Path | None:
        return self._log("log.out")


def _read_result(path: Path) -> tuple[str | None, str | None]:
    try:
        with open(path, "rb") as handle:
            outcome, payload = pickle.load(handle)
    except Exception as err:  # noqa: BLE001 - unreadable pickle: report it, do not crash the status
        return "unreadable", f"cannot read {path.name}: {err}"
    return str(outcome), (payload if outcome == "error" and isinstance(payload, str) else None)


def _read_nums(path: Path) -> list[int]:
    """Cell numbers from the pickled submission: the launcher's __call__ args are (overrides, key, num, ...);
    a pack's (`CellPack`) are ([(overrides, key, num, job id), ...], state)."""
    try:
        with open(path, "rb") as handle:
            delayed = pickle.load(handle)
        args = getattr(delayed, "args", ())
        if len(args) > 2:
            return [int(args[2])]
        if args and isinstance(args[0], list | tuple):
            return [int(cell[2]) for cell in args[0]]
        return []
    except Exception as err:  # noqa: BLE001 - e.g. pickled by another environment
        log.debug("cannot read %s: %s", path, err)
        return []


def submitit_jobs(sweep_dir: Path) -> list[SubmititJob]:
    """Job folders under SWEEP_DIR/.submitit, one per job (array task), newest job id last."""
    root = sweep_dir / ".submitit"
    jobs = []
    if not root.is_dir():
        return jobs
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and "%" not in p.name):
        if not any(f.name.startswith(f"{folder.name}_") and not f.name.endswith("_submission.sh")
                   for f in folder.iterdir()):
            continue  # the array's own folder holds only the sbatch script
        job = SubmititJob(job_id=folder.name, folder=folder)
        result = folder / f"{folder.name}_0_result.pkl"
        if result.is_file():
            job.outcome, job.error = _read_result(result)
        submitted = folder / f"{folder.name}_submitted.pkl"
        if submitted.is_file():
            job.nums = _read_nums(submitted)
        jobs.append(job)
    jobs.sort(key=lambda j: _sort_key(j.job_id))
    return jobs


def _sort_key(job_id: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", job_id)) or (0,)


def _run(cmd: list[str], timeout: float = 20) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


_SLURM: bool | None = None


def slurm_available() -> bool:
    """True when a SLURM controller answers (`squeue` works)."""
    global _SLURM
    if _SLURM is None:
        _SLURM = _run(["squeue", "-h", "-o", "%i"], timeout=10) is not None
    return _SLURM


def _process_state(pid: str) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "ENDED"
    return "ENDED" if stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X") else "RUNNING"


def job_states(job_ids: list[str], local: bool = False) -> dict[str, str]:
    """Scheduler state per job id (upper case, e.g. RUNNING, COMPLETED, FAILED, TIMEOUT); unknown ids absent."""
    ids = [j for j in dict.fromkeys(job_ids) if j]
    if not ids:
        return {}
    if local or not slurm_available():
        return {j: _process_state(j) for j in ids if j.isdigit()}
    states: dict[str, str] = {}
    out = _run(["sacct", "-n", "-P", "-X", "-o", "JobID,State", "-j", ",".join(ids)])
    if out:
        for line in out.splitlines():
            job, _, state = line.partition("|")
            if job in ids and state:
                states[job] = state.split()[0].upper()
    missing = [j for j in ids if j not in states]
    if missing:
        out = _run(["squeue", "-h", "-r", "-o", "%i|%T"]) or ""
        for line in out.splitlines():
            job, _, state = line.partition("|")
            if job in missing:
                states[job] = state.strip().upper()
    for job in [j for j in ids if j not in states]:
        out = _run(["scontrol", "show", "job", "-o", job], timeout=10)
        match = re.search(r"JobState=(\S+)", out or "")
        if match:
            states[job] = match.group(1).upper()
    return states


def tail(path: Path | None, lines: int = 20) -> str:
    """Last lines of a (log) file, without progress-bar carriage-return noise."""
    if path is None or not path.is_file():
        return ""
    with open(path, "rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        handle.seek(max(0, size - 64_000))
        text = handle.read().decode("utf-8", errors="replace")
    cleaned = [line.rsplit("\r", 1)[-1].rstrip() for line in text.splitlines()]
    return "\n".join([line for line in cleaned if line][-lines:])
