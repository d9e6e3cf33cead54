"""How many CPUs this process may run on, which is what a thread pool should be sized to.

`os.cpu_count()` counts the whole machine: inside a SLURM job (`cpus_per_task=8` on a 128-CPU node), a container
or `taskset`, the process may use fewer CPUs, and a pool sized to the machine oversubscribes them many times
over. The scheduler's affinity mask is the number that matters; SLURM's `SLURM_CPUS_PER_TASK` caps it on
clusters that allocate CPUs without pinning them (`TaskPlugin=task/none`), and `OMP_NUM_THREADS`, the count torch's
and NumPy's pools already follow, caps it where several processes share the cores on purpose (`make test` runs
concurrent pytest sessions with one thread each on CI's 2 cores: tests/halves.py). Oversubscribed, llama.cpp's
spinning thread barriers burn the cores they wait on: Gemma 3 270M answering 4 questions beside a busy test
session took 77.5 s and 103 s of CPU with 2 threads, 59.9 s and 58 s with 1 (docs/benchmarks.md, "CI budget").
"""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """CPUs in this process's affinity mask (SLURM's allocation, a container's cpuset, taskset), at most the
    job's `SLURM_CPUS_PER_TASK` and `OMP_NUM_THREADS`; the machine's count where the platform has no affinity call
    (macOS)."""
    if hasattr(os, "sched_getaffinity"):
        cpus = len(os.sched_getaffinity(0))
    else:
        cpus = os.cpu_count() or 1
    for cap in ("SLURM_CPUS_PER_TASK", "OMP_NUM_THREADS"):
        allocated = os.environ.get(cap, "").strip()
        if allocated.isdigit() and int(allocated) > 0:
            cpus = min(cpus, int(allocated))
    return max(1, cpus)


def fit_torch_threads() -> int:
    """Shrink torch's intra-op pool to `usable_cpus()` and return its size. torch sizes its pool to the machine's
    cores unless `OMP_NUM_THREADS` says otherwise, so in a SLURM job that allocates CPUs without pinning them
    (`cpus_per_task=1` on a 2-core node, two jobs at once) every encoder would run as many threads as the node has
    cores; never grown, so a deliberate smaller setting stays."""
    import torch

    if torch.get_num_threads() > usable_cpus():
        torch.set_num_threads(usable_cpus())
    return torch.get_num_threads()
