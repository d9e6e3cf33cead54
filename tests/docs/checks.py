"""What a documented command promises, as checks over what it left behind (used by the rows of tests/docs/table.py).

A check is a function of `Ran` (the command as it ran, its result and its folders) that asserts one promise: the
answers are there and not empty, every cell of a sweep completed, the files the doc names exist, the output says
what the doc says it prints. Exit status is checked apart (`Run.status`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.docs.runner import Result


@dataclass
class Ran:
    """A documented command after it ran: `home` is its own folder (RAG_OUTPUT_DIR is `home/outputs`)."""

    doc: str
    command: str
    result: Result
    home: Path
    made: dict[str, Path] = field(default_factory=dict)
    #: the folders and files of other rows or fixtures this command read (by their names in the row's `fills`)
    inputs: dict[str, Path] = field(default_factory=dict)
    #: the environment it ran with (a check that runs a follow-up command uses the same)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def outputs(self) -> Path:
        return self.home / "outputs"

    def run_dir(self) -> Path:
        """The run folder the command wrote: the one folder holding metrics.json or answers under its home."""
        found = sorted({p.parent for p in self.home.rglob("answers.jsonl") if ".submitit" not in p.parts
                        and "multirun" not in p.parts} | {p.parent for p in self.home.rglob("submission.jsonl")})
        assert len(found) == 1, f"expected one run folder under {self.home}, found {found}\n{self.result.tail()}"
        return found[0]

    def sweep_dir(self) -> Path:
        found = sorted({p.parent for p in self.home.rglob("multirun.yaml")})
        assert len(found) == 1, f"expected one sweep folder under {self.home}, found {found}\n{self.result.tail()}"
        return found[0]

    @property
    def output(self) -> str:
        return self.result.stdout + "\n" + self.result.stderr


Check = Callable[[Ran], None]


def _answers(folder: Path) -> list[dict]:
    path = folder / "answers.jsonl"
    assert path.is_file(), f"{path} missing"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def answers(n: int, nonempty: bool = True, counted_empty: bool = False) -> Check:
    """The run folder holds `n` answers, each non-empty; with `counted_empty` (a real small model, whose greedy
    reply can be empty), an empty answer must be marked (`failure=empty_answer`, generated again on resume) and
    counted in metrics.json's `empty_answers`, and be the exception (under a tenth of the answers)."""
    def check(ran: Ran) -> None:
        rows = _answers(ran.run_dir())
        assert len(rows) == n, f"{len(rows)} answers, the doc's command evaluates {n}"
        if nonempty:
            empty = [r for r in rows if not str(r.get("answer", "")).strip()]
            if counted_empty:
                metrics = json.loads((ran.run_dir() / "metrics.json").read_text())
                assert all(r.get("failure") == "empty_answer" for r in empty), [r["id"] for r in empty]
                assert metrics["empty_answers"] == len(empty) and len(empty) * 10 < n, [r["id"] for r in empty]
            else:
                assert not empty, f"empty answers: {[r['id'] for r in empty][:5]}"
    return check


def cells(n: int, questions: int | None = None, nonempty: bool = True) -> Check:
    """The sweep ran `n` cells, each complete (metrics.json), each with `questions` answers (non-empty)."""
    def check(ran: Ran) -> None:
        sweep = ran.sweep_dir()
        folders = sorted(p for p in sweep.iterdir() if p.is_dir() and p.name[:1].isdigit())
        assert len(folders) == n, f"{len(folders)} cells in {sweep}, the doc's sweep has {n}"
        for cell in folders:
            assert (cell / "metrics.json").is_file(), f"cell {cell.name} did not complete\n{ran.result.tail()}"
            if questions is not None:
                rows = _answers(cell)
                assert len(rows) == questions, f"cell {cell.name}: {len(rows)} answers, expected {questions}"
                if nonempty:
                    assert all(str(r.get("answer", "")).strip() for r in rows), f"cell {cell.name}: empty answers"
    return check


def files(*names: str, where: str = "run") -> Check:
    """Files (globs) the doc says the command writes, relative to its run folder, sweep folder or home."""
    def check(ran: Ran) -> None:
        base = {"run": ran.run_dir, "sweep": ran.sweep_dir, "home": lambda: ran.home}[where]()
        for name in names:
            assert list(base.glob(name)), f"{name} not written under {base}\n{ran.result.tail()}"
    return check


def files_in(name: str, *globs: str) -> Check:
    """Files the command wrote into a folder it was given (another row's run or sweep: `fills` names it)."""
    def check(ran: Ran) -> None:
        base = ran.inputs[name]
        for pattern in globs:
            assert list(base.glob(pattern)), f"{pattern} not written under {base}\n{ran.result.tail()}"
    return check


def prints(*texts: str) -> Check:
    def check(ran: Ran) -> None:
        for text in texts:
            assert text in ran.output, f"the output does not say {text!r}\n{ran.result.tail()}"
    return check


def one_line(prefix: str) -> Check:
    """A refusal: stderr holds exactly one line starting with `prefix` (the clear error), no traceback."""
    def check(ran: Ran) -> None:
        lines = [line for line in ran.result.stderr.splitlines() if line.strip()]
        hits = [line for line in lines if prefix in line]
        assert len(hits) == 1, f"expected one line with {prefix!r}\n{ran.result.tail()}"
        assert "Traceback" not in ran.result.stderr, ran.result.tail()
    return check


def metric(name: str, test: Callable[[float], bool]) -> Check:
    """metrics.json of the run folder has `name` and it passes `test`."""
    def check(ran: Ran) -> None:
        metrics = json.loads((ran.run_dir() / "metrics.json").read_text())
        assert name in metrics and test(metrics[name]), f"{name}={metrics.get(name)!r}"
    return check


def custom(function: Callable[[Ran], None]) -> Check:
    return function
