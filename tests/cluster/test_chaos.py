"""The chaos sweep of docs/reliability.md, as written, on real SLURM (start it with `.ci/slurm/setup.sh`).

`python -m jobs.chaos outputs/chaos --share 0.25 --resubmit -- python -m rag.main -m hydra/launcher=slurm ...`
runs with the documented-commands table's swaps (CI's one-node cluster block; the instant endpoint answering in
place of Falcon3-10B, here 1.5 s late per answer so that a stopped task is mid-generation and a `scancel`'s SIGTERM
leaves it working for SLURM's KillWait of 10 s before SIGKILL). An undisturbed in-process run of the same sweep,
answered by an instant endpoint without delay (its replies are a function of the request alone), is the reference:
every cell's answers.jsonl must be byte-identical, every quality figure of metrics.json and of the summary equal, and
each stopped cell's work history must name the killed execution with the work it had journalled.
"""

from __future__ import annotations

import csv
import json
import shlex
import subprocess
from pathlib import Path

import pytest

from rag.folders import RunFolder
from tests.cluster.helpers import PYTHON, rag_env
from tests.conftest import ROOT
from tests.docs.store import LOCAL_CONF
from tests.docs.table import CHAOS_COMMAND, ROWS, Ci, swap
from tests.instant_endpoint import InstantEndpoint

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(2400)]

#: seconds each answer of the chaos sweep waits (8 answers a cell: a stopped task still has answers to make). A
#: preempted task works on for SLURM's KillWait (10 s, .ci/slurm/setup.sh) after scancel's SIGTERM, and jobs.chaos
#: may see the first journalled answer a poll or two late: at 1.5 s a task under load finished its last 6 answers
#: inside KillWait and was never stopped. At 3 s, 5 answers left outlast it by 5 s.
DELAY_S = 3.0
#: metrics.json figures that describe the answers (not the work or time it took)
QUALITY = ("answer/", "recall/", "n_questions", "gold_")


def _by_num(sweep: Path) -> dict[int, Path]:
    return {int(p.name.split("_", 1)[0]): p for p in sweep.iterdir() if (p / ".hydra").is_dir()}


def _quality(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if k.startswith(QUALITY)}


def _summary(sweep: Path) -> list[dict]:
    with open(sweep / "summary.csv") as handle:
        rows = list(csv.DictReader(handle))
    keep = [c for c in rows[0] if c.startswith(("answer/", "recall/"))]
    assert keep, rows[0]
    return [{c: r[c] for c in keep} for r in rows]


def test_the_documented_chaos_sweep_ends_as_an_undisturbed_one(slurm, hotpot_data, tmp_path):
    assert isinstance(ROWS[CHAOS_COMMAND], Ci)  # the docs' row says this test runs it
    outer, inner = CHAOS_COMMAND.split(" -- ")
    inner = swap(inner, {"local_conf": str(LOCAL_CONF)}, "instant")
    assert "llm=openai_compatible" in inner and f"file://{LOCAL_CONF}" in inner, inner
    axes = [w for w in shlex.split(inner)[3:] if not w.startswith(("hydra/launcher", "hydra.searchpath"))]

    with InstantEndpoint() as plain:
        env = rag_env(tmp_path / "reference", OPENAI_BASE_URL=plain.url, OPENAI_MODEL=plain.model,
                      OPENAI_API_KEY="instant-endpoint-accepts-any-key")
        reference = tmp_path / "reference" / "sweep"
        done = subprocess.run([PYTHON, "-m", "rag.main", "-m", *axes, f"hydra.sweep.dir={reference}"], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]

    home = tmp_path / "chaos"
    home.mkdir()
    with InstantEndpoint(delay_s=DELAY_S) as slow:
        env = rag_env(home, OPENAI_BASE_URL=slow.url, OPENAI_MODEL=slow.model,
                      OPENAI_API_KEY="instant-endpoint-accepts-any-key")
        # `python` as the docs write it: this checkout's interpreter
        command = [PYTHON if w == "python" else w for w in [*shlex.split(outer), "--", *shlex.split(inner)]]
        done = subprocess.run(command, cwd=home, env=env, capture_output=True, text=True, timeout=2000)
        scancel_everything_of(home)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    chaos = home / "outputs" / "chaos"
    stops = [json.loads(line) for line in (chaos / "chaos.jsonl").read_text().splitlines()]
    # 2 of 8 cells, a quarter, one each way; chaos.jsonl lists them as they were stopped, which is the order their
    # first answers were journalled (under load the second cell drawn can get there first)
    assert sorted(s["way"] for s in stops) == ["kill", "preempt"], output[-3000:]
    assert "every cell complete" in done.stdout, output[-3000:]

    ours, theirs = _by_num(chaos), _by_num(reference)
    assert sorted(ours) == sorted(theirs) == list(range(8))
    for num, cell in ours.items():
        assert (cell / "answers.jsonl").read_bytes() == (theirs[num] / "answers.jsonl").read_bytes(), cell.name
        mine, undisturbed = (json.loads((c / "metrics.json").read_text()) for c in (cell, theirs[num]))
        assert _quality(mine) == _quality(undisturbed) and _quality(mine), cell.name
    assert _summary(chaos) == _summary(reference)
    assert (chaos / "report" / "report.md").is_file()

    for stop in stops:
        cell = ours[stop["num"]]
        history = RunFolder(cell).work_history()
        killed = [h for h in history if h.get("stopped")]
        assert killed and killed[0]["stopped"] in ("killed", "SIGTERM"), history
        # its journalled work is kept: at least the calls of the answers it had journalled when it was stopped
        assert killed[0]["llm_calls"] >= stop["answers_journalled"] >= 1, (stop, history)
        metrics = json.loads((cell / "metrics.json").read_text())
        assert metrics["llm_calls"] + metrics["llm_cache_hits"] >= 8, metrics


def scancel_everything_of(home: Path) -> None:
    """Cancel this test's jobs only (ids from its submitit folders and the resubmission log), e.g. after a timeout."""
    ids = {p.name.split("_")[0] for p in home.glob("outputs/chaos/.submitit/*") if p.name[0].isdigit()}
    log = home / "outputs" / "chaos" / "resubmit.jsonl"
    if log.is_file():
        ids |= {str(json.loads(line)["job_id"]) for line in log.read_text().splitlines() if line.strip()}
    if ids:
        subprocess.run(["scancel", *sorted(ids)], capture_output=True, timeout=30)
