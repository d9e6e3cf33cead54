"""`make test`'s sessions report their CPU from a cgroup of their own (tests/halves.py): what a session's fork
server starts counts, although the session never waits for it."""

from __future__ import annotations

import subprocess
import sys
import time

from tests.halves import SessionCpu

#: a child that waits half a second (to be in the cgroup first), then starts a grandchild in a new session and exits
#: at once: the grandchild (about 1 s of CPU) is never waited for by the process the test starts, as a fork server's
#: workers are not waited for by pytest
ORPHAN = ("import subprocess, sys, time; time.sleep(0.5); subprocess.Popen([sys.executable, '-c', "
          "'import time\\nend = time.process_time() + 1.0\\nwhile time.process_time() < end: pass'], "
          "start_new_session=True)")


def test_a_sessions_cpu_counts_the_processes_it_never_waits_for():
    cpu = SessionCpu("selftest")
    try:
        child = subprocess.Popen([sys.executable, "-c", ORPHAN])
        cpu.add(child.pid)  # as tests.halves adds a session it has just started
        assert child.wait(timeout=60) == 0
        if cpu.path is None:  # no cgroup hierarchy to write to (not root): the line says so instead of a number
            assert cpu.seconds() is None
            return
        deadline = time.monotonic() + 60
        while (cpu.path / "cgroup.procs").read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.2)  # the grandchild still burning
        assert cpu.seconds() >= 0.9  # the orphan's second, which getrusage(RUSAGE_CHILDREN) never sees
        folder = cpu.path
    finally:
        cpu.close()
    assert not folder.exists() and cpu.seconds() >= 0.9  # removed, its last reading kept for the closing line
