"""pytest plugin: every session ends with its skipped tests grouped by reason; under `CI=true` a skip that the
allow-list does not declare fails the session.

Why: a skip is green. A missing package, a service that did not start or a data folder that is not there
turns a whole group of tests into skips, and a green CI would hide it. In CI every skip must therefore be
declared in `tests/skips_allowed.txt` (tests that cannot run there, such as live tests without their keys),
each entry with a comment saying why. Outside CI the report is printed and nothing else changes.

Allow-list format: `<test id glob> | <reason regex>` per line, `fnmatch` on the test id and `re.search` on the
skip reason (both must match), each entry directly below one or more `#` lines that say why it is allowed.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

DEFAULT_ALLOW_LIST = Path(__file__).with_name("skips_allowed.txt")
#: test ids printed per reason before "... and N more" (the failing ones under CI are always all printed)
IDS_PER_REASON = 20


def in_ci() -> bool:
    """CI runners set `CI=true` (GitHub, GitLab, ...); `.ci/run` exports it too."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


@dataclass(frozen=True)
class AllowedSkip:
    """One declared skip: which tests, for which reason, and why that is allowed."""

    test_glob: str
    reason: re.Pattern[str]
    why: str
    line: int

    def matches(self, test_id: str, reason: str) -> bool:
        return fnmatch.fnmatchcase(test_id, self.test_glob) and self.reason.search(reason) is not None


def load_allow_list(path: Path) -> list[AllowedSkip]:
    """Entries of an allow-list file; a malformed entry or one without its comment is a usage error naming
    the line (an undocumented exception is exactly what the list exists to prevent)."""
    entries: list[AllowedSkip] = []
    why: list[str] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line:
            why = []
            continue
        if line.startswith("#"):
            why.append(line.lstrip("#").strip())
            continue
        where = f"{path}:{number}"
        if " | " not in line:
            raise pytest.UsageError(f"{where}: an allow-list entry is '<test id glob> | <reason regex>', got {line!r}")
        if not any(why):
            raise pytest.UsageError(f"{where}: allow-list entry {line!r} has no '#' comment above it saying why "
                                    f"the skip is allowed")
        glob, pattern = (part.strip() for part in line.split(" | ", 1))
        try:
            regex = re.compile(pattern)
        except re.error as err:
            raise pytest.UsageError(f"{where}: reason pattern {pattern!r} is not a regular expression ({err})") \
                from None
        entries.append(AllowedSkip(glob, regex, " ".join(w for w in why if w), number))
    return entries


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The reason given to `pytest.skip`, a `skipif` mark or `importorskip`, without pytest's prefix."""
    longrepr = report.longrepr
    text = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ").strip()


class SkipReporter:
    """Collects the session's skips (collection and test phases), judges them under CI, prints them by reason."""

    def __init__(self, allow_list: Path, ci: bool):
        self.allow_list, self.ci = allow_list, ci
        self.entries: list[AllowedSkip] = []
        if ci:  # read up front: a missing or broken list stops the session before any test runs
            if not allow_list.is_file():
                raise pytest.UsageError(f"CI=true: the skip allow-list {allow_list} does not exist (--skips-allowed)")
            self.entries = load_allow_list(allow_list)
        #: (test id, reason) of every skip, in order
        self.skips: list[tuple[str, str]] = []
        #: the skips no entry declares (filled at the end, under CI only)
        self.undeclared: list[tuple[str, str]] = []

    def allowed_by(self, test_id: str, reason: str) -> AllowedSkip | None:
        return next((e for e in self.entries if e.matches(test_id, reason)), None)

    def _record(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):  # an xfail is an expected failure, not a skip
            self.skips.append((report.nodeid, skip_reason(report)))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._record(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self._record(report)  # a module-level skip skips the whole module at collection

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.ci:
            return
        self.undeclared = [(t, r) for t, r in self.skips if self.allowed_by(t, r) is None]
        # a module skipped at collection can leave nothing collected (exit 5): that is this failure too
        if self.undeclared and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.skips:
            return
        by_reason: dict[str, list[str]] = defaultdict(list)
        for test_id, reason in self.skips:
            by_reason[reason].append(test_id)
        tr = terminalreporter
        tr.section(f"skipped tests by reason ({len(self.skips)})", sep="-", yellow=True)
        for reason, ids in sorted(by_reason.items(), key=lambda item: (-len(item[1]), item[0])):
            note = ""
            if self.ci:
                allowed = [self.allowed_by(test_id, reason) for test_id in ids]
                first = next((e for e in allowed if e is not None), None)
                note = ("  [NOT ALLOWED in CI]" if first is None else
                        f"  [allowed, {self.allow_list.name}:{first.line}]" if all(allowed) else
                        "  [allowed for some of these tests only]")
            tr.write_line(f"{len(ids)} x {reason}{note}")
            for test_id in ids[:IDS_PER_REASON]:
                tr.write_line(f"    {test_id}")
            if len(ids) > IDS_PER_REASON:
                tr.write_line(f"    ... and {len(ids) - IDS_PER_REASON} more")
        if self.undeclared:
            tr.section("skips not allowed in CI", sep="-", red=True)
            for test_id, reason in self.undeclared:
                tr.write_line(f"{test_id}: {reason}", red=True)
            tr.write_line(f"CI=true: {len(self.undeclared)} skipped test(s) not declared in {self.allow_list}: the "
                          f"session fails; make them run, or declare the skip there with a comment saying why",
                          red=True, bold=True)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--skips-allowed", default=str(DEFAULT_ALLOW_LIST), metavar="FILE",
                     help="allow-list of skips under CI=true (default: tests/skips_allowed.txt)")


def pytest_configure(config: pytest.Config) -> None:
    reporter = SkipReporter(Path(config.getoption("--skips-allowed")), in_ci())
    config.pluginmanager.register(reporter, "rag-skip-reporter")
