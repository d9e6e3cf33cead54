"""Issue 52: one execution at a time per run folder.

Two executions writing one folder at once (a SLURM requeue while the first still runs, one `hydra.run.dir` given to
two jobs) used to append to one journal and sum both executions' work into metrics.json (5 calls, 48,088 tokens for
3 answers). `RunFolder.held` takes an OS file lock for the run: a second execution is refused in one line naming the
holder, before it answers anything; a killed holder lets go with its process, and the next execution resumes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from rag.core.errors import BusyError
from rag.folders import RunFolder
from tests.cluster.helpers import CHEAP, rag_env, rag_main, wait_for

#: a holder in its own process: takes the folder, says so, then sleeps until killed
HOLD = ("import sys, time; from rag.folders import RunFolder\n"
        "with RunFolder(sys.argv[1]).held():\n    print('held', flush=True); time.sleep(600)\n")


def _holder(folder) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_holder_is_refused_naming_the_first(tmp_path):
    folder = RunFolder(tmp_path / "run")
    holder = _holder(folder.dir)
    try:
        with pytest.raises(BusyError) as refused, folder.held():
            pass
        assert f"process {holder.pid} on " in str(refused.value) and str(folder.dir) in str(refused.value)
        assert json.loads((folder.dir / RunFolder.HOLDER).read_text())["pid"] == holder.pid
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with folder.held():  # SIGKILL released the lock: the stale holder file is taken over
        assert json.loads((folder.dir / RunFolder.HOLDER).read_text())["pid"] == os.getpid()
    assert not (folder.dir / RunFolder.HOLDER).exists()  # let go: nobody holds it


def test_rag_main_into_a_held_folder_is_one_line_then_resumes_once_free(tmp_path):
    run_dir = tmp_path / "run"
    env = rag_env(tmp_path)
    args = [*CHEAP, "generator=extractive", "dataset.limit=2", "logger=none", f"hydra.run.dir={run_dir}"]
    holder = _holder(run_dir)
    try:
        proc = rag_main(args, env, timeout=600)
        assert proc.returncode == 2, proc.stderr[-3000:]
        lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
        assert len(lines) == 1 and f"process {holder.pid} on " in lines[0], lines
        assert not RunFolder(run_dir).journal_path.exists() and not RunFolder(run_dir).complete
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    wait_for(lambda: holder.poll() is not None, timeout=10, what="the holder to die")
    proc = rag_main(args, env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert RunFolder(run_dir).complete and len(RunFolder(run_dir).records()) == 2


def test_rejudging_a_held_folder_is_one_line_and_changes_nothing(tmp_path):
    """`python -m eval.main run_dir=RUN` into a folder another execution holds (a run still writing it, another
    judging) is refused before it judges anything; once the holder is gone it judges."""
    from tests.instant_endpoint import InstantEndpoint

    run = tmp_path / "run"
    with InstantEndpoint() as endpoint:
        args = [*CHEAP, "dataset.limit=1", "logger=none", "llm=openai_compatible", f"llm.base_url={endpoint.url}",
                f"llm.model={endpoint.model}", f"hydra.run.dir={run}"]
        env = rag_env(tmp_path)
        assert rag_main(args, env).returncode == 0
        answers = (run / "answers.jsonl").read_bytes()
        judge = [sys.executable, "-m", "eval.main", f"run_dir={run}", "judge=[liverag]"]
        holder = _holder(run)
        try:
            refused = subprocess.run(judge, env=env, capture_output=True, text=True, timeout=300)
        finally:
            holder.send_signal(signal.SIGKILL)
            holder.wait()
        out = refused.stdout + refused.stderr
        assert refused.returncode == 2 and "Traceback" not in out, out[-2000:]
        assert f"{run} is being written by another execution (process {holder.pid} on " in out
        assert (run / "answers.jsonl").read_bytes() == answers and not (run / "eval_report.md").exists()
        judged = subprocess.run(judge, env=env, capture_output=True, text=True, timeout=300)
        assert judged.returncode == 0, judged.stderr[-2000:]
    assert "liverag" in json.loads((run / "answers.jsonl").read_text().splitlines()[0])["judges"]
