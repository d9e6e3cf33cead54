"""Issue 52: two Unix users share one cache, and start overlapping sweeps at the same moment.

As docs/cluster.md section 2 sets a team up: one group-writable cache folder (setgid, `umask 002`), two users of
that group. Here the users are uids 65533 and 65534 in group 4242, each a process without capabilities
(`setpriv`), so file modes bind them as they bind any user; the folder lies outside pytest's root-only temporary
tree. Their sweeps (BM25, 4 HotpotQA questions, the instant endpoint answering) share the cells with `rerank.k=2`.

What must hold: both sweeps complete; every cache file reads back (no torn line or file); the stage caches did
each retrieval once between them (their file locks); the LLM response cache answered every distinct prompt at
least once and at most twice (its entries are written atomically without a lock: two processes may both ask);
the BM25 index was built once; and the shared cells' answers are byte-identical between the users and to those
of one user running alone. Needs root (to play the users) and setpriv; skipped otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.cluster.helpers import rag_env
from tests.conftest import ROOT
from tests.instant_endpoint import InstantEndpoint

pytestmark = pytest.mark.slow
GROUP = 4242
USERS = {"ada": 65533, "bob": 65534}
N = 4
BASE = ["dataset=hotpotqa", f"dataset.limit={N}", "retriever=bm25", "retriever.k=5,10", "llm=openai_compatible",
        "logger=none"]
RERANK_K = {"ada": "rerank.k=1,2", "bob": "rerank.k=2,3", "alone": "rerank.k=2"}


def _as(uid: int) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={GROUP}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--"]


def _env(area: Path, who: str, cache: Path, endpoint: InstantEndpoint) -> dict[str, str]:
    home = area / who
    return {**rag_env(home, cache), "HOME": str(home), "OPENAI_BASE_URL": endpoint.url,
            "OPENAI_MODEL": endpoint.model, "OPENAI_API_KEY": "instant-endpoint-accepts-any-key"}


def _cells(sweep: Path) -> dict[str, Path]:
    """Cell folders by their rerank.k and retriever.k."""
    out = {}
    for cell in (p for p in sweep.iterdir() if (p / "metrics.json").is_file()):
        config = json.loads((cell / "config.json").read_text())
        out[f"k{config['retriever']['k']}-r{config['rerank']['k']}"] = cell
    return out


def _metrics(cells: dict[str, Path]) -> list[dict]:
    return [json.loads((c / "metrics.json").read_text()) for c in cells.values()]


def test_two_users_on_one_shared_cache_overlapping_sweeps_at_once(hotpot_data):
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("playing two users needs root and setpriv")
    area = Path(tempfile.mkdtemp(prefix="rag-two-users-"))  # /tmp is open to every user; pytest's tree is not
    try:
        os.chmod(area, 0o755)
        cache = area / "cache"
        cache.mkdir()
        os.chown(cache, 0, GROUP)
        os.chmod(cache, 0o2775)  # setgid: what either user makes in it belongs to the group
        for who, uid in USERS.items():
            (area / who).mkdir()
            os.chown(area / who, uid, GROUP)
        with InstantEndpoint() as endpoint:
            started = {who: subprocess.Popen(
                [*_as(uid), sys.executable, "-m", "rag.main", "-m", *BASE, RERANK_K[who],
                 f"hydra.sweep.dir={area / who / 'sweep'}"], cwd=ROOT, env=_env(area, who, cache, endpoint),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, umask=0o002)
                for who, uid in USERS.items()}
            outputs = {who: p.communicate(timeout=1200)[0] for who, p in started.items()}
            alone = area / "alone"
            done = subprocess.run([sys.executable, "-m", "rag.main", "-m", *BASE, RERANK_K["alone"],
                                   f"hydra.sweep.dir={alone / 'sweep'}"], cwd=ROOT,
                                  env=_env(area, "alone", alone / "cache", endpoint), capture_output=True, text=True,
                                  timeout=900)
        for who, process in started.items():
            assert process.returncode == 0, f"{who}: {outputs[who][-3000:]}"
        assert done.returncode == 0, done.stderr[-3000:]

        # every cache file reads back whole, and is the group's to write
        for path in cache.rglob("*"):
            mode = stat.S_IMODE(path.lstat().st_mode)
            assert path.lstat().st_gid == GROUP and mode & 0o020, (path, oct(mode))
            lines = path.read_text().splitlines() if path.suffix == ".jsonl" else \
                [path.read_text()] if path.suffix == ".json" else []
            for n, line in enumerate(lines, start=1):
                try:
                    json.loads(line)
                except ValueError:
                    pytest.fail(f"{path}:{n}: not JSON (a torn write)")
        owners = {p.lstat().st_uid for p in cache.rglob("*") if p.is_file()}
        assert owners <= set(USERS.values()) and owners, owners

        cells = {who: _cells(area / who / "sweep") for who in USERS}
        assert sorted(cells["ada"]) == ["k10-r1", "k10-r2", "k5-r1", "k5-r2"]
        assert sorted(cells["bob"]) == ["k10-r2", "k10-r3", "k5-r2", "k5-r3"]
        everything = [m for who in USERS for m in _metrics(cells[who])]
        # the stage caches: every cell retrieves at one shared depth, so N questions were retrieved once in all
        assert sum(m["retrieval_calls"] for m in everything) == N, [m["retrieval_calls"] for m in everything]
        assert sum(m["retrieval_calls"] + m["retrieval_cache_hits"] for m in everything) == N * len(everything)
        # the LLM responses: rerank.k 1, 2, 3 make 3 x N distinct prompts (retriever.k changes no prompt here)
        asked = sum(m["llm_calls"] for m in everything)
        assert 3 * N <= asked <= 2 * 3 * N, asked
        assert sum(m["llm_calls"] + m["llm_cache_hits"] for m in everything) == N * len(everything)
        builds = [p for p in (cache / "index").iterdir() if p.is_dir() and not p.name.startswith(".")]
        assert len(builds) == 1, builds  # one BM25 index, built under its lock by whichever user came first

        mine = _cells(alone / "sweep")
        for key in ("k5-r2", "k10-r2"):
            expected = (mine[key] / "answers.jsonl").read_bytes()
            assert (cells["ada"][key] / "answers.jsonl").read_bytes() == expected, key
            assert (cells["bob"][key] / "answers.jsonl").read_bytes() == expected, key
    finally:
        shutil.rmtree(area, ignore_errors=True)
