"""SIGTERM as an exception, so that a stopped run can say what it did before it goes.

SLURM preemption and `scancel`, `timeout` and `kill` send SIGTERM, which ends Python at once: no `finally` runs, and
the work an execution did since its last journalled chunk is measured nowhere. Inside `terminate_as_exit()` SIGTERM
raises `SystemExit(143)` (128 + 15, the status the default action gives) instead. Only where nobody else handles
SIGTERM: submitit's job environment installs its own handlers, which are left alone.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


def _exit(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


@contextmanager
def terminate_as_exit() -> Iterator[None]:
    """SIGTERM raises SystemExit(143) in the main thread while inside; the earlier handler comes back after."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
