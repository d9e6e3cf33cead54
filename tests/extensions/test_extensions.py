"""Extending the toolkit is one class plus one YAML, nothing else touched: a retriever, a reranker, a strategy
(generator), an engine and a per-answer metric are each added from this test folder (`components.py`, `conf/<group>/<name>.yaml`),
selected with an ordinary group override through `hydra.searchpath`, and run by the real pipeline on the
default dataset (LiveRAG dev questions over the FineWeb sample)."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from rag.core.io import read_jsonl
from rag.pipeline import Pipeline
from rag.preflight import check_config
from tests.conftest import ROOT, compose_config
from tests.extensions.components import (
    CitedPassageShare,
    EchoEngine,
    FirstSentenceGenerator,
    PassageLengthReranker,
    WordOverlapRetriever,
    word_set,
)

EXT_CONF = Path(__file__).resolve().parent / "conf"
SEARCHPATH = f"hydra.searchpath=[file://{EXT_CONF}]"
#: each extension: (config group, option name, class)
EXTENSIONS = [("retriever", "word_overlap", WordOverlapRetriever),
              ("rerank", "passage_length", PassageLengthReranker),
              ("generator", "first_sentence", FirstSentenceGenerator),
              ("llm", "echo", EchoEngine),
              ("metrics", "passage_share", CitedPassageShare)]


def _compose(cache: Path, *overrides: str) -> DictConfig:
    return compose_config([SEARCHPATH, f"paths.cache_dir={cache}", "dataset=liverag_dev", "logger=none",
                           *overrides])


def _run(cfg: DictConfig, run_dir: Path) -> tuple[Pipeline, dict[str, Any], list[dict[str, Any]]]:
    """Preflight (as `python -m rag.main` does), then the pipeline into `run_dir`."""
    assert check_config(cfg) == []
    pipeline = Pipeline(cfg)
    try:
        metrics = pipeline.run(run_dir)
    finally:
        pipeline.close()
    assert json.loads((run_dir / "metrics.json").read_text()) == metrics
    return pipeline, metrics, read_jsonl(run_dir / "answers.jsonl")


def _target(run_dir: Path, group: str) -> str:
    return json.loads((run_dir / "config.json").read_text())[group]["_target_"]


def test_nothing_outside_the_test_folder_names_the_extensions():
    for group, option, cls in EXTENSIONS:
        assert (EXT_CONF / group / f"{option}.yaml").is_file()
        assert not (ROOT / "conf" / group / f"{option}.yaml").exists()
        assert cls.__module__ == "tests.extensions.components"
    names = [cls.__name__ for _, _, cls in EXTENSIONS] + ["tests.extensions"]
    for folder in ("rag", "eval", "jobs", "conf", "hydra_plugins"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".yaml") and path.is_file():
                text = path.read_text(encoding="utf-8", errors="replace")
                assert not [n for n in names if n in text], f"{path} names a test-folder extension"


def test_a_retriever_from_the_test_folder(data_dir, tmp_path):
    cfg = _compose(tmp_path / "cache", "retriever=word_overlap", "generator=none", "dataset.limit=3")
    run_dir = tmp_path / "run"
    pipeline, metrics, records = _run(cfg, run_dir)

    assert isinstance(pipeline.retriever, WordOverlapRetriever)
    assert _target(run_dir, "retriever") == "tests.extensions.components.WordOverlapRetriever"
    assert metrics["n_questions"] == 3 and metrics["retrieval_calls"] == 3 and metrics["llm_calls"] == 0
    assert {"recall/retrieval@10/all", "recall/retrieval@100/all"} <= set(metrics)
    assert [p.name.split("__")[0] for p in (tmp_path / "cache" / "retrieval").glob("*.jsonl")] == \
        ["word_overlap-min3"]

    corpus = pipeline.dataset.corpus
    texts = {p.passage_id: p.text for p in corpus.passages}
    for record in records:
        hits = record["retrieved"]
        assert len(hits) == 10 and [h["rank"] for h in hits] == list(range(1, 11))
        # each score: the number of distinct question words (3+ letters) the passage holds, counted here anew
        wanted = {w for w in re.findall(r"[a-z0-9]+", record["question"].lower()) if len(w) >= 3}
        counts = [len(wanted & set(re.findall(r"[a-z0-9]+", texts[h["passage_id"]].lower()))) for h in hits]
        assert [h["score"] for h in hits] == counts == sorted(counts, reverse=True)
        assert counts[0] > 0
        # ... and no passage outside the list shares more words than the last one in it
        chosen = {h["passage_id"] for h in hits}
        best_left = max(len(word_set(record["question"], 3) & bag) for p, bag in
                        zip(corpus.passages, pipeline.retriever._bags) if p.passage_id not in chosen)
        assert best_left <= counts[-1]


def test_a_reranker_from_the_test_folder(data_dir, shared_cache, tmp_path):
    cfg = _compose(shared_cache, "rerank=passage_length", "generator=none", "dataset.limit=2")
    run_dir = tmp_path / "run"
    pipeline, metrics, records = _run(cfg, run_dir)

    assert isinstance(pipeline.reranker, PassageLengthReranker) and pipeline.reranker.k == 3
    assert _target(run_dir, "rerank") == "tests.extensions.components.PassageLengthReranker"
    assert metrics["rerank_calls"] + metrics["rerank_cache_hits"] == 2
    assert {"recall/retrieval@20/all", "recall/rerank@3/all"} <= set(metrics)
    assert list((shared_cache / "rerank").glob("*__passage_length-shortest_first.jsonl"))

    for record in records:
        retrieved, reranked = record["retrieved"], record["reranked"]
        assert len(retrieved) == 20 and len(reranked) == 3
        # the three shortest of the 20 retrieved passages (words), ties in retrieval order, scored -length
        text = {h["passage_id"]: pipeline.retriever.passage(h["passage_id"]).text for h in retrieved}
        length = {pid: len(t.split()) for pid, t in text.items()}
        shortest = sorted(retrieved, key=lambda h: (length[h["passage_id"]], h["rank"]))[:3]
        assert [h["passage_id"] for h in reranked] == [h["passage_id"] for h in shortest]
        assert [h["score"] for h in reranked] == [-float(length[h["passage_id"]]) for h in shortest]
        assert [h["rank"] for h in reranked] == [1, 2, 3]


def test_a_strategy_from_the_test_folder(data_dir, shared_cache, tmp_path):
    cfg = _compose(shared_cache, "generator=first_sentence", "dataset.limit=2")
    run_dir = tmp_path / "run"
    pipeline, metrics, records = _run(cfg, run_dir)

    assert isinstance(pipeline.generator, FirstSentenceGenerator)
    assert pipeline._engine is None and metrics["llm_calls"] == 0  # uses_llm=False: no engine was built
    assert _target(run_dir, "generator") == "tests.extensions.components.FirstSentenceGenerator"
    assert metrics["n_questions"] == 2 and metrics["time/generate_s"] >= 0
    for record in records:
        assert record["generator"] == "first_sentence"
        top = record["retrieved"][0]
        text = pipeline.retriever.passage(top["passage_id"]).text
        sentence = re.split(r"(?<=[.!?])\s+", text.strip(), maxsplit=1)[0].strip()
        assert record["answer"] == " ".join(sentence.split()[:50]) and record["answer"]
        assert record["context"] == [top["passage_id"]]
        assert record["passages"] == [{"doc_IDs": [top["doc_id"]], "passage": text}]
        assert record["steps"] == {"first_sentence": {"passage_id": top["passage_id"]}}


def test_an_engine_from_the_test_folder(data_dir, shared_cache, tmp_path):
    # the stock `simple` strategy calls the engine; the response cache is off, so every answer is the engine's
    cfg = _compose(shared_cache, "llm=echo", "generator=simple", "rerank.k=2", "dataset.limit=2",
                   "cache.llm_responses=false")
    run_dir = tmp_path / "run"
    pipeline, metrics, records = _run(cfg, run_dir)

    assert isinstance(pipeline.engine, EchoEngine)
    assert _target(run_dir, "llm") == "tests.extensions.components.EchoEngine"
    assert metrics["llm_calls"] == 2 and metrics["llm_cache_hits"] == 0
    for record in records:
        assert record["generator"] == "simple" and len(record["context"]) == 2
        prompt = record["final_prompt"]
        assert prompt.endswith(f"Question: {record['question']}\nAnswer:")
        assert record["answer"] == " ".join(prompt.split()[-8:])  # the engine's echo of the prompt's end
        assert record["steps"] == {"raw_output": record["answer"], "finish_reason": "stop"}
        assert 0.0 <= record["scores"]["f1"] <= 1.0
    # usage as the engine reported it: a token per word of each prompt, eight per answer
    assert metrics["prompt_tokens"] == sum(len(r["final_prompt"].split()) for r in records)
    assert metrics["completion_tokens"] == 16
    assert "answer/f1/all" in metrics and metrics["llm_seconds"] >= 0


def test_a_metric_from_the_test_folder(data_dir, tmp_path):
    """The pipeline scores with it, the registry knows its run metric, the sweep summary ranks it in a process
    that never built it, and the W&B logger sets its goal (a test judge is shown the same way in
    tests/eval/test_new_judge_everywhere.py)."""
    from rag.loggers.wandb_logger import WandbLogger
    from rag.metrics.registry import REGISTRY
    from tests.cluster.helpers import offline_runs, read_wandb_run

    cfg = _compose(tmp_path / "cache", "generator=first_sentence", "metrics=[recall,passage_share]",
                   "dataset.limit=2")
    run_dir = tmp_path / "sweep" / "0_cell"
    pipeline, metrics, records = _run(cfg, run_dir)
    assert [type(m).__name__ for m in pipeline.answer_metrics] == ["GoldRecall", "CitedPassageShare"]
    for record in records:  # the first sentence of the top passage overlaps that passage at least
        assert 0.0 < record["scores"]["passage_share"] <= 1.0 and "f1" not in record["scores"]
    mean = sum(r["scores"]["passage_share"] for r in records) / len(records)
    assert metrics["grounded/passage_share/all"] == round(mean, 6)
    assert "answer/f1/all" not in metrics and "recall/retrieval@20/all" in metrics  # only what the list composed
    assert not REGISTRY.undeclared(metrics)

    # a fresh process (as after a SLURM sweep) knows the metric only from the cell's saved config
    (run_dir / ".hydra").mkdir()
    (run_dir / ".hydra" / "overrides.yaml").write_text("- metrics=[recall,passage_share]\n")
    done = subprocess.run([sys.executable, "-m", "eval.summary", str(tmp_path / "sweep"), "--no-wandb"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    with open(tmp_path / "sweep" / "best.csv", encoding="utf-8") as handle:
        best = {row["metric"]: row for row in csv.DictReader(handle)}
    assert best["grounded/passage_share/all"]["direction"] == "max"
    assert best["grounded/passage_share/all"]["best_cells"] == "0_cell"

    WandbLogger(project="ext", mode="offline").log_run({"metrics": "x"}, metrics, records, tmp_path / "wb",
                                                       name="metric-test")
    logged = read_wandb_run(offline_runs(tmp_path / "wb")[0])
    assert logged["summary"]["grounded/passage_share/all"] == metrics["grounded/passage_share/all"]
