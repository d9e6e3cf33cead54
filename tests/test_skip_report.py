"""The skip report (tests/skip_report.py), run inside a real pytest session with `pytester`: skips are printed by
reason; under CI=true a skip outside the allow-list fails the session and an allowed one does not; without CI
nothing but the report changes; the allow-list refuses undocumented entries; the project's own list is valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.skip_report import DEFAULT_ALLOW_LIST, load_allow_list

TESTS = """
import pytest

def test_runs():
    assert True

@pytest.mark.skipif(True, reason="LIVE_KEY not set")
def test_live_thing():
    pass

def test_needs_a_service():
    pytest.skip("service did not start")

@pytest.mark.xfail(reason="known bug", strict=True)
def test_known_bug():
    assert False
"""

ALLOW_LIVE = """# live tests without their key: the key is not in CI
test_one.py::test_live_* | ^LIVE_KEY not set$
"""


def _run(pytester: pytest.Pytester, allow_list: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_one=TESTS)
    path = pytester.path / "allowed.txt"
    path.write_text(allow_list)
    return pytester.runpytest("-p", "tests.skip_report", f"--skips-allowed={path}", "-p", "no:cacheprovider", *args)


def test_without_ci_skips_are_printed_by_reason_and_the_session_passes(pytester, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    result = _run(pytester, "")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1, skipped=2, xfailed=1)
    result.stdout.fnmatch_lines(["*skipped tests by reason (2)*", "1 x LIVE_KEY not set*",
                                 "    test_one.py::test_live_thing", "1 x service did not start*",
                                 "    test_one.py::test_needs_a_service"])
    assert "not allowed in CI" not in result.stdout.str() and "known bug" not in result.stdout.str()


def test_under_ci_a_skip_outside_the_allow_list_fails_the_session(pytester, monkeypatch):
    monkeypatch.setenv("CI", "true")
    result = _run(pytester, ALLOW_LIVE)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, skipped=2, xfailed=1)
    result.stdout.fnmatch_lines(["*skips not allowed in CI*", "test_one.py::test_needs_a_service: service did not start",
                                 "CI=true: 1 skipped test(s) not declared in *allowed.txt*"])
    # the allowed one is reported as allowed, not as a failure
    result.stdout.fnmatch_lines(["1 x LIVE_KEY not set  [allowed, allowed.txt:2]"])
    assert "test_one.py::test_live_thing: LIVE_KEY" not in result.stdout.str()


def test_under_ci_allowed_skips_pass(pytester, monkeypatch):
    monkeypatch.setenv("CI", "true")
    result = _run(pytester, ALLOW_LIVE, "-k", "not needs_a_service")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1, skipped=1, xfailed=1)


def test_an_entry_must_match_both_the_test_id_and_the_reason(pytester, monkeypatch):
    monkeypatch.setenv("CI", "true")
    wrong_test = "# the reason matches, the test does not\ntest_one.py::test_other_* | ^LIVE_KEY not set$\n"
    result = _run(pytester, wrong_test, "-k", "live_thing")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    wrong_reason = "# the test matches, the reason does not\ntest_one.py::test_live_* | ^OTHER_KEY not set$\n"
    assert _run(pytester, wrong_reason, "-k", "live_thing").ret == pytest.ExitCode.TESTS_FAILED


def test_under_ci_a_module_skipped_at_collection_fails_the_session(pytester, monkeypatch):
    """A module-level `importorskip` of a package that is not there skips the whole module at collection."""
    monkeypatch.setenv("CI", "true")
    pytester.makepyfile(test_two='import pytest\npytest.importorskip("no_such_package_rag_ci")\n\n'
                                 'def test_a():\n    pass\n')
    result = _run(pytester, ALLOW_LIVE, "test_two.py")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["test_two.py: could not import 'no_such_package_rag_ci'*"])


def test_failures_keep_their_exit_status_under_ci(pytester, monkeypatch):
    monkeypatch.setenv("CI", "true")
    pytester.makepyfile(test_three="def test_fails():\n    assert False\n")
    assert _run(pytester, ALLOW_LIVE, "test_three.py").ret == pytest.ExitCode.TESTS_FAILED


def test_an_entry_without_its_comment_is_refused(pytester, monkeypatch):
    monkeypatch.setenv("CI", "true")
    result = _run(pytester, "test_one.py::test_live_* | ^LIVE_KEY not set$\n")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*allowed.txt:1: allow-list entry * has no '#' comment above it*"])


def test_bad_entries_name_their_line(tmp_path):
    path = tmp_path / "allowed.txt"
    path.write_text("# why\ntest_x.py::* no separator\n")
    with pytest.raises(pytest.UsageError, match=r"allowed\.txt:2: an allow-list entry is"):
        load_allow_list(path)
    path.write_text("# why\ntest_x.py::* | (unclosed\n")
    with pytest.raises(pytest.UsageError, match=r"allowed\.txt:2: reason pattern '\(unclosed' is not a regular"):
        load_allow_list(path)


def test_the_projects_allow_list_is_short_documented_and_declares_live_tests_only():
    entries = load_allow_list(DEFAULT_ALLOW_LIST)
    assert 0 < len(entries) <= 10 and all(e.why for e in entries)
    root = Path(__file__).resolve().parents[1]
    for entry in entries:
        files = sorted(root.glob(entry.test_glob.split("::")[0]))
        assert files, f"{DEFAULT_ALLOW_LIST.name}:{entry.line}: no test file matches {entry.test_glob}"
        assert "::test_live_" in entry.test_glob, entry  # only live tests may be skipped in CI
