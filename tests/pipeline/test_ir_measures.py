"""Retrieval measures through ir-measures equal pytrec_eval's on the run files a run writes, per split."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytrec_eval

from rag.core.io import read_jsonl
from rag.folders import RunFolder
from rag.main import run
from rag.metrics.registry import REGISTRY
from rag.records import AnswerRecord, stage_ranking
from tests.conftest import compose_config

#: our measure name -> (pytrec_eval measure, its key in pytrec_eval's output, cutoff applied to the run first)
PYTREC = {"nDCG@10": ("ndcg_cut.10", "ndcg_cut_10", None), "RR@10": ("recip_rank", "recip_rank", 10),
          "R@100": ("recall.100", "recall_100", None), "AP": ("map", "map", None),
          "R@20": ("recall.20", "recall_20", None)}


def read_run(path: Path) -> dict[str, dict[str, float]]:
    run_: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        qid, q0, doc, rank, score, tag = line.split()
        assert q0 == "Q0" and int(rank) == len(run_.get(qid, {})) + 1 and tag
        run_.setdefault(qid, {})[doc] = float(score)
    return run_


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines():
        qid, _, doc, grade = line.split()
        qrels.setdefault(qid, {})[doc] = int(grade)
    return qrels


def top(ranking: dict[str, float], k: int | None) -> dict[str, float]:
    """The top k by score (what trec_eval reads; our scores strictly decrease, so no tie decides)."""
    return dict(sorted(ranking.items(), key=lambda kv: -kv[1])[:k]) if k else ranking


def pytrec_means(qrels, run_, qids, measure: str) -> float:
    name, key, cutoff = PYTREC[measure]
    evaluator = pytrec_eval.RelevanceEvaluator({q: qrels[q] for q in qids}, {name})
    per_query = evaluator.evaluate({q: top(run_[q], cutoff) for q in qids if q in run_})
    return sum(v[key] for v in per_query.values()) / len(per_query)


def test_retrieval_only_liverag_run_reports_pytrec_eval_values_of_its_run_files(data_dir, shared_cache, tmp_path):
    cfg = compose_config([f"paths.cache_dir={shared_cache}", "dataset=liverag_dev", "dataset.limit=6",
                          "generator=none", "logger=none", "retriever.k=20", "rerank.k=5",
                          "metrics.retrieval_measures.measures=[nDCG@10,RR@10,R@20,R@100,AP,Judged@10]"])
    run_dir = tmp_path / "run"
    metrics = run(cfg, run_dir)
    folder = RunFolder(run_dir)
    assert json.loads(folder.metrics_path.read_text()) == metrics
    assert REGISTRY.undeclared(metrics) == [] and REGISTRY.out_of_range(metrics) == []
    rows = read_jsonl(folder.answers_path)
    hops = {r["id"]: r["hop"] for r in rows}
    splits = {"all": sorted(hops), "single": sorted(q for q, h in hops.items() if h == "single"),
              "multi": sorted(q for q, h in hops.items() if h == "multi")}
    assert splits["single"] and splits["multi"]
    qrels = read_qrels(folder.qrels_path)
    assert qrels == {r["id"]: {d: 1 for d in r["gold_doc_ids"]} for r in rows}  # binary, from the gold docs
    for stage in ("retrieval", "rerank"):
        run_ = read_run(folder.run_file_path(stage))
        assert max(len(v) for v in run_.values()) <= (20 if stage == "retrieval" else 5)
        for split, qids in splits.items():
            for measure in PYTREC:
                ours = metrics[f"ir/{stage}/{measure}/{split}"]
                assert ours == pytest.approx(pytrec_means(qrels, run_, qids, measure), abs=1e-6), (stage, split,
                                                                                                    measure)
    # the rerank list is the retrieved list cut to rerank.k: recall can only fall, and R@20 differs from the top 20
    assert metrics["ir/rerank/R@20/all"] <= metrics["ir/retrieval/R@20/all"]
    assert any(metrics[f"ir/retrieval/{m}/all"] != metrics[f"ir/rerank/{m}/all"] for m in ("R@20", "AP"))


def test_run_file_order_is_the_pipeline_order_even_where_scores_tie():
    """trec_eval orders by score (ties by docid): tied and rising scores are written strictly decreasing."""
    hits = [{"passage_id": "b#p0", "doc_id": "b", "score": 2.0}, {"passage_id": "a#p0", "doc_id": "a", "score": 2.0},
            {"passage_id": "b#p1", "doc_id": "b", "score": 1.5}, {"passage_id": "c#p0", "doc_id": "c", "score": 3.0},
            {"passage_id": "d#p0", "doc_id": "d", "score": None}]
    docs = stage_ranking(hits, "document")
    assert [d for d, _ in docs] == ["b", "a", "c", "d"]
    assert all(x > y for (_, x), (_, y) in zip(docs, docs[1:])) and docs[0][1] == 2.0
    passages = stage_ranking(hits, "passage")
    assert [p for p, _ in passages] == ["b#p0", "a#p0", "b#p1", "c#p0", "d#p0"]
    # pytrec_eval on these scores ranks "b" first: RR is 1 with b relevant, 1/2 with a relevant
    for relevant, rr in (("b", 1.0), ("a", 0.5)):
        result = pytrec_eval.RelevanceEvaluator({"q": {relevant: 1}}, {"recip_rank"}).evaluate({"q": dict(docs)})
        assert result["q"]["recip_rank"] == rr


def test_record_metrics_score_resumed_answers_and_stale_keys_go(tmp_path):
    """RetrievalMeasures reads the stored record: a record scored under another measure list is re-scored."""
    from rag.metrics.ir import RetrievalMeasures

    record = AnswerRecord(id="q1", question="?", gold_doc_ids=["a"], qrels={"a": 2, "x": 0},
                          retrieved=[{"passage_id": "x#p0", "doc_id": "x", "score": 3.0},
                                     {"passage_id": "a#p0", "doc_id": "a", "score": 1.0}],
                          scores={"ir/retrieval/P@1": 0.0, "f1": 0.5})
    RetrievalMeasures(measures=["RR@10", "Judged@2"], stages=["retrieval"]).rescore([record], "document")
    assert record.scores == {"f1": 0.5, "ir/retrieval/RR@10": 0.5, "ir/retrieval/Judged@2": 1.0}
    assert record.relevance() == {"a": 2, "x": 0}
    assert AnswerRecord(id="q2", gold_doc_ids=["a"]).relevance() == {"a": 1}


def test_a_measure_ir_measures_cannot_read_is_one_config_error():
    from rag.core.errors import ConfigError
    from rag.metrics.ir import RetrievalMeasures

    with pytest.raises(ConfigError, match=r"metrics.retrieval_measures.measures: 'nDCG@x'"):
        RetrievalMeasures(measures=["nDCG@10", "nDCG@x"])
