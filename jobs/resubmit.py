"""Rerun only the failed and missing cells of a sweep, each into its own folder so that it resumes.

    python -m jobs.resubmit SWEEP_DIR [--launcher slurm|local] [--cells 3 7] [--dry-run] [--refresh]

Each selected cell reruns `python -m rag.main <the cell's overrides> hydra.run.dir=<the cell's folder>`: the
overrides come from the cell's `.hydra/overrides.yaml` (or, for a cell that never started, from expanding the
sweep's overrides in `multirun.yaml`), and the answers already journalled in the folder are kept, not
generated again. Complete cells and cells whose job is still pending or running are left alone.

When the resubmitted cells complete, the sweep's summary and report are written again with the sweep's own
settings (its `hydra.callbacks.sweep_summary`): at once for `--launcher local`; for SLURM, whose jobs end later,
the command says in one line to run `python -m jobs.resubmit SWEEP_DIR --refresh` then (a summary written before
the cells completed still counts them as failed).

`--launcher slurm` (default for SLURM sweeps) submits `jobs/single_run.sbatch` with the sweep's own resources
(partition, account, time, CPUs, memory, GPUs, setup lines from its `hydra.launcher`); `--launcher local`
(default otherwise) runs the cells one after another here. The W&B runs keep the sweep's group
(WANDB_RUN_GROUP). Every submission is recorded in SWEEP_DIR/resubmit.jsonl, which `jobs.status` reads.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jobs.status import RESUBMIT_LOG, CellStatus, is_local_sweep, sweep_status
from rag.core.overrides import quote_override_value
from rag.sweep.cells import SweepFolder

SBATCH_TEMPLATE = Path(__file__).resolve().parent / "single_run.sbatch"
RESUBMIT_STATES = ("failed", "missing", "incomplete")


def select(statuses: Sequence[CellStatus], cells: Sequence[int] = ()) -> list[CellStatus]:
    """Failed and missing cells (optionally only those numbered in `cells`)."""
    chosen = [s for s in statuses if s.state in RESUBMIT_STATES]
    if cells:
        chosen = [s for s in chosen if s.cell.num in set(cells)]
    return chosen


def run_command(status: CellStatus, python: str = sys.executable) -> list[str]:
    """`python -m rag.main` with the cell's overrides, into the cell's own folder (the journal resumes there).

    The cell's own config is rerun, so its fingerprint matches and the folder resumes; a `resume=` override
    of the sweep is dropped (a resubmission never starts a cell afresh)."""
    overrides = [o for o in status.cell.overrides
                 if not o.startswith("hydra.run.dir=") and o.lstrip("+").split("=", 1)[0] != "resume"]
    return [python, "-m", "rag.main", *overrides, f"hydra.run.dir={quote_override_value(str(status.cell.dir))}"]


def _cwd(sweep: SweepFolder, status: CellStatus) -> Path:
    """Where the sweep was launched from (relative data/cache paths resolve against it)."""
    for source in (status.cell.hydra, sweep.master.get("hydra", {})):
        cwd = (source or {}).get("runtime", {}).get("cwd")
        if cwd and Path(cwd).is_dir():
            return Path(cwd)
    return Path.cwd()


def sbatch_options(launcher: dict[str, Any]) -> list[str]:
    """The sweep's submitit SLURM parameters as sbatch options (they override the template's defaults)."""
    opts = []
    simple = {"partition": "--partition", "account": "--account", "qos": "--qos", "constraint": "--constraint",
              "exclude": "--exclude", "gres": "--gres", "cpus_per_task": "--cpus-per-task",
              "gpus_per_node": "--gpus-per-node", "gpus_per_task": "--gpus-per-task",
              "cpus_per_gpu": "--cpus-per-gpu", "mem_per_gpu": "--mem-per-gpu", "mem_per_cpu": "--mem-per-cpu",
              "comment": "--comment"}
    for key, flag in simple.items():
        value = launcher.get(key)
        if value not in (None, "", 0):
            opts.append(f"{flag}={value}")
    if launcher.get("mem_gb"):
        opts.append(f"--mem={int(launcher['mem_gb'])}G")
    if launcher.get("timeout_min"):
        opts.append(f"--time={int(launcher['timeout_min'])}")
    if launcher.get("signal_delay_s"):
        opts.append(f"--signal=B:USR1@{int(launcher['signal_delay_s'])}")
    for key, value in (launcher.get("additional_parameters") or {}).items():
        opts.append(f"--{str(key).replace('_', '-')}={value}")
    return opts


def _env(sweep: SweepFolder, launcher: dict[str, Any]) -> dict[str, str]:
    env = dict(os.environ)
    env["WANDB_RUN_GROUP"] = sweep.group  # same group as the sweep's other runs
    env["RAG_PYTHON"] = sys.executable
    if launcher.get("setup"):
        env["RAG_JOB_SETUP"] = "\n".join(str(line) for line in launcher["setup"])
    if launcher.get("max_num_timeout") is not None:
        env["RAG_MAX_REQUEUE"] = str(int(launcher["max_num_timeout"]))
    return env


def _record(sweep: SweepFolder, entry: dict[str, Any]) -> None:
    """Append to SWEEP_DIR/resubmit.jsonl (one line per submission; jobs.status reads the latest per cell)."""
    with open(sweep.dir / RESUBMIT_LOG, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def submit_slurm(sweep: SweepFolder, status: CellStatus, launcher: dict[str, Any], dry_run: bool = False) -> str:
    logs = sweep.dir / ".resubmit"
    logs.mkdir(exist_ok=True)
    num = status.cell.num if status.cell.num is not None else "x"
    out, err = logs / f"{num}_%j.out", logs / f"{num}_%j.err"
    cmd = ["sbatch", "--parsable", f"--job-name=rag-resubmit-{num}", f"--output={out}", f"--error={err}",
           f"--chdir={_cwd(sweep, status)}", *sbatch_options(launcher), str(SBATCH_TEMPLATE),
           *run_command(status)[3:]]
    print(("DRY RUN: " if dry_run else "") + shlex.join(cmd))
    if dry_run:
        return "dry-run"
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(sweep, launcher), timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"sbatch failed for cell {num}: {proc.stderr.strip()}")
    job_id = proc.stdout.strip().split(";")[0]
    _record(sweep, {"cell": status.cell.name, "num": status.cell.num, "job_id": job_id, "launcher": "slurm",
                    "stdout": str(out).replace("%j", job_id), "stderr": str(err).replace("%j", job_id),
                    "time": dt.datetime.now().isoformat(timespec="seconds")})
    return job_id


def run_local(sweep: SweepFolder, status: CellStatus, launcher: dict[str, Any], dry_run: bool = False) -> str:
    """Run the cell here, in the foreground; returns "ok" or "failed"."""
    logs = sweep.dir / ".resubmit"
    logs.mkdir(exist_ok=True)
    cmd = run_command(status)
    num = status.cell.num if status.cell.num is not None else "x"
    print(("DRY RUN: " if dry_run else "") + shlex.join(cmd))
    if dry_run:
        return "dry-run"
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out, err = logs / f"{num}_local-{stamp}.out", logs / f"{num}_local-{stamp}.err"
    env = _env(sweep, launcher)
    env.pop("RAG_JOB_SETUP", None)  # setup lines are for cluster nodes
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen(cmd, cwd=_cwd(sweep, status), env=env, stdout=stdout, stderr=stderr)
        _record(sweep, {"cell": status.cell.name, "num": status.cell.num, "job_id": str(proc.pid),
                        "launcher": "local", "stdout": str(out), "stderr": str(err),
                        "time": dt.datetime.now().isoformat(timespec="seconds")})
        code = proc.wait()
    return "ok" if code == 0 else "failed"


def refresh(sweep: SweepFolder) -> None:
    """The summary and report the sweep's end wrote, written again now that more cells completed: the sweep's own
    callback settings (agreement, significance, pooling, W&B) from its multirun.yaml, defaults where it had none."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from eval.sweep_callback import SweepSummaryCallback

    master = OmegaConf.create(sweep.master)
    node = OmegaConf.select(master, "hydra.callbacks.sweep_summary")
    callback = instantiate(node) if node is not None else SweepSummaryCallback(wandb=False)
    OmegaConf.update(master, "hydra.sweep.dir", str(sweep.dir), force_add=True)  # not `${now:...}` again
    callback.on_multirun_end(master)


