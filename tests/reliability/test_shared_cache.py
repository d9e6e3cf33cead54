"""Issue 9, fault 6: a cache shared between users. Files and index folders honour the umask (group-shared with
`umask 002`), another user reads a complete cache it cannot write without taking locks, and a write it is not
allowed to do ends in one line naming the path.

Real `python -m rag.main` runs (HotpotQA, BM25, Gemma 270M, one question). The second user: the cache is handed
to uid 65534 (`chown`, modes kept) and read by a process without the capabilities that let root ignore file
modes (`setpriv --inh-caps=-all --bounding-set=-all`), so it sees the cache exactly as another user does.
Needs root and setpriv; skipped otherwise."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.helpers import CHEAP, rag_env
from tests.conftest import ROOT

pytestmark = pytest.mark.slow
ARGS = [*CHEAP, "dataset.limit=1", "logger=none"]
OTHER_UID = 65534
AS_ANOTHER_USER = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--"]


def _run(args: list[str], env: dict[str, str], prefix: list[str] = (), umask: int = 0o022):
    return subprocess.run([*prefix, sys.executable, "-m", "rag.main", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900, umask=umask)


def _modes(root: Path) -> tuple[set[int], set[int]]:
    files, dirs = set(), set()
    for path in root.rglob("*"):
        mode = stat.S_IMODE(path.lstat().st_mode)
        (dirs if path.is_dir() else files).add(mode)
    return files, dirs


def _chown(root: Path, uid: int) -> None:
    for path in [root, *root.rglob("*")]:
        os.lchown(path, uid, uid)


def test_cache_built_by_one_user_serves_another(hotpot_data, tmp_path):
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("playing a second user needs root and setpriv")
    cache = tmp_path / "cache"
    built = _run([*ARGS, f"hydra.run.dir={tmp_path / 'owner-run'}"], rag_env(tmp_path / "owner", cache),
                 umask=0o002)
    assert built.returncode == 0, built.stderr[-3000:]

    files, dirs = _modes(cache)
    assert files and dirs
    assert files <= {0o664}, sorted(oct(m) for m in files)  # umask 002: group-writable, never 0600
    assert dirs <= {0o775}, sorted(oct(m) for m in dirs)  # index folders too, never 0700
    assert list((cache / "index").iterdir()) and list((cache / "retrieval").glob("*.jsonl"))

    # the cache now belongs to another user; this one may read it, not write it (no lock file can be made)
    _chown(cache, OTHER_UID)
    try:
        env = rag_env(tmp_path / "reader", cache)
        read = _run([*ARGS, f"hydra.run.dir={tmp_path / 'reader-run'}"], env, AS_ANOTHER_USER)
        out = read.stdout + read.stderr
        assert read.returncode == 0, out[-3000:]
        assert (tmp_path / "reader-run" / "metrics.json").is_file()

        # work the cache lacks, which this user may not write: one line naming the path, no traceback
        denied = _run([*ARGS, "cache.retrieval_depth=150", f"hydra.run.dir={tmp_path / 'denied-run'}"], env,
                      AS_ANOTHER_USER)
        out = denied.stdout + denied.stderr
        assert denied.returncode == 2, out[-3000:]
        assert "Traceback" not in out
        [line] = [ln for ln in out.splitlines() if "PermissionError" in ln]
        assert str(cache) in line
    finally:
        _chown(cache, os.geteuid())
