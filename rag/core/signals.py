"""SIGTERM as an exception, so that a stopped run can say what it did before it goes.

SLURM preemption and `scancel`, `timeout` and `kill` send SIGTERM, which ends Python at once: no `finally` runs, and
the work an execution did since its last journalled chunk is measured nowhere. Inside `terminate_as_exit()` SIGTERM
raises `Terminated` instead, so `except`/`finally` blocks inside can record what was done; when it leaves the block,
the process ends by SIGTERM's own default action, as it would have without the handler (its parent sees "killed by
signal 15", a shell status 143). Only where nobody else handles SIGTERM: submitit's job environment installs its own
handlers, which are left alone.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Terminated(SystemExit):
    """SIGTERM arrived inside `terminate_as_exit()`."""

    def __init__(self) -> None:
        super().__init__(128 + signal.SIGTERM)


def _raise(_signum: int, _frame: object) -> None:
    raise Terminated()


@contextmanager
def terminate_as_exit() -> Iterator[None]:
    """SIGTERM raises `Terminated` in the main thread while inside; leaving with it ends the process by SIGTERM."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    except Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)  # the default action: the process ends here, as SIGTERM ends it
        raise
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def stop_name(err: BaseException) -> str:
    """What stopped an execution, as its work journal names it: `SIGTERM`, or the exception's class."""
    return "SIGTERM" if isinstance(err, Terminated) else type(err).__name__
