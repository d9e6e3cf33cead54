"""Chaos on a running SLURM sweep: stop a share of its tasks at random, as failing nodes and preemptions do.

    python -m jobs.chaos SWEEP_DIR [--share 0.25] [--seed 0] [--after-chunks 1] [--timeout 1800]
                               [--resubmit] [-- python -m rag.main -m hydra/launcher=slurm ...]

Given a multirun command after `--`, it starts it with `hydra.sweep.dir=SWEEP_DIR` appended; else it watches a
multirun started beside it on `hydra/launcher=slurm` with `hydra.sweep.dir=SWEEP_DIR`. It waits for the sweep's
`multirun.yaml`, draws `round(share * cells)` victims among the sweep's cells (at least one; seeded), and stops
each once its task is RUNNING and has journalled `--after-chunks` chunks of answers (so it dies mid-generation),
the victims taking the two ways in turn:

- `kill`: SIGKILL to every process of the task, as a failing node or the OOM killer ends it: the processes
  `scontrol listpids` lists on the task's node, killed from an overlapping `srun` step there. Nothing runs after
  it; the answers and work journalled up to the last chunk are what is kept. (`scancel --signal=KILL` is no such
  kill: SLURM turns it into a cancel, SIGTERM first.)
- `preempt`: `scancel JOB`, what SLURM sends a cancelled or preempted job: SIGTERM to every step, then SIGKILL
  `KillWait` seconds later (submitit's job environment lets SIGTERM pass, so the task works on until then).

It returns when no cell of the sweep is pending or running any more, writing one line per stop to
SWEEP_DIR/chaos.jsonl (cell, job, way, answers journalled when stopped, when), and prints them; a victim that
finished before it could be stopped is said, not counted. Then `python -m jobs.resubmit SWEEP_DIR` sends the stopped
cells back, each resuming its journal; with `--resubmit` this command does that itself, waits for those jobs and
writes the sweep's summary and report (`jobs.resubmit --refresh`), exiting 0 only when every cell is complete
(docs/reliability.md, "Chaos").
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from jobs.status import is_local_sweep, sweep_status
from rag.core.errors import ONE_LINE_ERRORS, ConfigError, DataError
from rag.core.io import JsonlJournal
from rag.sweep.cells import load_sweep

CHAOS_LOG = "chaos.jsonl"
WAYS = ("kill", "preempt")
#: run on the task's node inside an overlapping step: SIGKILL to every process of the job but this step's own
KILL_SCRIPT = ('scontrol listpids "$SLURM_JOB_ID" | awk -v me="$SLURM_STEP_ID" '
               '\'NR > 1 && $3 != me && $3 != "extern" {print $1}\' | xargs -r kill -KILL')


@dataclass
class Stop:
    """One stopped task, as chaos.jsonl records it."""

    cell: str
    num: int
    job_id: str
    way: str
    answers_journalled: int
    at: str


def victims(cells: int, share: float, seed: int) -> dict[int, str]:
    """Cell number -> the way it is stopped: `round(share * cells)` cells (at least one), drawn with `seed`, the
    ways in turn over the drawn cells in cell order."""
    if not 0 < share <= 1:
        raise ConfigError(f"--share={share}: a share of the cells in (0, 1]")
    drawn = sorted(random.Random(seed).sample(range(cells), k=min(cells, max(1, round(share * cells)))))
    return {num: WAYS[i % len(WAYS)] for i, num in enumerate(drawn)}


def _slurm(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if done.returncode:
        raise DataError(f"{' '.join(command)} failed: {done.stderr.strip() or done.returncode}")
    return done.stdout


def stop_task(job_id: str, way: str) -> None:
    """Stop one SLURM task (`<array>_<index>` or a job id) `way`'s way (see the module docstring)."""
    if way == "preempt":
        _slurm(["scancel", job_id])
        return
    raw = _slurm(["squeue", "-h", "-j", job_id, "-o", "%A"]).strip()  # an array task's own job id
    if not raw.isdigit():
        raise DataError(f"job {job_id} is not running (squeue: {raw or 'nothing'})")
    _slurm(["srun", f"--jobid={raw}", "--overlap", "--quiet", "bash", "-c", KILL_SCRIPT])


def wait_for_sweep(sweep_dir: Path, deadline: float, poll_s: float) -> int:
    """The number of cells once the multirun has written multirun.yaml and its cells can be counted."""
    while time.monotonic() < deadline:
        if (sweep_dir / "multirun.yaml").is_file():
            sweep = load_sweep(sweep_dir)
            if sweep.cells:
                if is_local_sweep(sweep):
                    raise ConfigError(f"{sweep_dir}: not a SLURM sweep (hydra/launcher=slurm); jobs.chaos stops "
                                      f"SLURM tasks")
                return len(sweep.cells)
        time.sleep(poll_s)
    raise DataError(f"{sweep_dir}: no multirun.yaml before the timeout: is a multirun writing there "
                    f"(hydra.sweep.dir)?")


