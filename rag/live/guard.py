"""The deadline guard: pick, before each batch, the most thorough settings that still finish in time.

The ladder's rungs go from the run's own settings to the cheapest (smaller k, a one-call strategy, an
extractive answer with no LLM call). Seconds per question are measured per rung as the run goes; a rung not
measured yet is estimated from a measured one by the configured relative costs. The guard only moves down
the ladder: once the estimate for the remaining questions at the current rung passes the time left (times
`safety`), it moves to the first cheaper rung whose estimate fits, or to the last rung when none does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class Rung:
    name: str
    overrides: list[str]
    #: cost of a question at this rung relative to the first rung (used until the rung is measured)
    relative_cost: float = 1.0


@dataclass
class Decision:
    rung: int
    reason: str
    #: estimated seconds for the remaining questions at the chosen rung (None before any measurement)
    estimate_s: float | None


class DeadlineGuard:
    """Chooses a rung per batch from the time left and the measured seconds per question."""

    def __init__(self, rungs: Sequence[dict | Rung], safety: float = 0.9):
        self.rungs = [r if isinstance(r, Rung) else Rung(**r) for r in rungs]
        if not self.rungs:
            raise ValueError("live.guard.rungs: the ladder needs at least one rung")
        if not 0 < safety <= 1:
            raise ValueError(f"live.guard.safety must be in (0, 1], got {safety}")
        self.safety = safety
        #: rung -> [questions, seconds] measured so far
        self.observed: dict[int, list[float]] = {}
        self.current = 0

    def observe(self, rung: int, questions: int, seconds: float) -> None:
        q, s = self.observed.get(rung, [0.0, 0.0])
        self.observed[rung] = [q + questions, s + seconds]

    def seconds_per_question(self, rung: int) -> float | None:
        """Measured at this rung, else scaled from the nearest measured rung by relative cost; None if none."""
        if rung in self.observed and self.observed[rung][0] > 0:
            q, s = self.observed[rung]
            return s / q
        measured = [r for r in self.observed if self.observed[r][0] > 0]
        if not measured:
            return None
        ref = min(measured, key=lambda r: abs(r - rung))
        ratio = self.rungs[rung].relative_cost / max(self.rungs[ref].relative_cost, 1e-9)
        return self.seconds_per_question(ref) * ratio

    def choose(self, remaining: int, time_left_s: float) -> Decision:
        """The rung for the next batch (never above the current one)."""
        last = len(self.rungs) - 1
        if time_left_s <= 0:
            self.current = last
            return Decision(last, "deadline passed", None)
        budget = self.safety * time_left_s
        for rung in range(self.current, last + 1):
            spq = self.seconds_per_question(rung)
            if spq is None:  # nothing measured yet: start with the run's own settings
                return Decision(self.current, "first batch", None)
            estimate = spq * remaining
            if estimate <= budget:
                reason = "on time" if rung == self.current else \
                    f"estimate at {self.rungs[self.current].name} passed the deadline"
                self.current = rung
                return Decision(rung, reason, estimate)
        self.current = last
        return Decision(last, "no rung fits the time left", self.seconds_per_question(last) * remaining)
