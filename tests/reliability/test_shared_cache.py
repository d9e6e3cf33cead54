"""Issue 9, fault 6: a cache shared between users. Files and index folders honour the umask (group-shared with
`umask 002`), a second user reads a complete cache it cannot write without taking locks, and a write it is not
allowed to do ends in one line naming the path.

Real `python -m rag.main` runs (HotpotQA, BM25, Gemma 270M, one question), the second user being `nobody`
(uid 65534), so the test needs root to switch users; skipped otherwise."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.cluster.helpers import CHEAP, rag_env
from tests.conftest import ROOT

pytestmark = pytest.mark.slow
ARGS = [*CHEAP, "dataset.limit=1", "logger=none"]
NOBODY = 65534


def _run(args: list[str], env: dict[str, str], user: int | None = None, umask: int = 0o022):
    return subprocess.run([sys.executable, "-m", "rag.main", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900, user=user, group=user, extra_groups=[] if user else None,
                          umask=umask)


@pytest.fixture()
def shared_root():
    if os.geteuid() != 0:
        pytest.skip("switching to a second user needs root")
    root = Path(tempfile.mkdtemp(prefix="rag-shared-"))
    root.chmod(0o755)  # pytest's own tmp folders are private to root
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _modes(root: Path) -> tuple[set[int], set[int]]:
    files, dirs = set(), set()
    for path in root.rglob("*"):
        mode = stat.S_IMODE(path.lstat().st_mode)
        (dirs if path.is_dir() else files).add(mode)
    return files, dirs


def test_cache_built_by_one_user_serves_another(hotpot_data, shared_root):
    cache = shared_root / "cache"
    owner_env = rag_env(shared_root / "owner", cache)
    built = _run([*ARGS, f"hydra.run.dir={shared_root / 'owner-run'}"], owner_env, umask=0o002)
    assert built.returncode == 0, built.stderr[-3000:]

    files, dirs = _modes(cache)
    assert files and dirs
    assert files <= {0o664}, sorted(oct(m) for m in files)  # umask 002: group-writable, never 0600
    assert dirs <= {0o775}, sorted(oct(m) for m in dirs)  # index folders too, never 0700
    assert list((cache / "index").iterdir()) and list((cache / "retrieval").glob("*.jsonl"))

    # a second user, not in the owner's group: reads the complete cache (no lock file can be created)
    home = shared_root / "nobody"
    home.mkdir(mode=0o777)
    home.chmod(0o777)
    other_env = {**rag_env(home, cache), "HOME": str(home)}
    read = _run([*ARGS, f"hydra.run.dir={home / 'run'}"], other_env, user=NOBODY)
    out = read.stdout + read.stderr
    assert read.returncode == 0, out[-3000:]
    assert (home / "run" / "metrics.json").is_file()

    # work the cache lacks, which it may not write: one line naming the path, no traceback
    denied = _run([*ARGS, "cache.retrieval_depth=50", f"hydra.run.dir={home / 'run2'}"], other_env, user=NOBODY)
    out = denied.stdout + denied.stderr
    assert denied.returncode == 2, out[-3000:]
    assert "Traceback" not in out
    [line] = [ln for ln in out.splitlines() if "PermissionError" in ln]
    assert str(cache) in line
