"""Real SLURM (start it with `.ci/slurm/setup.sh`): a 2x2 sweep submitted through hydra-submitit-launcher's
`submitit_slurm` to the local slurmctld, a preempted cell requeued by submitit's checkpoint path that resumes
its journal, and `jobs.resubmit` sending a failed cell back through `jobs/single_run.sbatch`.

Skipped with the reason when `sinfo` is missing or no node is usable."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from rag.core.io import read_jsonl
from rag.folders import RunFolder
from tests.cluster.helpers import (
    CHEAP,
    PYTHON,
    journal_lines,
    rag_env,
    rag_main,
    run_module,
    sweep_dirs,
    wait_for,
)
from tests.conftest import ROOT

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(2400)]

#: CPU-only single-node test cluster: no GPUs, small memory, one CPU per cell
CPU_NODE = ["hydra/launcher=slurm", "hydra.launcher.gpus_per_node=0", "hydra.launcher.mem_gb=2",
            "hydra.launcher.cpus_per_task=1", "hydra.launcher.timeout_min=30"]


def _cancel_jobs(sweep_root: Path) -> None:
    """Cancel this test's jobs only (ids from its own submitit folders), e.g. after a timeout."""
    ids = {p.name.split("_")[0] for p in sweep_root.glob("multirun/*/*/.submitit/*") if p.name[0].isdigit()}
    if ids:
        subprocess.run(["scancel", *sorted(ids)], capture_output=True, timeout=30)


def _cells(sweep: Path) -> list[Path]:
    return sorted((p for p in sweep.iterdir() if (p / ".hydra").is_dir()), key=lambda p: int(p.name.split("_")[0]))


