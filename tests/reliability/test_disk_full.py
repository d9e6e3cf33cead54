"""Issue 25, fault 6: a full disk in the run folder or the cache ended in an `OSError` traceback naming no path
(integrity held). Now one line naming the file and the bytes it needed; nothing half-written is left behind, and
a journal line torn by the full disk is dropped when the run resumes. A real full file system: a 64 KiB tmpfs."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag.core.errors import DiskFullError
from rag.core.io import JsonlJournal, atomic_write_text
from rag.llm.cache import ResponseCache


@pytest.fixture
def tiny_disk(tmp_path) -> Iterator[Path]:
    mount = tmp_path / "tiny"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {proc.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_full_disk_is_one_line_naming_the_file_and_leaves_nothing_half_written(tiny_disk):
    target = tiny_disk / "run" / "answers.jsonl"
    with pytest.raises(DiskFullError) as err:
        atomic_write_text(target, "x" * 200_000)
    line = str(err.value)
    assert "\n" not in line and str(target) in line and "200,000 bytes needed" in line and "bytes free" in line
    assert not target.exists() and not list(target.parent.glob(".*.tmp"))  # no temporary file left
    # the response cache writes the same way
    cache = ResponseCache(tiny_disk / "cache")
    with pytest.raises(DiskFullError, match="no space left writing"):
        cache.put({"model": "m", "prompt": "p" * 100_000}, {"text": "t"})


def test_a_journal_line_torn_by_a_full_disk_is_dropped_on_resume(tiny_disk):
    journal = JsonlJournal(tiny_disk / "run" / "answers.partial.jsonl")
    journal.append([{"id": "q1", "answer": "kept"}])
    with pytest.raises(DiskFullError, match="answers.partial.jsonl"):
        journal.append([{"id": "q2", "answer": "y" * 200_000}])
    assert [r["id"] for r in journal.read()] == ["q1"]  # the torn second line is not an answer
