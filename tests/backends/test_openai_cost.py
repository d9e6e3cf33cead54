"""Token and cost accounting of the OpenAI-compatible engine, against a local server with the documented
chat-completions response shape (`choices[].message.content`, `usage.prompt_tokens/completion_tokens`)."""

from __future__ import annotations

import pytest

from rag.llm.base import LLMRequest
from rag.llm.hosted import token_cost_usd
from rag.llm.openai_compat import OpenAICompatibleEngine
from tests.backends.conftest import Reply


def _chat(text: str, prompt_tokens: int, completion_tokens: int) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


def test_token_cost():
    assert token_cost_usd(1_000_000, 0, 0.8, 4.0) == pytest.approx(0.8)
    assert token_cost_usd(0, 1_000_000, 0.8, 4.0) == pytest.approx(4.0)
    assert token_cost_usd(10, 10, None, None) == 0.0


def test_cost_of_real_calls(fake_service, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake_service.replies = [Reply(200, _chat("a", 200, 50))]
    engine = OpenAICompatibleEngine(model="m", base_url=f"{fake_service.url}/v1", price_input_per_mtok=2.0,
                                    price_output_per_mtok=10.0, max_retries=0)
    engine.generate([LLMRequest([{"role": "user", "content": f"q{i}"}]) for i in range(3)])
    # the endpoint check (GET /models, once before the first batch) is not a generation and costs nothing
    assert [r.path for r in fake_service.requests] == ["/v1/models"] + ["/v1/chat/completions"] * 3
    assert engine.usage.prompt_tokens == 600 and engine.usage.completion_tokens == 150
    assert engine.cost_usd == pytest.approx(3 * (200 * 2.0 + 50 * 10.0) / 1e6)
    free = OpenAICompatibleEngine(model="m", base_url=f"{fake_service.url}/v1", max_retries=0)
    free.generate([LLMRequest([{"role": "user", "content": "x"}])])
    assert free.cost_usd == 0.0


def test_retried_and_timed_out_requests_count_as_work(fake_service, monkeypatch):
    """A request that timed out (or got a 503) was work for the server: `usage.retries` counts every re-send."""
    import time

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    seen: list[str] = []

    def respond(recorded):
        if recorded.path.endswith("/models"):  # the endpoint check before the first batch
            return Reply(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})
        seen.append(recorded.path)
        if len(seen) == 1:
            time.sleep(0.6)  # longer than the client's timeout: the server generated, the client gave up
            return Reply(200, _chat("late", 10, 5))
        if len(seen) == 2:
            return Reply(503, {"error": "busy"}, headers={"retry-after": "0"})
        return Reply(200, _chat("ok", 10, 5))

    fake_service.responder = respond
    engine = OpenAICompatibleEngine(model="m", base_url=f"{fake_service.url}/v1", timeout_s=0.3, max_retries=3)
    [completion] = engine.generate([LLMRequest([{"role": "user", "content": "q"}])])
    assert completion.text == "ok" and len(seen) == 3
    assert engine.usage.calls == 1 and engine.usage.retries == 2
