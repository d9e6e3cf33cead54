"""OpenAI reasoning models (o-series, gpt-5) refuse `max_tokens`, `temperature` and `top_p` (o3 / o4-mini also
`stop`): the request follows the documented API, `max_completion_tokens` and no refused field, as the config says
(`llm.limit_param`, `llm.refused_params`), never by the model's name. The exact body the real OpenAI SDK sends
is read back from an HTTP server on 127.0.0.1 answering like the documented `POST /v1/chat/completions`."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate

from rag.core.errors import ConfigError
from rag.llm.base import LLMRequest, SamplingParams
from rag.llm.openai_compat import OpenAICompatibleEngine
from tests.backends.conftest import FakeService, Recorded, Reply
from tests.conftest import compose_config

MESSAGES = [{"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "What is the capital of France?"}]
PARAMS = SamplingParams(temperature=0.0, top_p=0.9, max_tokens=512, stop=("\n\n",), seed=7)
REFUSED = ["temperature", "top_p", "stop", "logprobs", "top_logprobs"]


def _chat_completion(rec: Recorded) -> Reply:
    if rec.path.endswith("/models"):
        return Reply(200, {"object": "list", "data": []})
    return Reply(200, {"id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000,
                       "model": rec.json()["model"],
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris."},
                                    "finish_reason": "stop", "logprobs": None}],
                       "usage": {"prompt_tokens": 21, "completion_tokens": 140, "total_tokens": 161,
                                 "completion_tokens_details": {"reasoning_tokens": 136}}})


@pytest.fixture
def service():
    server = FakeService()
    server.responder = _chat_completion
    yield server
    server.close()


def _sent(service: FakeService, engine: OpenAICompatibleEngine, params: SamplingParams = PARAMS) -> dict:
    [completion] = engine.generate([LLMRequest(MESSAGES, params)])
    assert completion.text == "Paris."
    [post] = [r for r in service.requests if r.method == "POST"]
    assert post.path == "/v1/chat/completions"
    return post.json()


def test_reasoning_model_body_has_max_completion_tokens_and_no_refused_field(service, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    engine = OpenAICompatibleEngine(model="gpt-5.4-mini", base_url=service.url + "/v1", limit_param="max_completion_tokens",
                                    refused_params=REFUSED, max_retries=0)
    assert _sent(service, engine) == {"model": "gpt-5.4-mini", "messages": MESSAGES, "max_completion_tokens": 512,
                                      "seed": 7}


def test_default_shape_is_unchanged(service):
    engine = OpenAICompatibleEngine(model="tiiuae/Falcon3-10B-Instruct", base_url=service.url + "/v1", max_retries=0)
    assert _sent(service, engine) == {"model": "tiiuae/Falcon3-10B-Instruct", "messages": MESSAGES,
                                      "temperature": 0.0, "top_p": 0.9, "max_tokens": 512, "seed": 7,
                                      "stop": ["\n\n"]}
    assert "request_shape" not in engine.signature()  # response-cache keys of existing configs stay valid


def test_the_config_chooses_the_shape_not_the_model_name(service):
    """`o3` with the default shape is sent as configured; `llm=openai_reasoning` with any name is shaped."""
    plain = OpenAICompatibleEngine(model="o3", base_url=service.url + "/v1", max_retries=0)
    assert "max_tokens" in plain.build_payload(LLMRequest(MESSAGES, PARAMS))
    cfg = compose_config(["llm=openai_reasoning", f"llm.base_url={service.url}/v1", "llm.model=my-finetune"])
    engine = instantiate(cfg.llm, cache=None)
    assert (engine.limit_param, list(engine.refused_params)) == ("max_completion_tokens", REFUSED)
    assert _sent(service, engine) == {"model": "my-finetune", "messages": MESSAGES, "max_completion_tokens": 512,
                                      "seed": 7}
    assert engine.signature()["request_shape"] == {"limit_param": "max_completion_tokens", "refused": sorted(REFUSED)}


def test_a_caller_that_needs_logprobs_is_refused_in_one_line(service):
    engine = OpenAICompatibleEngine(model="o3", base_url=service.url + "/v1", limit_param="max_completion_tokens",
                                    refused_params=REFUSED, max_retries=0)
    with pytest.raises(ConfigError) as err:
        engine.build_payload(LLMRequest(MESSAGES, SamplingParams(logprobs=True)))
    assert str(err.value).startswith("llm.refused_params lists logprobs: o3 returns no log-probabilities")
    assert [r for r in service.requests if r.method == "POST"] == []


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"limit_param": "max_output_tokens"},
     "llm.limit_param='max_output_tokens': must be one of max_tokens, max_completion_tokens"),
    ({"refused_params": ["temperature", "frequency_penalty"]},
     "llm.refused_params: frequency_penalty cannot be left out (these can: temperature, top_p, seed, stop, "
     "logprobs, top_logprobs)"),
    ({"limit_param": "max_completion_tokens", "chat_format": "plain"},
     "llm.limit_param=max_completion_tokens is a chat-completions field; /v1/completions (llm.chat_format=plain) "
     "takes max_tokens"),
])
def test_bad_shape_settings_are_one_line_naming_the_setting(kwargs, message):
    with pytest.raises(ConfigError) as err:
        OpenAICompatibleEngine(model="o3", base_url="http://127.0.0.1:9/v1", **kwargs)
    assert str(err.value) == message
