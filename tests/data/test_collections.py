"""BEIR folders, TREC topics/qrels/segments and ir_datasets ids run end to end (small collections the tests make
from real HotpotQA text), their measures equal pytrec_eval's on the run files they wrote."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rag.core.errors import DataError
from rag.data.collections import TrecTopics
from rag.data.qrels import QrelsFile
from rag.export.trec import export, validate
from rag.folders import RunFolder
from rag.main import run
from rag.metrics.registry import REGISTRY
from tests.conftest import compose_config
from tests.data.collections import hotpot_collection, write_beir, write_ir_datasets_module, write_trec
from tests.pipeline.test_ir_measures import PYTREC, pytrec_means, read_qrels, read_run

BASE = ["generator=extractive", "logger=none", "retriever=bm25", "retriever.k=10", "rerank.k=3"]


def _run(tmp_path: Path, *overrides: str) -> tuple[dict, RunFolder]:
    cfg = compose_config([f"paths.cache_dir={tmp_path / 'cache'}", *BASE, *overrides])
    run_dir = tmp_path / "run"
    return run(cfg, run_dir), RunFolder(run_dir)


def _check_against_pytrec_eval(metrics: dict, folder: RunFolder) -> None:
    qrels = read_qrels(folder.qrels_path)
    judged = sorted(qrels)
    for stage in ("retrieval", "rerank"):
        ranked = read_run(folder.run_file_path(stage))
        for measure in ("nDCG@10", "RR@10", "AP"):
            assert metrics[f"ir/{stage}/{measure}/all"] == pytest.approx(
                pytrec_means(qrels, ranked, judged, measure), abs=1e-6), (stage, measure)
    assert set(PYTREC) >= {"nDCG@10", "RR@10", "AP"}
    assert REGISTRY.undeclared(metrics) == []


def test_beir_folder_runs_end_to_end_on_its_judged_queries(data_dir, tmp_path):
    collection = hotpot_collection(data_dir)
    folder = write_beir(tmp_path / "beir", collection)
    metrics, run_folder = _run(tmp_path, "dataset=beir", f"dataset.path={folder}")
    records = run_folder.records()
    assert [r.id for r in records] == ["1", "2", "3"]  # query 4 has no qrels in the split: BEIR leaves it out
    assert records[0].qrels == collection.qrels["1"] and records[0].relevance()[records[0].gold_doc_ids[0]] == 2
    assert len(records[0].gold_doc_ids) == 2 and records[0].answer  # graded 2 = relevant; extractive answered
    assert metrics["n_questions"] == 3 and 0 < metrics["ir/retrieval/Judged@10/all"] <= 1
    assert read_qrels(run_folder.qrels_path) == collection.qrels
    _check_against_pytrec_eval(metrics, run_folder)
    # the stage cache is keyed by the corpus content, its chunking and the title put into the indexed text
    cached = [p.name for p in (tmp_path / "cache" / "retrieval").glob("*.jsonl")]
    assert len(cached) == 1 and "__beir-" in cached[0] and "-512w0o-title__" in cached[0], cached


def test_trec_topics_qrels_and_segments_run_end_to_end_and_export_passes_the_track_rules(data_dir, tmp_path):
    collection = hotpot_collection(data_dir)
    folder = write_trec(tmp_path / "rag25", collection)
    metrics, run_folder = _run(tmp_path, "dataset=trec", f"dataset.path={folder}")
    records = run_folder.records()
    assert [r.id for r in records] == ["1", "2", "3", "4"]  # an unjudged topic still runs (no gold answer, no qrels)
    assert records[3].relevance() == {} and "ir/retrieval/AP" not in records[3].scores
    assert records[0].gold_answer is None and records[0].answer
    # segments are kept whole: passage ids are the segment ids the qrels judge (passage level)
    assert records[0].retrieved[0]["passage_id"] == records[0].retrieved[0]["doc_id"]
    assert run_folder.qrels_level() == "passage"
    assert metrics["n_questions"] == 4
    _check_against_pytrec_eval(metrics, run_folder)
    # the TREC 2025 answer file passes the track validator's rules against the topics, with MS MARCO ids
    out = tmp_path / "rag25.jsonl"
    assert export(run_folder.answers_path, out, "my-run", "rag25", topics=folder / "topics.jsonl",
                  msmarco_ids=True) == 4
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert validate(rows, "rag25", {q["id"]: q["text"] for q in collection.queries}, msmarco_ids=True)[0] == []
    assert rows[0]["metadata"]["narrative_id"] == "1" and rows[0]["references"][0] == records[0].reranked[0]["doc_id"]


def test_trec_topic_shapes_of_2024_and_2025_read_alike(data_dir, tmp_path):
    folder = write_trec(tmp_path / "t", hotpot_collection(data_dir))
    as_2025 = [(q.id, q.question) for q in TrecTopics(str(folder / "topics.jsonl")).load()]
    assert as_2025 == [(q.id, q.question) for q in TrecTopics(str(folder / "topics.tsv")).load()]
    (folder / "narratives.jsonl").write_text('{"id": "7", "narrative": "A two-sentence need. And more."}\n')
    assert TrecTopics(str(folder / "narratives.jsonl")).load()[0].question == "A two-sentence need. And more."
    (folder / "bad.tsv").write_text("1\tok\n2 no tab here\n")
    with pytest.raises(DataError, match=r"bad.tsv:2: expected 2 tab-separated columns"):
        TrecTopics(str(folder / "bad.tsv")).load()


def test_qrels_files_read_both_shapes_and_refuse_bad_rows(tmp_path):
    (tmp_path / "q.txt").write_text("1 0 d1 2\n1 0 d2 0\n2 Q0 d3 1\n")
    (tmp_path / "q.tsv").write_text("query-id\tcorpus-id\tscore\n1\td1\t2\n1\td2\t0\n2\td3\t1\n")
    expected = {"1": {"d1": 2, "d2": 0}, "2": {"d3": 1}}
    assert QrelsFile(str(tmp_path / "q.txt")).load() == expected == QrelsFile(str(tmp_path / "q.tsv")).load()
    (tmp_path / "bad.txt").write_text("1 0 d1 2\n1 0 d2 high\n")
    with pytest.raises(DataError, match=r"bad.txt:2: relevance grade 'high' is not a number"):
        QrelsFile(str(tmp_path / "bad.txt")).load()


def test_ir_datasets_collection_registered_from_local_files_runs_end_to_end(data_dir, tmp_path, monkeypatch):
    collection = hotpot_collection(data_dir)
    module = f"rag_test_collection_{tmp_path.name.replace('-', '_')}"
    folder = write_ir_datasets_module(tmp_path / "irds", collection, module, f"rag-test/{module}")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "ir_datasets_home"))
    metrics, run_folder = _run(tmp_path, "dataset=ir_datasets", f"dataset.id=rag-test/{module}",
                               f"dataset.imports=[{module}]")
    records = run_folder.records()
    assert [r.id for r in records] == ["1", "2", "3"]  # the unjudged query is dropped (dataset.unjudged=drop)
    assert records[1].qrels == collection.qrels["2"] and metrics["n_questions"] == 3
    _check_against_pytrec_eval(metrics, run_folder)
    assert module in sys.modules


def test_an_unknown_ir_datasets_id_is_one_clear_error(tmp_path):
    from rag.core.errors import ConfigError
    from rag.data.collections import IrDatasetsQueries

    with pytest.raises(ConfigError, match=r"dataset.id='no-such/collection': ir_datasets knows no such dataset"):
        IrDatasetsQueries("no-such/collection").load()


@pytest.mark.slow
def test_an_unjudged_trec_topic_is_answered_and_judged_by_the_nugget_judge(data_dir, shared_cache, tmp_path):
    """A TREC topic without gold answer or judgments: retrieval, a real LLM answer, nuggets from its passages."""
    collection = hotpot_collection(data_dir)
    folder = write_trec(tmp_path / "rag25", collection)
    (folder / "topics.jsonl").write_text(json.dumps({"id": "4", "title": collection.queries[3]["text"]}) + "\n")
    cfg = compose_config([f"paths.cache_dir={shared_cache}", "dataset=trec", f"dataset.path={folder}",
                          "generator=simple", "generator.max_tokens=32", "llm=gemma3_270m", "judge=[nuggets]",
                          "judge.nuggetizer.max_nuggets=6", "judge.nuggetizer.keep_top=4", "logger=none",
                          "retriever.k=5", "rerank.k=3"])
    metrics = run(cfg, tmp_path / "run")
    record = RunFolder(tmp_path / "run").records()[0]
    assert record.id == "4" and record.gold_answer is None and record.relevance() == {} and record.answer
    assert "nuggets" in record.judges and metrics["nuggets/n_scored"] + metrics["nuggets/create_failures"] == 1
    assert not [k for k in metrics if k.startswith("ir/")]  # nothing to measure retrieval against
