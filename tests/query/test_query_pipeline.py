"""The query stage inside a run: each query reaches the sources it names, sub-retrievals are cached one by one and
shared, a decomposed question's context is its sub-questions' lists interleaved, and the records say what was
searched. Retrieval only (generator=none), two BM25 sources over the real HotpotQA passages."""

from __future__ import annotations

from pathlib import Path

from omegaconf import open_dict

from rag.core.io import read_jsonl
from rag.pipeline import Pipeline
from tests.conftest import compose_config

COMMON = ["dataset=hotpotqa", "dataset.limit=2", "generator=none", "logger=none", "metrics=[recall]",
          "retriever=fusion", "retriever@retriever.sources.dense=bm25", "retriever.sources.dense.k1=1.2",
          "retriever.k=10", "retriever.depth=20", "rerank.k=5"]


def _pipeline(tmp_path: Path, cache: Path) -> tuple[Pipeline, dict[str, list[str]]]:
    cfg = compose_config([f"paths.cache_dir={cache}", *COMMON], tmp_path)
    with open_dict(cfg):
        cfg.query = {"_target_": "tests.query.rules.HalvesWriter"}
    pipeline = Pipeline(cfg)
    seen: dict[str, list[str]] = {}
    for name, source in pipeline.retriever.sources.items():
        original = source.search

        def spy(queries, k, name=name, original=original):
            seen.setdefault(name, []).extend(queries)
            return original(queries, k)

        source.search = spy
    return pipeline, seen


def test_each_query_reaches_its_sources_and_the_records_say_what_was_searched(hotpot_data, tmp_path):
    cache = tmp_path / "cache"
    pipeline, seen = _pipeline(tmp_path, cache)
    try:
        metrics = pipeline.run(tmp_path / "run")
    finally:
        pipeline.close()
    records = read_jsonl(tmp_path / "run" / "answers.jsonl")
    questions = [r["question"] for r in records]
    assert set(questions) <= set(seen["sparse"]) and set(questions) <= set(seen["dense"])
    assert not any(q.startswith("dense:") for q in seen["sparse"])
    assert sum(q.startswith("dense:") for q in seen["dense"]) == 4 and len(seen["dense"]) == 6
    assert len(seen["sparse"]) == 6
    for record in records:
        queries = record["queries"]
        assert queries["steps"] == {"class": "multi"} and len(queries["groups"]) == 2
        assert {q.get("source") for q in queries["queries"]} == {None, "sparse", "dense"}
        # PreQRAG's selection: the top 1 of each sub-question, interleaved (not cut to rerank.k)
        assert 1 <= len(record["reranked"]) <= 2
        assert len(record["retrieved"]) == 10
    assert metrics["retrieval_calls"] == 12 and metrics["retrieval_cache_hits"] == 0
    adhoc = sorted(p.name for p in (cache / "retrieval").glob("*__adhoc__depth*.jsonl"))
    assert len(adhoc) == 2  # one file per source: each (source, query) cached on its own
    assert sorted(p.name for p in (cache / "retrieval").glob("*.jsonl")) == adhoc  # no whole-question file

    again, seen_again = _pipeline(tmp_path, cache)
    try:
        rerun = again.run(tmp_path / "rerun")
    finally:
        again.close()
    assert rerun["retrieval_calls"] == 0 and rerun["retrieval_cache_hits"] == 12 and not seen_again
    assert [r["reranked"] for r in read_jsonl(tmp_path / "rerun" / "answers.jsonl")] == \
        [r["reranked"] for r in records]


def test_without_a_query_stage_records_and_cache_names_are_as_before(hotpot_data, tmp_path):
    cfg = compose_config([f"paths.cache_dir={tmp_path / 'cache'}", *COMMON], tmp_path)
    pipeline = Pipeline(cfg)
    try:
        pipeline.run(tmp_path / "run")
    finally:
        pipeline.close()
    assert pipeline.query_writer is None
    assert all("queries" not in r for r in read_jsonl(tmp_path / "run" / "answers.jsonl"))
    assert not list((tmp_path / "cache" / "retrieval").glob("*adhoc*"))


def test_query_fallbacks_are_counted_in_the_run_metrics(hotpot_data, tmp_path):
    """Issue 52: a query stage falling back to the question was counted nowhere. metrics.json now has the
    fallbacks (at any depth of the steps), the questions that had one and their share; from the records, so a
    resumed run counts the same."""
    cfg = compose_config([f"paths.cache_dir={tmp_path / 'cache'}", "dataset=hotpotqa", "dataset.limit=3",
                          "generator=none", "logger=none", "metrics=[recall]"], tmp_path)
    with open_dict(cfg):
        cfg.query = {"_target_": "tests.query.rules.FirstFallsBackWriter"}
    for _ in range(2):  # the second run resumes the folder: every answer read back
        pipeline = Pipeline(cfg)
        try:
            metrics = pipeline.run(tmp_path / "run")
        finally:
            pipeline.close()
        assert (metrics["query/fallbacks"], metrics["query/questions_fell_back"], metrics["query/fallback_rate"]) \
            == (2, 1, round(1 / 3, 4))
