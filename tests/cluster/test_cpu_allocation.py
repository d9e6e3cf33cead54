"""Inside a real SLURM job, a thread pool is sized to the job's CPUs, not the node's: the local cluster runs
`TaskPlugin=task/none` (no pinning), so this is SLURM_CPUS_PER_TASK's cap at work (rag.core.cpus)."""

from __future__ import annotations

import subprocess

import pytest

from tests.cluster.helpers import PYTHON, rag_env
from tests.conftest import ROOT

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(1800)]


def test_a_one_cpu_job_sizes_its_pools_to_one_cpu(slurm, tmp_path):
    code = "from rag.core.cpus import usable_cpus; print(usable_cpus())"
    proc = subprocess.run(["srun", "--ntasks=1", "--cpus-per-task=1", "--mem=1G", "--time=5", PYTHON, "-c", code],
                          cwd=ROOT, env=rag_env(tmp_path), capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["1"]
