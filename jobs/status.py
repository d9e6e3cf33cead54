"""Where a sweep stands: the job state of every cell, which cells have metrics.json, and why the others failed.

    python -m jobs.status SWEEP_DIR [--json] [--tail 20] [--check]

A cell is `complete` (metrics.json written), `pending` / `running` (its job is still queued or running),
`failed` (started, or its job ended, without metrics.json; a partial journal is kept for the resume),
`incomplete` (its run wrote answers.jsonl but metrics.json is gone, e.g. removed by hand) or `missing` (expected from the
sweep's overrides but never started). `answers` counts the answers a resume keeps (answers.jsonl, else the
journal). For failed cells the tail of the job's
stderr is shown (submitit's `*_log.err`, a resubmitted job's log, or the cell's Hydra log).
`--check` exits 1 unless every cell is complete (for CI scripts).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.scheduler import ACTIVE_STATES, SubmititJob, job_states, submitit_jobs, tail
from rag.core.errors import DataError
from rag.core.io import read_jsonl_tolerant
from rag.folders import RunFolder
from rag.sweep.cells import Cell, SweepFolder, load_sweep

RESUBMIT_LOG = "resubmit.jsonl"


@dataclass
class CellStatus:
    cell: Cell
    state: str
    job_id: str | None = None
    scheduler_state: str | None = None
    answers: int = 0
    stderr: Path | None = None
    error: str = ""
    #: who holds the cell's folder, from its run.holder.json (an execution writing it, or one killed while it did)
    holder: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"num": self.cell.num, "cell": self.cell.name, "dir": str(self.cell.dir), "state": self.state,
                "job_id": self.job_id, "scheduler_state": self.scheduler_state, "answers": self.answers,
                "has_metrics": self.cell.complete, "overrides": self.cell.overrides,
                "stderr": str(self.stderr) if self.stderr else None, "error": self.error, "holder": self.holder}


def is_local_sweep(sweep: SweepFolder) -> bool:
    target = str(sweep.master.get("hydra", {}).get("launcher", {}).get("_target_", ""))
    return not target.endswith("SlurmLauncher")


def resubmissions(sweep_dir: Path) -> dict[str, dict[str, Any]]:
    """Latest resubmission record per cell folder name (written by `jobs.resubmit`)."""
    latest: dict[str, dict[str, Any]] = {}
    for record in read_jsonl_tolerant(sweep_dir / RESUBMIT_LOG):
        latest[record["cell"]] = record
    return latest


def _answers(cell: Cell) -> int:
    """Answers a resume keeps: answers.jsonl (written at the end, also when metrics.json was removed since),
    plus journalled ones it does not hold yet."""
    kept = set()
    for path in (cell.run.answers_path, cell.run.journal_path):
        try:
            kept.update(str(row.get("id")) for row in read_jsonl_tolerant(path) if isinstance(row, dict))
        except DataError:  # a damaged file: the resume will say so; count what can be read
            return max(len(kept), cell.journal_lines())
    return len(kept)


def sweep_status(sweep_dir: str | Path) -> tuple[SweepFolder, list[CellStatus]]:
    sweep = load_sweep(sweep_dir)
    jobs = submitit_jobs(sweep.dir)
    by_id: dict[str, SubmititJob] = {j.job_id: j for j in jobs}
    by_num: dict[int, SubmititJob] = {num: j for j in jobs for num in j.nums}  # newest wins
    resubmitted = resubmissions(sweep.dir)
    local = is_local_sweep(sweep)

    statuses = []
    for cell in sweep.cells:
        record = resubmitted.get(cell.name)
        job = by_id.get(cell.job_id or "") or (by_num.get(cell.num) if cell.num is not None else None)
        status = CellStatus(cell=cell, state="", answers=_answers(cell))
        if record:
            status.job_id = str(record["job_id"])
            status.stderr = Path(record["stderr"]) if record.get("stderr") else None
        elif job:
            status.job_id, status.stderr = job.job_id, job.stderr
        statuses.append((status, job, record))

    def runs_locally(record: dict[str, Any] | None) -> bool:
        return record["launcher"] == "local" if record else local

    slurm_ids = [s.job_id for s, _, r in statuses if s.job_id and not runs_locally(r)]
    local_ids = [s.job_id for s, _, r in statuses if s.job_id and runs_locally(r)]
    states = {**job_states(slurm_ids), **job_states(local_ids, local=True)}

    out = []
    for status, job, record in statuses:
        cell = status.cell
        status.scheduler_state = states.get(status.job_id or "")
        if record is None and job is not None and job.outcome and status.scheduler_state in (None, "ENDED"):
            status.scheduler_state = "COMPLETED" if job.outcome == "success" else "FAILED"
        if cell.complete:
            status.state = "complete"
        elif status.scheduler_state in ACTIVE_STATES or status.scheduler_state == "RUNNING":
            status.state = "pending" if status.scheduler_state == "PENDING" else "running"
        elif status.scheduler_state == "COMPLETED" and cell.started and cell.run.has_answers:
            status.state = "incomplete"  # the run wrote its answers, yet metrics.json is missing (removed since?)
            status.error = (f"the job completed but {cell.run.metrics_path} is missing (removed after the "
                            f"run?); resubmitting reruns it and keeps its {status.answers} answers")
        elif cell.started or (job is not None and job.outcome == "error"):
            status.state = "failed"
        else:
            status.state = "missing"
        if not cell.complete and (cell.dir / RunFolder.HOLDER).is_file():
            status.holder = cell.run.holder()
        if status.state == "failed":
            status.error = (tail(status.stderr) or (job.error if job and record is None else None)
                            or tail(_hydra_log(cell)) or "(no log found)")
        out.append(status)
    return sweep, out


def _hydra_log(cell: Cell) -> Path | None:
    logs = sorted(cell.dir.glob("*.log"))
    return logs[0] if logs else None


def format_table(sweep: SweepFolder, statuses: Sequence[CellStatus], tail_lines: int = 20) -> str:
    swept = sweep.swept_keys
    header = ["#", "state", "job", "metrics", "answers", *swept]
    rows = [[str(s.cell.num if s.cell.num is not None else "?"),
             s.state + (" (no metrics.json)" if s.state == "incomplete" else
                        " (job ended without metrics.json)" if s.state == "failed"
                        and s.scheduler_state == "COMPLETED" else
                        f" ({s.scheduler_state})" if s.scheduler_state and s.state not in ("complete",)
                        and s.scheduler_state.lower() != s.state else ""),
             s.job_id or "-", "yes" if s.cell.complete else "no", str(s.answers),
             *(s.cell.values.get(k, "") for k in swept)] for s in statuses]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = [f"Sweep {sweep.dir}",
             "  ".join(h.ljust(w) for h, w in zip(header, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    counts: dict[str, int] = {}
    for s in statuses:
        counts[s.state] = counts.get(s.state, 0) + 1
    lines.append("")
    lines.append(", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "no cells found")
    for s in statuses:
        if s.state == "incomplete":
            lines += ["", f"--- cell {s.cell.num} incomplete: {s.cell.name}", f"    {s.error}"]
        if s.state != "failed":
            continue
        lines += ["", f"--- cell {s.cell.num} failed: {s.cell.name}",
                  f"    job {s.job_id or '-'}; log {s.stderr or '-'}; {s.answers} answers kept for the resume"]
        if s.holder:  # a resubmission is refused while that execution still holds the folder
            lines.append(f"    its folder names a holder: {s.holder} (still writing it, or killed while it did)")
        lines += ["    " + line for line in "\n".join(s.error.splitlines()[-tail_lines:]).splitlines()]
    if any(s.state in ("failed", "missing", "incomplete") for s in statuses):
        lines += ["", f"Resubmit failed/missing/incomplete cells: python -m jobs.resubmit {sweep.dir}"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.status", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument("--json", action="store_true", help="one JSON object per cell, one per line")
    parser.add_argument("--tail", type=int, default=20, help="stderr lines shown per failed cell")
    parser.add_argument("--check", action="store_true", help="exit 1 unless every cell is complete")
    args = parser.parse_args(argv)
    try:
        sweep, statuses = sweep_status(args.sweep_dir)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.json:
        for status in statuses:
            print(json.dumps(status.to_dict()))
    else:
        print(format_table(sweep, statuses, args.tail))
    if args.check and (not statuses or any(s.state != "complete" for s in statuses)):
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
