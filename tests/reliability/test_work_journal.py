"""Issue 52: work is measured once, whatever happens to the execution that did it.

A killed execution's LLM calls used to be counted nowhere: the execution that finished the folder wrote only its
own, and the cost table divided them by all the answers (AstuteRAG showed 2.0 requests per question against the 3.0
it needed). Each execution now journals its work with every chunk of answers (`work.partial.jsonl`) and once more
when it is stopped (SIGTERM, as a preemption or `scancel` sends); the execution that finishes the folder counts the
stopped ones' work in metrics.json, keeps their own lines in work_history.jsonl, and names the part of it that
produced nothing kept as `wasted/...`.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time

from rag.folders import RunFolder
from tests.cluster.helpers import PYTHON, ROOT, journal_lines, rag_env, rag_main, wait_for
from tests.instant_endpoint import InstantEndpoint

N = 6


def _args(endpoint: InstantEndpoint, run_dir) -> list[str]:
    return ["dataset=hotpotqa", f"dataset.limit={N}", "retriever.k=5", "rerank.k=2", "generator=simple",
            "generation.chunk_size=2", "llm=openai_compatible", f"llm.base_url={endpoint.url}",
            f"llm.model={endpoint.model}", "cache.llm_responses=false", "logger=none", f"hydra.run.dir={run_dir}"]


def _stop_after_first_chunk(args: list[str], env: dict[str, str], run_dir, how: signal.Signals) -> int:
    proc = subprocess.Popen([PYTHON, "-m", "rag.main", *args], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: journal_lines(run_dir) >= 2, timeout=300, interval=0.05, what="a journalled chunk")
        time.sleep(0.2)  # inside the next chunk's first completion (0.4 s): work that will be wasted
        proc.send_signal(how)
        return proc.wait(timeout=120)
    finally:
        proc.kill()


def test_a_stopped_execution_s_work_is_counted_and_its_waste_named(tmp_path):
    run_dir = tmp_path / "run"
    with InstantEndpoint(delay_s=0.4) as endpoint:  # 0.4 s a completion: time to stop it between chunks
        env = rag_env(tmp_path)
        status = _stop_after_first_chunk(_args(endpoint, run_dir), env, run_dir, signal.SIGTERM)
        assert status == -signal.SIGTERM  # it ends as SIGTERM ends a process, after its last word
        stopped = [json.loads(line) for line in (run_dir / RunFolder.WORK_JOURNAL).read_text().splitlines()]
        assert stopped[-1]["stopped"] == "SIGTERM" and stopped[0]["answered"] == 2 and stopped[0]["llm_calls"] == 2
        kept = journal_lines(run_dir)
        proc = rag_main(_args(endpoint, run_dir), env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    folder = RunFolder(run_dir)
    metrics, history = folder.metrics(), folder.work_history()
    wasted_calls = metrics.get("wasted/llm_calls", 0)
    # every kept answer's call is counted once, the stopped execution's among them; a call it finished after its
    # last chunk is work wasted, named apart
    assert metrics["llm_calls"] == N and len(endpoint.requests) >= N + wasted_calls
    assert [h.get("stopped") for h in history] == ["SIGTERM", None]
    assert history[0]["answered"] == kept and history[1]["answered"] == N - kept
    assert history[0]["llm_calls"] == kept + wasted_calls and history[1]["llm_calls"] == N - kept
    # the stopped execution's time after its last kept chunk: measured, and not in the answers' figures
    assert sum(v for k, v in metrics.items() if k.startswith("wasted/time/")) > 0 and metrics["time/generate_s"] > 0
    assert not (run_dir / RunFolder.WORK_JOURNAL).exists()  # the folder finished: its journals are gone


def test_a_killed_execution_s_journalled_work_is_counted(tmp_path):
    """SIGKILL leaves no word: the work up to its last journalled chunk is what is known, and it is counted."""
    run_dir = tmp_path / "run"
    with InstantEndpoint(delay_s=0.4) as endpoint:
        env = rag_env(tmp_path)
        assert _stop_after_first_chunk(_args(endpoint, run_dir), env, run_dir, signal.SIGKILL) == -9
        kept = journal_lines(run_dir)
        proc = rag_main(_args(endpoint, run_dir), env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    folder = RunFolder(run_dir)
    assert folder.metrics()["llm_calls"] == N  # before: N - kept, the killed execution's calls counted nowhere
    assert [h.get("stopped") for h in folder.work_history()] == ["killed", None]
    assert not any(k.startswith("wasted/") for k in folder.metrics())  # nothing known after its last chunk
    assert folder.work_history()[0]["answered"] == kept
