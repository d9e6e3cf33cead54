"""Wall time per named stage, accumulated: the pipeline's `time/<stage>_s` metrics (a stage may run in chunks)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager


class Timer:
    """Wall time per stage, accumulated (stages may run in several chunks)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - start

    @contextmanager
    def apart(self, name: str) -> Iterator[None]:
        """Time a block as `name` alone: stages run inside it (a repeat's retrieval and generation) add nothing to
        their own totals, so those stay the run's own work."""
        before = dict(self.seconds)
        with self.stage(name):
            yield
        spent = self.seconds[name]
        self.seconds.clear()
        self.seconds.update({**before, name: spent})
