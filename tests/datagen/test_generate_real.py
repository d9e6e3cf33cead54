"""End to end with the real small model (Gemma 3 270M base on llama.cpp) and the real BM25 retriever.

The 270M base model writes poor pairs, so the thresholds below are loosened for it (the filters still run, on
real outputs); a larger engine uses the defaults of conf/datagen.yaml.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time

import pytest

from rag.core.io import read_jsonl_tolerant
from rag.data.questions import DataMorganaQA
from rag.datagen.generator import JOURNAL_FILE
from rag.datagen.main import generate
from rag.datagen.output import CORPUS_FILE, QA_FILE
from rag.main import run
from tests.conftest import ROOT, compose_config
from tests.datagen.helpers import FINEWEB, compose_datagen, fineweb_sample

pytestmark = pytest.mark.slow

#: settings under which the 270M base model obtains pairs; every filter stays on
SMALL_MODEL = ["llm=gemma3_270m", "generation.candidates_per_pair=3", "generation.max_attempts=4",
               "generation.max_slots_factor=3", "generation.batch_pairs=3", "generation.max_tokens=72",
               "generation.question_max_chars=150", "generation.answer_max_chars=200",
               "documents.max_prompt_words=120", "filters.support.min_overlap=0.5",
               "filters.length.question_words=[3,40]"]

#: pairs asked for: one batch of three journalled before the kill, at least one made after it
N = 4


def _slot_rows(out):
    return [r for r in read_jsonl_tolerant(out / JOURNAL_FILE) if r.get("type") == "slot"]


def test_four_pairs_survive_a_kill_and_the_pipeline_runs_on_them(data_dir, shared_cache, tmp_path):
    out = tmp_path / "generated"
    overrides = [f"corpus={FINEWEB}", f"n={N}", "categories=liverag", f"out={out}", f"paths.cache_dir={shared_cache}",
                 *SMALL_MODEL]
    # a first process is killed (SIGKILL) as soon as it has journalled its first finished pair slots
    log = (tmp_path / "first.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "rag.datagen", *overrides], cwd=ROOT, stdout=log,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 1500
    while proc.poll() is None and time.monotonic() < deadline:
        if (out / JOURNAL_FILE).exists() and _slot_rows(out):
            break
        time.sleep(0.5)
    killed = proc.poll() is None
    proc.kill()
    proc.wait()
    before = _slot_rows(out)
    assert killed and before, (tmp_path / "first.log").read_text()[-3000:]
    assert not (out / QA_FILE).exists()  # nothing half-written: the TSV appears only when the run completes

    report = generate(compose_datagen(overrides))
    after = _slot_rows(out)
    assert after[: len(before)] == before  # the journalled slots were kept, not regenerated
    assert report["obtained_pairs"] == N and report["requested_pairs"] == N
    assert report["single_doc_pairs"] + report["multi_doc_pairs"] == N
    assert set(report["filters"]) == {"phrasing", "length", "support", "near_duplicate", "answerable",
                                      "closed_book"}
    assert all(f["checked"] >= N for f in report["filters"].values())
    assert report["candidates"] >= N and report["candidates_per_kept_pair"] >= 1
    column = report["categorizations"]["question_multi-doc"]
    assert sum(c["count"] for c in column["categories"].values()) == N and column["chi_square"]["n"] == N
    assert json.loads((out / "report.json").read_text()) == report
    assert "| answerable |" in (out / "report.md").read_text()

    questions = DataMorganaQA(str(QA_FILE), str(out)).load()
    assert len(questions) == N
    with gzip.open(out / CORPUS_FILE, "rt") as handle:
        corpus_ids = {json.loads(line)["doc_id"] for line in handle}
    for q in questions:
        assert q.question and q.answer and set(q.gold_doc_ids) <= corpus_ids
        assert len(q.gold_doc_ids) == (2 if q.hop == "multi" else 1)
        assert q.categories["question_multi-doc"] in {"single-doc", "multi-aspect", "comparison"}

    # the pipeline reads the generated folder unchanged, end to end
    cfg = compose_config([f"paths.data_dir={out}", f"paths.cache_dir={shared_cache}", "dataset=liverag_dev",
                          "dataset.limit=2", "logger=none", "rerank.k=2", "generator.max_tokens=24"])
    metrics = run(cfg, tmp_path / "run")
    assert metrics["n_questions"] == 2 and metrics["gold_docs_missing_from_corpus"] == 0
    assert "recall/retrieval@20/all" in metrics and "answer/f1/all" in metrics


def test_unparsable_output_is_retried_with_a_new_seed_then_counted_and_skipped(tmp_path):
    # one output token cannot hold a JSON pair: every candidate and its re-ask is unparsable
    corpus = fineweb_sample(tmp_path / "docs.jsonl.gz", 40)
    cfg = compose_datagen([f"corpus={corpus}", "n=2", "categories=liverag", "llm=gemma3_270m",
                           "generation.max_tokens=1", "generation.candidates_per_pair=2",
                           "generation.max_attempts=1", "generation.max_slots_factor=1",
                           "generation.parse_retries=1"], tmp_path)
    report = generate(cfg)
    assert report["obtained_pairs"] == 0 and report["slots"] == {"kept": 0, "failed": 2}
    assert report["candidates"] == 4 and report["unparsable_candidates"] == 4 and report["parse_retries"] == 4
    assert report["run"]["llm_calls"] == 8  # 4 candidates, each re-asked once
    assert all(f["checked"] == 0 for f in report["filters"].values())
    tsv = (tmp_path / "out" / QA_FILE).read_text(encoding="utf-8")
    assert tsv.count("\n") == 1 and tsv.startswith("qid\tquestion\tanswer\tcontext\tdocument_ids\t")
