"""Generation through vLLM with the shipped small models: Simple and InstructRAG (each step one engine batch
over all questions), Crucible (log-probabilities), and the prompt each engine really sent.

Gemma 3 270M is a base model without a chat template: rendered as plain text with stop sequences, exactly as
the llama.cpp engine renders it. The assertions are about what must hold whatever a small model writes.
"""

from __future__ import annotations

import json
import math

import pytest

from rag.core.io import read_jsonl
from rag.data.questions import DataMorganaQA
from rag.generate.base import GenerationContext
from rag.generate.instructrag import InstructRAGGenerator
from rag.generate.simple import SimpleGenerator
from rag.llm.base import LLMRequest, SamplingParams
from tests.conftest import compose_config
from tests.generate.helpers import DATA_DIR, CallLog, items_for

pytestmark = pytest.mark.vllm


def test_simple_and_instructrag_one_batch_per_step(gemma, monkeypatch, tmp_path):
    items = items_for(("1", "2", "3"))
    log = CallLog(gemma, monkeypatch)
    simple = SimpleGenerator(max_answer_words=30, max_tokens=32).generate(items, GenerationContext(engine=gemma))
    instruct = InstructRAGGenerator(
        demo_questions=DataMorganaQA(path="liverag_dm/dev_qa.tsv", data_dir=str(DATA_DIR)), num_demos=1,
        demo_offset=275, demo_limit=2, demo_passage_words=40, rationale_max_tokens=32, max_answer_words=30,
        max_tokens=32).generate(items, GenerationContext(engine=gemma, cache_dir=str(tmp_path),
                                                         data_dir=str(DATA_DIR)))
    # one engine batch per step, all questions together (demonstration rationales first, made once)
    assert log.calls[0] == ("simple", 3)
    assert log.calls[1][0] == "instructrag rationales" and log.calls[-1] == ("instructrag answer", 3)
    assert len(log.calls) == 3
    assert gemma.uses_plain_text() and gemma.model_loads == 1
    for result, item in zip(simple, items):
        assert result.final_prompt.endswith(f"Question: {item.question.question}\nAnswer:")
        assert result.steps["finish_reason"] in ("stop", "length")
        assert "\n" not in result.steps["raw_output"]  # the plain prompt's stop sequence ended it
    assert sum(bool(r.answer) for r in simple) >= 2
    for result, item in zip(instruct, items):
        assert result.final_prompt.endswith(f"answer the question:\n{item.question.question}\nAnswer:")
        assert json.dumps(result.steps) and result.parse_failed is (result.fallback is not None)


@pytest.mark.parametrize("engine_name", ["gemma", "smollm2"])
def test_prompt_sent_is_the_prompt_counted(engine_name, request):
    """`fit` counts tokens as vLLM will (plain text with the model's <bos>, chat through its template): the prompt
    vLLM reports is the rendered one and its token count is the one `fit` measured."""
    engine = request.getfixturevalue(engine_name)
    req = LLMRequest([{"role": "system", "content": "Answer briefly."},
                      {"role": "user", "content": "Where is the Eiffel tower?"}],
                     SamplingParams(temperature=0.0, max_tokens=8, seed=7), stop_plain=("\n",))
    completion = engine.generate([req])[0]
    assert completion.prompt == engine.render(req)
    assert completion.prompt_tokens == engine._count(req.messages)
    if engine_name == "gemma":
        assert engine.tokenizer.encode(completion.prompt)[0] == engine.tokenizer.bos_token_id
    else:
        assert completion.prompt.startswith("<|im_start|>system\nAnswer briefly.<|im_end|>")


def test_over_long_prompt_is_cut_to_max_model_len(smollm2):
    """A prompt longer than max_model_len is cut in the middle of its longest message (vLLM would refuse it and
    fail the whole batch); the question at the end survives and the completion says prompt_truncated."""
    long = " ".join(f"filler{i}" for i in range(9000))
    req = LLMRequest([{"role": "user", "content": f"{long}\nQuestion: what colour is the sky?"}],
                     SamplingParams(temperature=0.0, max_tokens=8))
    completion = smollm2.generate([req])[0]
    assert completion.finish_reason == "prompt_truncated"
    assert completion.prompt.rstrip().endswith("what colour is the sky?<|im_end|>\n<|im_start|>assistant")
    assert " [...] " in completion.prompt
    assert completion.prompt_tokens <= smollm2.engine_args["max_model_len"] - 8


CRUCIBLE = ["generator=crucible", "generator.max_docs=2", "generator.nuggets_per_doc=2", "generator.bank.size=3",
            "generator.bank.max_llm_checks=2", "generator.passages_per_nugget=1", "generator.summary_max_tokens=32",
            "generator.nuggets_max_tokens=48", "generator.extract_max_tokens=32", "generator.max_passage_words=80"]


def test_crucible_confidences_from_vllm_logprobs(gemma, shared_cache, tmp_path):
    from rag.pipeline import Pipeline

    cfg = compose_config([f"paths.cache_dir={shared_cache}", "llm=vllm_gemma3_270m", "dataset.limit=2",
                          "retriever.k=10", "rerank.k=2", "logger=none", *CRUCIBLE])
    pipe = Pipeline(cfg, engine=gemma)
    metrics = pipe.run(tmp_path / "run")
    pipe.retriever.close()
    records = read_jsonl(tmp_path / "run" / "answers.jsonl")
    assert len(records) == 2 and metrics["llm_calls"] > 0
    sentences = [s for r in records for s in r["sentences"]]
    for r in records:
        cited = {p["doc_IDs"][0] for p in r["passages"]}
        for s in r["sentences"]:
            assert len(s["citations"]) == 1 and s["citations"][0] in cited
    # confidence = exp(mean token log-probability) from vLLM's logprobs: a probability, never a placeholder
    assert sentences and all(0.0 < s["confidence"] <= 1.0 for s in sentences)
    assert len({round(s["confidence"], 6) for s in sentences}) > 1 or len(sentences) == 1
    assert all(not math.isnan(s["confidence"]) for s in sentences)