def _refresh_line(sweep_dir: Path) -> str:
    return (f"when the resubmitted cells have completed, write the sweep's summary and report again: "
            f"python -m jobs.resubmit {shlex.quote(str(sweep_dir))} --refresh")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.resubmit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument("--launcher", choices=["slurm", "local"], default=None,
                        help="default: slurm for sweeps launched on SLURM, else local")
    parser.add_argument("--cells", type=int, nargs="*", default=[], help="only these cell numbers")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, submit nothing")
    parser.add_argument("--refresh", action="store_true",
                        help="resubmit nothing: write the summary and report again (after resubmitted cells end)")
    args = parser.parse_args(argv)

    sweep, statuses = sweep_status(args.sweep_dir)
    if args.refresh:
        refresh(sweep)
        complete = sum(s.state == "complete" for s in sweep_status(args.sweep_dir)[1])
        print(f"summary and report written again: {complete} of {len(statuses)} cells complete")
        return 0
    chosen = select(statuses, args.cells)
    busy = [s for s in statuses if s.state in ("pending", "running")]
    complete = sum(s.state == "complete" for s in statuses)
    print(f"{len(chosen)} cell(s) to resubmit; {complete} complete, "
          f"{len(busy)} pending/running (left alone)")
    if not chosen:
        return 0
    launcher_kind = args.launcher or ("local" if is_local_sweep(sweep) else "slurm")
    launcher = sweep.launcher_params()
    failures = 0
    for status in chosen:
        print(f"cell {status.cell.num} ({status.state}, {status.answers} answers kept): {status.cell.name}")
        if launcher_kind == "slurm":
            job_id = submit_slurm(sweep, status, launcher, args.dry_run)
            print("  dry run: nothing submitted" if args.dry_run else f"  submitted job {job_id}")
        else:
            outcome = run_local(sweep, status, launcher, args.dry_run)
            failures += outcome == "failed"
            print("  dry run: nothing run" if args.dry_run else f"  {outcome}")
    if args.dry_run:
        return 0
    if launcher_kind == "local":
        statuses = sweep_status(args.sweep_dir)[1]
        complete = sum(s.state == "complete" for s in statuses)
        if complete == len(statuses):
            refresh(sweep)
            print(f"every cell complete ({complete}): summary and report written again")
        else:
            print(f"{complete} of {len(statuses)} cells complete; {_refresh_line(args.sweep_dir)}")
    else:
        print(_refresh_line(args.sweep_dir))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
