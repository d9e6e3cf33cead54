"""Anthropic engine: the exact Messages API request the real SDK sends, parsing, retries, cost and secrets.

The SDK talks to an HTTP server on 127.0.0.1 answering like the documented `POST /v1/messages`: a `message`
object with `content: [{"type": "text", "text"}]`, `stop_reason` and `usage: {input_tokens, output_tokens}`;
errors as `{"type": "error", "error": {"type", "message"}}`.
"""

from __future__ import annotations

import logging

import anthropic  # noqa: F401  (installed by `make setup`: missing fails, never skips)
import pytest

from rag.llm.anthropic_engine import AnthropicEngine, AnthropicEngineError
from rag.llm.base import LLMRequest, SamplingParams
from rag.llm.cache import ResponseCache
from tests.backends.conftest import Reply

KEY = "sk-ant-test-never-log-me-31337"
MESSAGES = [{"role": "system", "content": "You are an expert evaluator."},
            {"role": "user", "content": "Is Paris the capital of France? Answer yes or no."}]


def _message(text: str, input_tokens: int = 25, output_tokens: int = 3, stop_reason: str = "end_turn") -> dict:
    return {"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
            "model": "claude-haiku-4-5-20251001", "content": [{"type": "text", "text": text}],
            "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}


def _error(kind: str, message: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _engine(url: str, **kwargs) -> AnthropicEngine:
    return AnthropicEngine(**{"base_url": url, "backoff_initial_s": 0.01, "backoff_max_s": 0.02, **kwargs})


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def test_request_body_and_response(fake_service, key):
    fake_service.replies = [Reply(200, _message(" yes "))]
    engine = _engine(fake_service.url)
    params = SamplingParams(temperature=0.0, max_tokens=64, stop=("\n\n",))
    [completion] = engine.generate([LLMRequest(MESSAGES, params)])

    [rec] = fake_service.requests
    assert (rec.method, rec.path) == ("POST", "/v1/messages")
    assert rec.json() == {"model": "claude-haiku-4-5-20251001", "max_tokens": 64, "temperature": 0.0,
                          "system": "You are an expert evaluator.",
                          "messages": [{"role": "user", "content": MESSAGES[1]["content"]}],
                          "stop_sequences": ["\n\n"]}
    assert KEY in (rec.headers.get("x-api-key", ""), rec.headers.get("authorization", "").removeprefix("Bearer "))
    assert rec.headers.get("anthropic-version")
    assert rec.headers.get("x-stainless-retry-count") in (None, "0")
    assert completion.text == "yes" and completion.finish_reason == "stop"
    assert (completion.prompt_tokens, completion.completion_tokens) == (25, 3)
    assert engine.usage.calls == 1 and engine.usage.prompt_tokens == 25
    assert engine.cost_usd == pytest.approx((25 * 1.0 + 3 * 5.0) / 1e6)
    assert engine.usage_report()["cost_usd"] == engine.cost_usd


def test_top_p_multi_turn_and_no_system(fake_service, key):
    fake_service.replies = [Reply(200, _message("ok", stop_reason="max_tokens"))]
    turns = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    [completion] = _engine(fake_service.url).generate([LLMRequest(turns, SamplingParams(top_p=0.9))])
    body = fake_service.requests[0].json()
    assert "system" not in body and "stop_sequences" not in body
    assert body["messages"] == turns and body["top_p"] == 0.9 and body["temperature"] == 0.1
    assert completion.finish_reason == "length"


def test_rate_limit_and_overload_are_retried(fake_service, key):
    fake_service.replies = [Reply(429, _error("rate_limit_error", "slow down"), {"retry-after": "0"}),
                            Reply(529, _error("overloaded_error", "Overloaded")),
                            Reply(200, _message("yes"))]
    [completion] = _engine(fake_service.url, max_retries=2).generate([LLMRequest(MESSAGES)])
    assert completion.text == "yes" and len(fake_service.requests) == 3


def test_retries_are_bounded(fake_service, key):
    fake_service.replies = [Reply(500, _error("api_error", "Internal server error"))]
    with pytest.raises(AnthropicEngineError) as err:
        _engine(fake_service.url, max_retries=2).generate([LLMRequest(MESSAGES)])
    assert len(fake_service.requests) == 3
    assert "500" in str(err.value) and "3 attempts" in str(err.value) and "\n" not in str(err.value)


def test_refused_key_fails_once_without_leaking_it(fake_service, key):
    fake_service.replies = [Reply(401, _error("authentication_error", "invalid x-api-key"))]
    with pytest.raises(AnthropicEngineError) as err:
        _engine(fake_service.url, max_retries=4).generate([LLMRequest(MESSAGES)])
    assert len(fake_service.requests) == 1
    assert "ANTHROPIC_API_KEY" in str(err.value) and KEY not in str(err.value)


def test_missing_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(AnthropicEngineError, match="ANTHROPIC_API_KEY"):
        AnthropicEngine().generate([LLMRequest(MESSAGES)])


def test_cached_requests_cost_nothing(fake_service, key, tmp_path):
    fake_service.replies = [Reply(200, _message("yes", 100, 10))]
    engine = _engine(fake_service.url, cache=ResponseCache(tmp_path), price_input_per_mtok=1.0,
                     price_output_per_mtok=5.0)
    engine.generate([LLMRequest(MESSAGES)])
    [again] = engine.generate([LLMRequest(MESSAGES)])
    assert again.cached and len(fake_service.requests) == 1
    assert engine.cost_usd == pytest.approx((100 * 1.0 + 10 * 5.0) / 1e6)


def test_concurrency_keeps_order(fake_service, key):
    def respond(rec):
        return Reply(200, _message(rec.json()["messages"][0]["content"].upper()))

    fake_service.responder = respond
    requests = [LLMRequest([{"role": "user", "content": f"q{i}"}]) for i in range(9)]
    out = _engine(fake_service.url, concurrency=4).generate(requests)
    assert [c.text for c in out] == [f"Q{i}" for i in range(9)]


def test_key_never_in_repr_or_logs(fake_service, key, caplog):
    caplog.set_level(logging.DEBUG)
    fake_service.replies = [Reply(200, _message("yes"))]
    engine = _engine(fake_service.url)
    engine.generate([LLMRequest(MESSAGES)])
    assert KEY not in repr(engine) and KEY not in caplog.text
    assert all(KEY not in repr(v) for k, v in vars(engine).items() if k != "_client")
