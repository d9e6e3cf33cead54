"""`make test`: the suite as three pytest sessions at once: the documented commands (tests/docs), the combinations of
options (tests/combinations) and everything else.

Why several: much of each session is one core of Python orchestration (subprocesses starting, SLURM polling, the instant
endpoint answering), so run side by side they fill the cores that one session leaves idle (docs/benchmarks.md,
"CI budget"). Each session gets its share of the CPUs as `OMP_NUM_THREADS` (unless set already): torch, NumPy and
llama.cpp (rag.core.cpus) size their thread pools to it, because pools sized to the whole machine oversubscribe it
when the sessions run at once, and their spinning waits burn the cores they share (1 thread each on CI's 2 cores).
Each session keeps its own fixtures, temporary folders and skip report; the exit status is the first non-zero
one. Each session's output goes to its log file as it runs (`.pytest-halves/<half>.log`, printed here when the half
ends), so a run stopped by a time limit still leaves what each session had done.

    python -m tests.halves [pytest options...]      # e.g. -q --timeout=1800
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rag.core.cpus import usable_cpus

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / ".pytest-halves"
#: the combinations of options (tests/combinations) are a third session: after the docs half they made it the last
#: to end (a clean .ci/run of 2047797: the rest 44:56 min, the docs half 50 min before its combinations started);
#: beside the other two it fills the cores they leave idle once the vLLM lane is done
#: Tried and reverted: five sessions (the documented commands in two shards, tests/cluster apart). In a clean .ci/run
#: (2026-12-07) the cores stayed 100% busy either way (/proc/stat: 51 idle seconds in 47 minutes), so the split only
#: moved time: the rest, then the last session, took 75.8 minutes (67.3 beside three sessions, with other work on
#: the machine). Less CPU work, not more sessions, is what shortens this run (docs/benchmarks.md, "CI budget").
HALVES = {"docs": ["tests/docs"], "combinations": ["tests/combinations"],
          "rest": ["tests", "--ignore=tests/docs", "--ignore=tests/combinations"]}
#: sessions that share one cache folder (`RAG_TEST_CACHE_DIR`, the `shared_cache` fixture): the documented commands
#: and the combinations run over the same datasets, and each built every dataset's dense index again in its own
#: cache (CI at 9e32713: the pairwise multirun ran past 1800 s, much of it index builds the docs session had
#: made). Index builds take the build folder's lock and stage caches their files' locks (the guarantees
#: docs/reliability.md states for concurrent jobs), so the second session waits for an index and then reads it. The
#: rest keeps a cache per test or per session: its tests count cache hits and builds of their own.
SHARED_CACHE = ("docs", "combinations")


class SessionCpu:
    """The CPU seconds of one session and of every process it starts, from a cgroup of its own (cgroup v1
    `cpuacct`, or v2's `cpu.stat`). getrusage's children count misses most of a session: the processes its preloaded
    fork server starts are never waited for by the session (it read 0.7 CPU-minutes for a 46-minute session). SLURM
    jobs run under slurmd, outside the cgroup, and are not counted. None where no cgroup can be made (not root, no
    writable hierarchy): the line then says so."""

    ROOTS = (Path("/sys/fs/cgroup/cpuacct"), Path("/sys/fs/cgroup/cpu,cpuacct"), Path("/sys/fs/cgroup"))

    def __init__(self, name: str):
        self.path: Path | None = None
        self._final: float | None = None  # the reading when the cgroup was closed
        for root in self.ROOTS:
            if not ((root / "cpuacct.usage").is_file() or (root / "cgroup.controllers").is_file()):
                continue
            try:
                path = root / f"rag-tests-{os.getpid()}-{name}"
                path.mkdir(exist_ok=True)
                self.path = path
                break
            except OSError:
                continue

    def add(self, pid: int) -> None:
        """Put a just-started session in the cgroup (before it starts processes of its own: pytest takes a while to
        get there); where the cgroup refuses it, the session is reported as not measured."""
        if self.path is None:
            return
        try:
            (self.path / "cgroup.procs").write_text(str(pid))
        except OSError:
            self.close()
            self._final = None  # an empty cgroup's zero is not this session's figure

    def seconds(self) -> float | None:
        if self.path is None:
            return self._final
        try:
            if (self.path / "cpuacct.usage").is_file():
                return int((self.path / "cpuacct.usage").read_text()) / 1e9
            stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
            return int(stat["usage_usec"]) / 1e6
        except (OSError, KeyError, ValueError):
            return None

    def minutes(self) -> str:
        """`12.3 CPU-min`, or why there is no figure: what a session's closing line says."""
        seconds = self.seconds()
        return "CPU not measured (no cgroup of its own)" if seconds is None else f"{seconds / 60:.1f} CPU-min"

    def close(self) -> None:
        """Keep the last reading and remove the cgroup."""
        if self.path is not None:
            self._final = self.seconds()
            with contextlib.suppress(OSError):  # refused while a process of the session lives: left to the machine
                self.path.rmdir()
            self.path = None


def main(options: list[str]) -> int:
    LOGS.mkdir(exist_ok=True)
    (LOGS / ".gitignore").write_text("*\n")
    threads = os.environ.get("OMP_NUM_THREADS") or str(max(1, usable_cpus() // len(HALVES)))
    env = {**os.environ, "OMP_NUM_THREADS": threads}
    start = time.monotonic()
    running: dict[str, tuple[subprocess.Popen, Path]] = {}
    cpus = {name: SessionCpu(name) for name in HALVES}
    shared = tempfile.mkdtemp(prefix="rag-test-cache-")
    for name, paths in HALVES.items():
        log = LOGS / f"{name}.log"
        own = {"RAG_TEST_CACHE_DIR": os.environ.get("RAG_TEST_CACHE_DIR") or shared} if name in SHARED_CACHE else {}
        with log.open("w") as handle:  # the child keeps its own copy of the file descriptor
            running[name] = (subprocess.Popen([sys.executable, "-m", "pytest", *options, *paths], cwd=ROOT,
                                              env={**env, **own}, stdout=handle, stderr=subprocess.STDOUT), log)
        cpus[name].add(running[name][0].pid)

    def stop(signum: int, _frame: object) -> None:  # a time limit: stop both halves, show what they did
        for process, _ in running.values():
            process.terminate()
        for name, (process, log) in running.items():
            process.wait()
            print(f"\n== {name} (stopped by signal {signum}, {cpus[name].minutes()}) ==\n"
                  f"{log.read_text(errors='replace')[-20000:]}")
            cpus[name].close()
        shutil.rmtree(shared, ignore_errors=True)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    status = 0
    pending = dict(running)
    while pending:
        for name, (process, log) in list(pending.items()):
            if process.poll() is None:
                continue
            del pending[name]
            minutes = (time.monotonic() - start) / 60
            cpu = cpus[name].minutes()
            cpus[name].close()
            print(f"\n== {name}: exit {process.returncode} after {minutes:.1f} min, {cpu} ==\n"
                  f"{log.read_text(errors='replace')}", flush=True)
            status = status or process.returncode
        time.sleep(1)
    shutil.rmtree(shared, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
