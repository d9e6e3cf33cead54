"""Issue 14, goal 6 on the real local SLURM: `hydra.launcher.cells_per_job` packs cells that share their LLM
configs into one job, which loads each model once; every cell keeps its folder and result, `jobs.status` and
the sweep summary read the packs, and a requeued pack does not rerun the cells it finished.

Skipped with the reason when `sinfo` is missing or no node is usable."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from rag.core.io import read_jsonl
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
from tests.cluster.test_slurm import CPU_NODE, _cancel_jobs, _cells
from tests.conftest import ROOT

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(2400)]

FIXED = [a for a in CHEAP if not a.startswith("rerank.k=")]


def _job_id(cell: Path) -> str:
    return str(yaml.safe_load((cell / ".hydra" / "hydra.yaml").read_text())["hydra"]["job"]["id"])


def test_cells_sharing_an_llm_run_in_one_job_and_load_it_once(slurm, hotpot_data, tmp_path):
    # cells in Hydra's order: (k=2, gemma) (k=2, smollm2) (k=3, gemma) (k=3, smollm2): packs are [0, 2] and [1, 3]
    args = ["-m", *CPU_NODE, "hydra.launcher.cells_per_job=2", *FIXED, "rerank.k=2,3",
            "llm=gemma3_270m,smollm2_135m", "dataset.limit=1", "logger=none"]
    try:
        proc = rag_main(args, rag_env(tmp_path), timeout=1500)
    finally:
        _cancel_jobs(tmp_path / "outputs")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "4 cells in 2 jobs (cells_per_job=2, packed by LLM config): 0+2 1+3" in proc.stdout + proc.stderr
    [sweep] = sweep_dirs(tmp_path / "outputs")
    cells = _cells(sweep)
    assert len(cells) == 4
    jobs = [_job_id(c) for c in cells]
    assert jobs[0] == jobs[2] and jobs[1] == jobs[3] and jobs[0] != jobs[1]
    loads = [json.loads((c / "metrics.json").read_text())["model_loads"] for c in cells]
    assert loads == [1, 1, 0, 0]  # the second cell of each pack reused the engine its job had loaded
    summary = json.loads((sweep / "summary.json").read_text())
    assert summary["model_loads"] == 2 and summary["llm_configs"] == 2
    assert "Model loads: 2 over the complete cells, which use 2 LLM config(s)" in (sweep / "summary.md").read_text()
    status = run_module("jobs.status", [str(sweep), "--json", "--check"])
    assert status.returncode == 0, status.stdout + status.stderr
    rows = [json.loads(line) for line in status.stdout.splitlines()]
    assert [r["state"] for r in rows] == ["complete"] * 4 and [r["job_id"] for r in rows] == jobs


def test_requeued_pack_skips_the_cells_it_finished(slurm, hotpot_data, tmp_path):
    """USR2 (submitit's preemption signal) while the pack's second cell runs: the pack is requeued, its first
    cell is not run again, the second resumes its journal."""
    n = 6
    args = ["-m", *CPU_NODE, "hydra.launcher.cells_per_job=2", *FIXED, "rerank.k=2,3", f"dataset.limit={n}",
            "generation.chunk_size=1", "logger=none", "cache.llm_responses=false"]
    with open(tmp_path / "master.log", "w") as log:
        master = subprocess.Popen([PYTHON, "-m", "rag.main", *args], cwd=ROOT, env=rag_env(tmp_path), stdout=log,
                                  stderr=subprocess.STDOUT)
        try:
            second = wait_for(lambda: next(iter(p.parent.parent for p in (tmp_path / "outputs").glob(
                "multirun/*/*/1_*/.hydra/hydra.yaml")), None), timeout=900, what="the second cell's folder")
            wait_for(lambda: journal_lines(second) >= 1, timeout=900, interval=0.2, what="a journalled answer")
            assert journal_lines(second) < n, "finished before it could be preempted"
            first = next(second.parent.glob("0_*"))
            first_metrics = (first / "metrics.json").read_bytes()
            subprocess.run(["scancel", "--signal=USR2", _job_id(second)], check=True, timeout=30)
            assert master.wait(timeout=1500) == 0, (tmp_path / "master.log").read_text()[-3000:]
        finally:
            if master.poll() is None:
                master.kill()
            _cancel_jobs(tmp_path / "outputs")
    job_id = _job_id(second)
    job_log = next((second.parent / ".submitit").glob(f"{job_id}/{job_id}_0_log.out")).read_text()
    assert "Caught signal SIGUSR2" in job_log and "Requeued job" in job_log
    assert (first / "metrics.json").read_bytes() == first_metrics  # not rerun
    assert (first / "main.log").read_text().count("] - dataset ") == 1
    records = read_jsonl(second / "answers.jsonl")
    assert len(records) == n and len({r["id"] for r in records}) == n
    assert "resuming:" in (second / "main.log").read_text()