@pytest.fixture(scope="module")
def slurm_sweep(slurm, hotpot_data, tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("slurm-sweep")
    fixed = [a for a in CHEAP if not a.startswith("rerank.k=")]
    args = ["-m", *CPU_NODE, "retriever=bm25", "rerank.k=2,3", "ordering=inverted,as_ranked", *fixed,
            "dataset.limit=2", "logger=none", "generator.max_tokens=16"]
    try:
        proc = rag_main(args, rag_env(tmp), timeout=1500)
    finally:
        _cancel_jobs(tmp / "outputs")
    assert proc.returncode == 0, proc.stderr[-3000:]
    [sweep] = sweep_dirs(tmp / "outputs")
    return sweep


def test_slurm_sweep_runs_every_cell(slurm_sweep):
    cells = _cells(slurm_sweep)
    assert len(cells) == 4
    for cell in cells:
        assert len(read_jsonl(cell / "answers.jsonl")) == 2
        assert json.loads((cell / "metrics.json").read_text())["n_questions"] == 2
        hydra = yaml.safe_load((cell / ".hydra" / "hydra.yaml").read_text())["hydra"]
        assert hydra["mode"] == "MULTIRUN"
        assert re.fullmatch(r"\d+_\d+", str(hydra["job"]["id"])), hydra["job"]["id"]  # a SLURM array task
    status = run_module("jobs.status", [str(slurm_sweep), "--json", "--check"])
    assert status.returncode == 0, status.stdout + status.stderr
    states = [json.loads(line) for line in status.stdout.splitlines()]
    assert [s["state"] for s in states] == ["complete"] * 4
    assert (slurm_sweep / "summary.csv").read_text().count(",complete,") == 4


def test_failed_cell_is_resubmitted_through_sbatch_and_resumes(slurm_sweep):
    cell = _cells(slurm_sweep)[3]
    answers = read_jsonl(cell / "answers.jsonl")
    (cell / "answers.partial.jsonl").write_text(json.dumps(answers[0]) + "\n")
    (cell / "answers.jsonl").unlink()
    (cell / "metrics.json").unlink()
    env = rag_env(slurm_sweep.parents[3])  # the sweep's own data, cache and output folders
    proc = run_module("jobs.resubmit", [str(slurm_sweep)], env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job_id = re.search(r"submitted job (\d+)", proc.stdout).group(1)
    assert "single_run.sbatch" in proc.stdout and "--gpus-per-node" not in proc.stdout

    def finished() -> bool:
        out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True).stdout
        return bool(re.search(r"JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT|OUT_OF_MEMORY)", out))

    try:
        wait_for(finished, timeout=900, interval=2, what=f"resubmitted job {job_id}")
    finally:
        subprocess.run(["scancel", job_id], capture_output=True)
    log = (slurm_sweep / ".resubmit" / f"3_{job_id}.err").read_text()
    assert (cell / "metrics.json").exists(), log[-3000:]
    resumed = read_jsonl(cell / "answers.jsonl")
    assert [r["id"] for r in resumed] == [r["id"] for r in answers] and resumed[0] == answers[0]
    metrics = json.loads((cell / "metrics.json").read_text())
    assert metrics["llm_calls"] + metrics["llm_cache_hits"] == 1
    status = run_module("jobs.status", [str(slurm_sweep), "--json"])
    rows = [json.loads(line) for line in status.stdout.splitlines()]
    assert rows[3]["state"] == "complete" and rows[3]["job_id"] == job_id


def test_preempted_cell_is_requeued_by_submitit_and_resumes(slurm, hotpot_data, tmp_path):
    """USR2 is submitit's preemption / time-out signal (SLURM sends it signal_delay_s before the time limit):
    the launcher's checkpoint() resubmits the same cell, which continues its journal in the same folder."""
    n = 6
    args = ["-m", *CPU_NODE, *CHEAP, f"dataset.limit={n}", "generation.chunk_size=2", "logger=none",
            "cache.llm_responses=false"]
    env = rag_env(tmp_path)
    with open(tmp_path / "master.log", "w") as log:
        master = subprocess.Popen([PYTHON, "-m", "rag.main", *args], cwd=ROOT, env=env, stdout=log,
                                  stderr=subprocess.STDOUT)
        try:
            cell = wait_for(lambda: next(iter(p.parent.parent for p in (tmp_path / "outputs").glob(
                "multirun/*/*/*/.hydra/hydra.yaml")), None), timeout=600, what="the cell folder")
            wait_for(lambda: journal_lines(cell) >= 1, timeout=900, interval=0.2, what="a journalled chunk")
            job_id = str(yaml.safe_load((cell / ".hydra" / "hydra.yaml").read_text())["hydra"]["job"]["id"])
            assert journal_lines(cell) < n, "finished before it could be preempted"
            subprocess.run(["scancel", "--signal=USR2", job_id], check=True, timeout=30)
            assert master.wait(timeout=1500) == 0, (tmp_path / "master.log").read_text()[-3000:]
        finally:
            if master.poll() is None:
                master.kill()
            _cancel_jobs(tmp_path / "outputs")
    job_log = next((cell.parent / ".submitit").glob(f"{job_id}/{job_id}_0_log.out")).read_text()
    assert "Caught signal SIGUSR2" in job_log and "Requeued job" in job_log
    assert job_log.count("Starting with JobEnvironment") == 2
    kept = int(re.search(r"resuming: (\d+) answers already written", (cell / "main.log").read_text()).group(1))
    assert 1 <= kept < n
    records = read_jsonl(cell / "answers.jsonl")
    assert len(records) == n and len({r["id"] for r in records}) == n
    metrics = json.loads((cell / "metrics.json").read_text())
    # every answer's call counted once (issue 52): the preempted execution's journalled work too; the requeued
    # run generated only what was missing
    assert metrics["llm_calls"] == n and RunFolder(cell).work_history()[-1]["llm_calls"] == n - kept


def test_single_run_sbatch_requeues_itself_at_the_time_limit_and_resumes(slurm, hotpot_data, tmp_path):
    """jobs/single_run.sbatch: USR1 to the batch shell (what --signal=B:USR1@300 sends before the time limit)
    stops the run and requeues the job, which resumes into the same run folder (keyed by the job id)."""
    n = 6
    env = rag_env(tmp_path, RAG_PYTHON=PYTHON)
    overrides = [*CHEAP, f"dataset.limit={n}", "generation.chunk_size=2", "logger=none", "cache.llm_responses=false"]
    submitted = subprocess.run(["sbatch", "--parsable", "--cpus-per-task=1", "--mem=2G", "--time=30",
                                f"--output={tmp_path}/job-%j.out", f"--chdir={ROOT}",
                                str(ROOT / "jobs" / "single_run.sbatch"), *overrides],
                               env=env, capture_output=True, text=True, timeout=60)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]
    run_dir = tmp_path / "outputs" / "runs" / f"slurm-{job_id}"
    try:
        wait_for(lambda: journal_lines(run_dir) >= 1, timeout=900, interval=0.2, what="a journalled chunk")
        assert journal_lines(run_dir) < n, "finished before it could be signalled"
        subprocess.run(["scancel", "--batch", "--signal=USR1", job_id], check=True, timeout=30)
        wait_for(lambda: (run_dir / "metrics.json").exists(), timeout=1200, interval=2, what="the requeued run")
    finally:
        subprocess.run(["scancel", job_id], capture_output=True)
    log = (tmp_path / f"job-{job_id}.out").read_text()
    assert "requeueing job" in log, log[-3000:]
    kept = int(re.search(r"resuming: (\d+) answers already written", (run_dir / "main.log").read_text()).group(1))
    records = read_jsonl(run_dir / "answers.jsonl")
    assert 1 <= kept < n and len({r["id"] for r in records}) == len(records) == n
    assert json.loads((run_dir / "metrics.json").read_text())["llm_calls"] == n  # the first execution's counted too
    assert RunFolder(run_dir).work_history()[-1]["llm_calls"] == n - kept  # the requeued one generated the rest
