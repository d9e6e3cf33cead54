"""Issue 9, fault 5: a SLURM sweep ends when one of its array tasks is cancelled while pending, on the real local
SLURM (no accounting, as in CI), reports the cancelled cell and writes the summary of the cell that completed.
Before the fix the launcher polled `sacct` forever."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.cluster.helpers import CHEAP, PYTHON, rag_env, sweep_dirs, wait_for
from tests.conftest import ROOT

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(2400)]

CPU_NODE = ["hydra/launcher=slurm", "hydra.launcher.gpus_per_node=0", "hydra.launcher.mem_gb=2",
            "hydra.launcher.cpus_per_task=1", "hydra.launcher.timeout_min=20",
            "hydra.launcher.array_parallelism=1"]  # the second cell waits in the queue: it can be cancelled pending


def _array_id(outputs) -> str | None:
    for sweep in sweep_dirs(outputs):
        for folder in (sweep / ".submitit").glob("*"):
            match = re.fullmatch(r"(\d+)(_\d+)?", folder.name)
            if match:
                return match.group(1)
    return None


def _state(job: str) -> str:
    out = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True).stdout
    match = re.search(r"JobState=(\S+)", out)
    return match.group(1) if match else ""


def test_sweep_with_a_cancelled_pending_cell_ends_with_a_summary(slurm, hotpot_data, tmp_path):
    env = rag_env(tmp_path, RAG_SWEEP_POLL_S="1", RAG_SWEEP_GRACE_S="5")
    args = ["-m", *CPU_NODE, *CHEAP, "dataset.limit=1", "logger=none", "retriever.k=4,5"]
    with open(tmp_path / "master.log", "w") as log:
        master = subprocess.Popen([PYTHON, "-m", "rag.main", *args], cwd=ROOT, env=env, stdout=log,
                                  stderr=subprocess.STDOUT)
        array = None
        try:
            array = wait_for(lambda: _array_id(tmp_path / "outputs"), timeout=300, what="the array job")
            pending = f"{array}_1"
            wait_for(lambda: _state(pending) == "PENDING", timeout=120, interval=0.5, what="a pending task")
            subprocess.run(["scancel", pending], check=True, timeout=30)
            code = master.wait(timeout=1800)  # the documented-commands session shares the 2 CPUs
        finally:
            if master.poll() is None:
                master.kill()
            if array:
                subprocess.run(["scancel", array], capture_output=True, timeout=30)
    output = (tmp_path / "master.log").read_text()
    assert code != 0, output[-3000:]  # a cell did not complete: the sweep says so ...
    assert re.search(r"cell 1 \(job \d+_1\) ended without a result", output), output[-3000:]
    [sweep] = sweep_dirs(tmp_path / "outputs")
    summary = (sweep / "summary.csv").read_text()  # ... after writing the summary of what completed
    assert summary.count(",complete,") == 1, summary
