"""The OpenAI-compatible engine against a real llama.cpp server on 127.0.0.1 that the test starts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rag.core.io import read_jsonl
from rag.llm.base import LLMRequest, SamplingParams
from rag.llm.openai_compat import OpenAICompatibleEngine
from rag.main import run
from tests.conftest import compose_config
from tests.llm.server import llama_server

pytestmark = pytest.mark.slow
SECRET = "sk-test-never-log-me-0123456789"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with llama_server(tmp_path_factory.mktemp("server")) as url:
        yield url


def test_batch_of_plain_and_chat_requests(server):
    engine = OpenAICompatibleEngine(model="gemma-270m", base_url=server, chat_format="plain", concurrency=2,
                                    json_mode="gbnf")
    requests = [LLMRequest([{"role": "user", "content": f"Question: What is {n} plus {n}?\nAnswer:"}],
                           SamplingParams(max_tokens=8, temperature=0.0), stop_plain=("\n",)) for n in (1, 2, 3)]
    completions = engine.generate(requests)
    assert len(completions) == 3
    assert all(c.completion_tokens > 0 and c.prompt_tokens > 0 for c in completions)
    assert engine.usage.calls == 3
    body = engine.build_payload(engine._prepare(requests[0]))
    assert body["prompt"].endswith("Answer:") and body["stop"] == ["\n"] and "messages" not in body

    schema = {"type": "object", "properties": {"score": {"type": "integer", "enum": [0, 1, 2]}},
              "required": ["score"]}
    judged = engine.generate([LLMRequest([{"role": "user", "content": "Rate this answer. JSON:"}],
                                         SamplingParams(max_tokens=20, temperature=0.0, json_schema=schema))])
    assert "grammar" in engine.build_payload(LLMRequest([{"role": "user", "content": "x"}],
                                                        SamplingParams(json_schema=schema)))
    assert json.loads(judged[0].text, strict=False)["score"] in (0, 1, 2)


def test_pipeline_through_server_keeps_the_key_out_of_outputs(server, data_dir, shared_cache, tmp_path,
                                                                monkeypatch):
    monkeypatch.setenv("RAG_LLM_API_KEY", SECRET)
    cfg = compose_config([f"paths.cache_dir={shared_cache}", "dataset=hotpotqa", "dataset.limit=2", "logger=wandb",
                          f"logger.dir={tmp_path}", "llm=llamacpp_server", f"llm.base_url={server}",
                          "llm.model=gemma-270m", "generator.max_tokens=16", "rerank.k=2"])
    metrics = run(cfg, tmp_path / "run")
    assert metrics["llm_calls"] + metrics["llm_cache_hits"] == 2
    assert len(read_jsonl(tmp_path / "run" / "answers.jsonl")) == 2
    for path in Path(tmp_path).rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert os.environ["RAG_LLM_API_KEY"] == SECRET
