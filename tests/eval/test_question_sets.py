"""A sweep over two datasets is ranked within each: a real 4-cell sweep (HotpotQA and LiveRAG's multi-document
questions, BM25 b swept, the extractive strategy: no LLM) gets a best and a tied group per question set in
summary.md, best.csv, summary.json and significance.json, and no paired test between cells that share no
question."""

from __future__ import annotations

import csv
import json

import pytest

from rag.sweep.question_sets import components
from tests.cluster.helpers import rag_env, rag_main, sweep_dirs

ARGS = ["-m", "dataset=hotpotqa,liverag_dev", "dataset.hop=multi", "dataset.limit=6", "retriever=bm25",
        "retriever.b=0.3,0.9", "generator=extractive", "generator.max_tokens=16", "logger=none"]


def test_overlapping_question_ids_join_one_set_and_disjoint_ones_stay_apart():
    """limit=10 and limit=20 of one file stay one set (connected through shared ids); other files do not join."""
    ids = {"a10": ["q1", "q2"], "b": ["x1"], "a20": ["q2", "q3"], "c": ["q3", "q9"], "d": []}
    assert components(ids) == [["a10", "a20", "c"], ["b"], ["d"]]


@pytest.mark.slow
def test_a_sweep_over_two_datasets_ranks_each_on_its_own_questions(data_dir, shared_cache, tmp_path):
    proc = rag_main(ARGS, rag_env(tmp_path, cache=shared_cache), timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    [sweep] = sweep_dirs(tmp_path / "outputs")
    cells = sorted(p.name for p in sweep.iterdir() if (p / ".hydra").is_dir())
    dataset_of = {c: "hotpotqa" if "dataset=hotpotqa" in c else "liverag_dev" for c in cells}
    for cell in cells:  # only multi-document questions, LiveRAG's included
        hops = {json.loads(line)["hop"] for line in (sweep / cell / "answers.jsonl").open()}
        assert hops == {"multi"}, (cell, hops)

    summary = json.loads((sweep / "summary.json").read_text())
    labels = {"hotpotqa": "hotpotqa (multi-hop)", "liverag_dev": "liverag_dev (multi-hop)"}
    assert summary["question_sets"] == {c: labels[dataset_of[c]] for c in cells}
    f1 = summary["best"]["answer/f1/all"]
    assert set(f1["per_set"]) == set(labels.values())
    for label, best in f1["per_set"].items():  # each set's best is its own cells' highest F1
        members = [r for r in summary["rows"] if summary["question_sets"][r["cell"]] == label]
        assert best["value"] == max(r["answer/f1/all"] for r in members)
        assert set(best["cells"]) <= {r["cell"] for r in members}
    rows = [r for r in csv.DictReader((sweep / "best.csv").open()) if r["metric"] == "answer/f1/all"]
    assert sorted(r["questions"] for r in rows) == sorted(labels.values())

    tested = list(csv.DictReader((sweep / "significance.csv").open()))
    assert tested and all(dataset_of[r["cell_a"]] == dataset_of[r["cell_b"]] for r in tested)
    significance = json.loads((sweep / "significance.json").read_text())
    marks = significance["marks"]["answer/f1/all"]
    marked = {dataset_of[c] for c in marks["best"]}
    assert marked == {"hotpotqa", "liverag_dev"} and not marks.get("untested")
    markdown = (sweep / "summary.md").read_text()
    assert "Question sets: hotpotqa (multi-hop), liverag_dev (multi-hop): each column is ranked within each set" \
        in markdown
    assert "| metric | questions | best | value | cells |" in markdown
