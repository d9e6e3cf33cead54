"""Issue 9, fault 3: an unreachable OpenAI-compatible endpoint fails in seconds with one line naming it (today:
about 46 s and a 140-line traceback without the host). A real closed port on 127.0.0.1; the check against a real
llama.cpp server is covered by tests/llm/test_openai_server.py, whose requests now pass through it."""

from __future__ import annotations

import socket

import pytest

from rag.core.errors import ServiceError
from rag.llm.base import LLMRequest, SamplingParams
from rag.llm.openai_compat import OpenAICompatibleEngine
from tests.cluster.helpers import rag_env, rag_main


def _closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_engine_names_the_unreachable_url():
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    engine = OpenAICompatibleEngine(model="m", base_url=url, api_key_env=None, max_retries=4)
    request = LLMRequest(messages=[{"role": "user", "content": "hi"}], params=SamplingParams(max_tokens=4))
    with pytest.raises(ServiceError, match=url.replace(".", r"\.")) as err:
        engine.generate([request])
    assert "\n" not in str(err.value)
    assert engine.usage.calls == 0


def test_rag_main_fails_in_one_line_naming_the_host_without_credentials(hotpot_data, tmp_path):
    port = _closed_port()
    url = f"http://127.0.0.1:{port}/v1"
    proc = rag_main(["llm=llamacpp_server", "dataset=hotpotqa", "dataset.limit=1", "logger=none",
                     f"hydra.run.dir={tmp_path / 'run'}"], rag_env(tmp_path, RAG_LLM_BASE_URL=url), timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert "Traceback" not in out
    [line] = [ln for ln in out.splitlines() if "ServiceError" in ln]
    assert f"127.0.0.1:{port}/v1" in line
    assert not (tmp_path / "run" / "answers.jsonl").exists()
    # credentials in the URL (here through the variable the config interpolates) are refused before any work,
    # in one line naming the setting and never the password (issue 36)
    proc = rag_main(["llm=llamacpp_server", "dataset=hotpotqa", "dataset.limit=1", "logger=none",
                     f"hydra.run.dir={tmp_path / 'run2'}"],
                    rag_env(tmp_path, RAG_LLM_BASE_URL=f"http://alice:HUNTER2PASS@127.0.0.1:{port}/v1"), timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in out and "HUNTER2PASS" not in out
    assert [ln for ln in out.splitlines() if ln.strip()] == [ln for ln in out.splitlines() if "llm.base_url:" in ln]
    assert not (tmp_path / "run2").exists()
