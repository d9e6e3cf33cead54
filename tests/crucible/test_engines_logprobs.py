"""The `logprobs` request option: cache keys without it unchanged, the exact OpenAI-compatible request bodies,
the documented response shapes of the OpenAI API and vLLM, and which engines declare support."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rag.core.errors import ConfigError
from rag.llm.anthropic_engine import AnthropicEngine
from rag.llm.base import Completion, LLMRequest, SamplingParams
from rag.llm.openai_compat import OpenAICompatibleEngine, response_logprobs, response_top_logprobs
from rag.llm.vllm_engine import VLLMEngine, sampled_logprobs, top_alternatives


def test_params_without_logprobs_keep_their_old_cache_key_fields():
    assert "logprobs" not in SamplingParams().to_dict()
    asked = SamplingParams(logprobs=True)
    assert asked.to_dict()["logprobs"] is True
    assert SamplingParams(**asked.to_dict()) == asked and SamplingParams(**SamplingParams().to_dict()) == SamplingParams()
    # completions cached before the field existed still load
    assert Completion(**{"text": "x", "prompt_tokens": 1, "completion_tokens": 1, "finish_reason": "stop",
                         "prompt": "p"}).token_logprobs is None


def _engine(chat_format: str) -> OpenAICompatibleEngine:
    return OpenAICompatibleEngine(model="m", base_url="http://127.0.0.1:9/v1", api_key_env=None,
                                  chat_format=chat_format, json_mode="none")


def test_openai_compatible_bodies_ask_for_logprobs():
    msgs = [{"role": "user", "content": "hi"}]
    chat = _engine("chat").build_payload(LLMRequest(msgs, SamplingParams(logprobs=True)))
    assert chat["logprobs"] is True and "messages" in chat
    plain = _engine("plain").build_payload(LLMRequest(msgs, SamplingParams(logprobs=True)))
    assert plain["logprobs"] == 1 and "prompt" in plain
    assert "logprobs" not in _engine("chat").build_payload(LLMRequest(msgs, SamplingParams()))


def test_openai_response_shapes():
    chat_choice = SimpleNamespace(logprobs=SimpleNamespace(content=[SimpleNamespace(token="a", logprob=-0.5),
                                                                    SimpleNamespace(token="b", logprob=-1.0)]))
    assert response_logprobs(chat_choice) == [-0.5, -1.0]
    completion_choice = SimpleNamespace(logprobs=SimpleNamespace(content=None, token_logprobs=[-0.25, None, -2.0]))
    assert response_logprobs(completion_choice) == [-0.25, -2.0]
    assert response_logprobs(SimpleNamespace(logprobs=None)) == []


def test_openai_compatible_bodies_ask_for_top_alternatives():
    msgs = [{"role": "user", "content": "hi"}]
    chat = _engine("chat").build_payload(LLMRequest(msgs, SamplingParams(top_logprobs=5, max_tokens=1)))
    assert chat["logprobs"] is True and chat["top_logprobs"] == 5 and chat["max_tokens"] == 1
    plain = _engine("plain").build_payload(LLMRequest(msgs, SamplingParams(top_logprobs=5)))
    assert plain["logprobs"] == 5 and "top_logprobs" not in plain


def test_openai_top_logprobs_response_shapes():
    # chat: logprobs.content[i].top_logprobs = [{token, logprob}]; completions: logprobs.top_logprobs = [{token: lp}]
    chat_choice = SimpleNamespace(logprobs=SimpleNamespace(content=[SimpleNamespace(
        token="a", logprob=-0.5, top_logprobs=[SimpleNamespace(token="a", logprob=-0.5),
                                               SimpleNamespace(token="b", logprob=-1.2)])]))
    assert response_top_logprobs(chat_choice) == [{"a": -0.5, "b": -1.2}]
    completion_choice = SimpleNamespace(logprobs=SimpleNamespace(content=None, top_logprobs=[{" x": -0.1, " y": -2.5}]))
    assert response_top_logprobs(completion_choice) == [{" x": -0.1, " y": -2.5}]
    as_dict = SimpleNamespace(logprobs={"content": [{"token": "a", "logprob": -0.1,
                                                     "top_logprobs": [{"token": "a", "logprob": -0.1}]}]})
    assert response_top_logprobs(as_dict) == [{"a": -0.1}]
    assert response_top_logprobs(SimpleNamespace(logprobs=None)) == []


def test_vllm_top_alternatives():
    # vLLM with logprobs=k: per position {token id: Logprob(logprob, rank, decoded_token)}, k best plus the sampled
    choice = SimpleNamespace(token_ids=[5], logprobs=[{5: SimpleNamespace(logprob=-0.1, decoded_token=" yes"),
                                                       9: SimpleNamespace(logprob=-2.4, decoded_token=" no")}])
    assert top_alternatives(choice) == [{" yes": -0.1, " no": -2.4}]


def test_vllm_sampled_token_logprobs():
    # vLLM CompletionOutput: token_ids and, per position, {token id: Logprob(logprob=...)} incl. the sampled one
    choice = SimpleNamespace(token_ids=[5, 7], logprobs=[{5: SimpleNamespace(logprob=-0.1), 9: SimpleNamespace(logprob=-3)},
                                                         {7: SimpleNamespace(logprob=-0.7)}])
    assert sampled_logprobs(choice) == [-0.1, -0.7]


def test_engines_declare_support_and_refuse_in_one_line():
    assert OpenAICompatibleEngine.supports_logprobs and VLLMEngine.supports_logprobs
    from rag.llm.llama_cpp import LlamaCppEngine

    assert LlamaCppEngine.supports_logprobs
    engine = AnthropicEngine(model="claude-x", api_key_env=None)
    assert not engine.supports_logprobs
    with pytest.raises(ConfigError, match=r"^generator crucible .*AnthropicEngine \(claude-x\)"):
        engine.require_logprobs("generator crucible")
