"""A chat-rendered llama.cpp model (SmolLM2: its GGUF carries a chat template) given a prompt longer than its context:
the middle of the longest message is cut so the prompt fits, as the plain path cuts the whole prompt. llama.cpp had
refused it ("Requested tokens (12228) exceed context window of 2048") and ended the run: found by tests/combinations
(`llm=smollm2_135m generator=simple` over 20 FineWeb passages)."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from rag.llm.base import LLMRequest, SamplingParams
from tests.conftest import CONF_DIR


@pytest.mark.slow
def test_a_chat_prompt_longer_than_the_context_is_cut_in_its_longest_message(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path))
    node = OmegaConf.load(CONF_DIR / "llm" / "smollm2_135m.yaml")
    node.n_ctx, node.seed = 1024, 0
    engine = instantiate(node)
    assert not engine.uses_plain_text()  # the chat path
    passages = " ".join(["The quick brown fox jumps over the lazy dog near the river bank."] * 400)
    request = LLMRequest([{"role": "system", "content": "Answer briefly."},
                          {"role": "user", "content": f"{passages}\nQuestion: what jumps over the dog?"}],
                         SamplingParams(max_tokens=16))
    fitted, cut = engine.fit(request)
    assert cut and fitted.messages[0] == request.messages[0]  # only the longest message is cut
    assert fitted.messages[1]["content"].endswith("what jumps over the dog?")  # the question (tail) survives
    out = engine.generate([request], desc="fit")[0]
    assert out.finish_reason == "prompt_truncated" and 0 < out.prompt_tokens <= 1024 - 16
    engine.close()