def run_chaos(sweep_dir: str | Path, share: float = 0.25, seed: int = 0, after_chunks: int = 1,
              timeout_s: float = 1800, poll_s: float = 0.5,
              stop: Callable[[str, str], None] = stop_task,
              ended: Callable[[], bool] | None = None) -> tuple[list[Stop], dict[int, str]]:
    """Stop the drawn victims as they reach `after_chunks` journalled chunks; return the stops and every victim
    (cell number -> way) once no cell is pending or running."""
    sweep_dir = Path(sweep_dir).expanduser().resolve()
    deadline = time.monotonic() + timeout_s
    drawn = victims(wait_for_sweep(sweep_dir, deadline, poll_s), share, seed)
    stops: list[Stop] = []
    log = JsonlJournal(sweep_dir / CHAOS_LOG)
    while time.monotonic() < deadline:
        _, statuses = sweep_status(sweep_dir)
        stopped = {s.num for s in stops}
        for status in statuses:
            cell = status.cell
            if cell.num in drawn and cell.num not in stopped and status.state == "running" and status.job_id \
                    and cell.journal_lines() >= after_chunks:
                stop(status.job_id, drawn[cell.num])
                stops.append(Stop(cell.name, cell.num, status.job_id, drawn[cell.num], cell.journal_lines(),
                                  dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")))
                log.append([asdict(stops[-1])])
        # done when nothing is queued or running and every cell started, or the multirun it launched has ended
        # (a task that failed before it started would otherwise be waited for until the timeout)
        if statuses and not any(s.state in ("pending", "running") for s in statuses) and \
                (all(s.cell.started for s in statuses) or (ended is not None and ended())):
            return stops, drawn
        time.sleep(poll_s)
    raise DataError(f"{sweep_dir}: cells still pending or running after {timeout_s:g} s (--timeout)")


def resubmit_until_complete(sweep_dir: Path, timeout_s: float, poll_s: float = 2.0) -> bool:
    """`python -m jobs.resubmit SWEEP_DIR`, then wait for its jobs, then `--refresh` (summary and report);
    True when every cell is complete."""
    for args in ([], None, ["--refresh"]):
        if args is None:  # wait until no resubmitted cell is pending or running
            deadline = time.monotonic() + timeout_s
            while any(s.state in ("pending", "running") for s in sweep_status(sweep_dir)[1]):
                if time.monotonic() > deadline:
                    raise DataError(f"{sweep_dir}: resubmitted cells still pending or running after {timeout_s:g} s")
                time.sleep(poll_s)
            continue
        done = subprocess.run([sys.executable, "-m", "jobs.resubmit", str(sweep_dir), *args], check=False)
        if done.returncode:
            return False
    return all(s.state == "complete" for s in sweep_status(sweep_dir)[1])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.chaos", usage="%(prog)s SWEEP_DIR [options] [-- COMMAND...]",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_dir", type=Path, help="the sweep folder a SLURM multirun writes (hydra.sweep.dir)")
    parser.add_argument("--share", type=float, default=0.25, help="share of the cells stopped (default 0.25)")
    parser.add_argument("--seed", type=int, default=0, help="which cells are drawn")
    parser.add_argument("--after-chunks", type=int, default=1,
                        help="journalled chunks of answers a victim has before it is stopped")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds to wait for the sweep's jobs")
    parser.add_argument("--resubmit", action="store_true",
                        help="then resubmit the stopped cells, wait for them and write the summary and report")
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)  # after --: the multirun to start, as given
    args, command = parser.parse_args(argv[:cut]), argv[cut + 1:]
    sweep_dir = Path(args.sweep_dir).expanduser().resolve()
    sweep = None
    try:
        if command:
            if sweep_dir.exists() and any(sweep_dir.iterdir()):
                raise ConfigError(f"{sweep_dir} is not empty: the multirun needs a new sweep folder")
            sweep = subprocess.Popen([*command, f"hydra.sweep.dir={sweep_dir}"])
        stops, drawn = run_chaos(sweep_dir, args.share, args.seed, args.after_chunks, args.timeout,
                                 ended=(lambda: sweep.poll() is not None) if sweep is not None else None)
        if sweep is not None:
            print(f"the multirun exited with status {sweep.wait()}")
    except ONE_LINE_ERRORS as err:
        print(f"{type(err).__name__}: {err}", file=sys.stderr)
        return 2
    finally:
        if sweep is not None and sweep.poll() is None:
            sweep.terminate()
    for s in stops:
        print(f"stopped cell {s.cell} (job {s.job_id}) by {s.way} after {s.answers_journalled} journalled answers")
    missed = sorted(set(drawn) - {s.num for s in stops})
    if missed:
        print(f"cells {', '.join(map(str, missed))} finished before they could be stopped")
    if not args.resubmit:
        print(f"{len(stops)} of {len(drawn)} drawn cells stopped; complete the sweep with: python -m jobs.resubmit "
              f"{Path(args.sweep_dir)}")
        return 0
    print(f"{len(stops)} of {len(drawn)} drawn cells stopped; resubmitting")
    try:
        complete = resubmit_until_complete(sweep_dir, args.timeout)
    except ONE_LINE_ERRORS as err:
        print(f"{type(err).__name__}: {err}", file=sys.stderr)
        return 2
    print("every cell complete" if complete else f"cells remain incomplete: python -m jobs.status {args.sweep_dir}")
    return 0 if complete else 1


if __name__ == "__main__":
    raise SystemExit(main())
