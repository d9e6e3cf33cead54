"""A killed run, rerun into the same folder, continues: answers already written are kept, none is generated
twice and none is lost. Real `python -m rag.main` subprocesses with the real Gemma model, killed by SIGKILL
(node failure, OOM killer) or SIGTERM (scancel, time limit) while they generate."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from rag.core.io import read_jsonl, read_jsonl_tolerant
from rag.folders import RunFolder
from tests.cluster.helpers import CHEAP, PYTHON, journal_lines, rag_env, rag_main, wait_for
from tests.conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

N = 4
#: two journal chunks of two; the LLM response cache is off so that a regenerated answer shows in llm_calls
ARGS = [*CHEAP, f"dataset.limit={N}", "generation.chunk_size=2", "logger=none", "cache.llm_responses=false"]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("resume-cache")


@pytest.fixture(scope="module")
def uninterrupted(hotpot_data, cache_dir, tmp_path_factory) -> list[dict]:
    tmp = tmp_path_factory.mktemp("uninterrupted")
    run_dir = tmp / "run"
    proc = rag_main([*ARGS, f"hydra.run.dir={run_dir}"], rag_env(tmp, cache_dir))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return read_jsonl(run_dir / "answers.jsonl")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_killed_run_resumes_without_loss_or_duplicates(sig, uninterrupted, cache_dir, tmp_path):
    run_dir = tmp_path / "run"
    env = rag_env(tmp_path, cache_dir)
    cmd = [PYTHON, "-m", "rag.main", *ARGS, f"hydra.run.dir={run_dir}"]
    with open(tmp_path / "killed.err", "w") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
        try:
            wait_for(lambda: journal_lines(run_dir) >= 1 or proc.poll() is not None, timeout=900,
                     interval=0.1, what="the first journalled chunk")
            assert proc.poll() is None, "the run finished before it could be killed"
            proc.send_signal(sig)
            assert proc.wait(timeout=60) == -sig
        finally:
            if proc.poll() is None:
                proc.kill()
    kept = read_jsonl_tolerant(run_dir / "answers.partial.jsonl")
    kept_ids = [r["id"] for r in kept]
    assert 1 <= len(kept) < N, f"killed after {len(kept)} answers: not during generation"
    assert not (run_dir / "answers.jsonl").exists() and not (run_dir / "metrics.json").exists()

    again = rag_main([*ARGS, f"hydra.run.dir={run_dir}"], env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming" in again.stdout + again.stderr

    records = read_jsonl(run_dir / "answers.jsonl")
    ids = [r["id"] for r in records]
    assert ids == [r["id"] for r in uninterrupted], "same questions, same order as an uninterrupted run"
    assert len(set(ids)) == N
    # kept verbatim, and only the missing ones were generated (the response cache is off: no hiding); the run's
    # end adds scores measured over the whole ranking (ir/...), so a kept record's scores are a subset
    by_id = {r["id"]: r for r in records}
    for record in kept:
        final = by_id[record["id"]]
        assert {k: v for k, v in final.items() if k != "scores"} == {k: v for k, v in record.items() if k != "scores"}
        assert record.get("scores", {}).items() <= final.get("scores", {}).items()
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["n_questions"] == N
    # every answer's call counted once (issue 52): the killed execution's journalled work too; the resumed
    # execution generated only what was missing
    assert metrics["llm_calls"] == N, (metrics["llm_calls"], kept_ids)
    assert RunFolder(run_dir).work_history()[-1]["llm_calls"] == N - len(kept_ids)
    assert not (run_dir / "answers.partial.jsonl").exists()
