"""The attribution stage in a real run: `python -m rag.main dataset=hotpotqa dataset.limit=2 generator=extractive
attribution=embedding logger=none` (no LLM; MiniLM offline), then `python -m rag.export.trec RUN --format rag26`,
then the organizers' checker (`autojudge_base.report_tool check --spec rag26`): every sentence cited, every
reference cited, and no finding but the declared document-id exception (HotpotQA's ids are titles, not ClimbMix
ids; tests/export/test_rag26.py declares it). The gold-document citation metrics land in metrics.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag.export.trec import RAG26_FILE, main
from rag.fingerprint import fingerprint
from rag.folders import RunFolder
from tests.conftest import compose_config
from tests.export.test_rag26 import organizers_check, write_topics
from tests.nltk_data import make_nltk_data


@pytest.fixture(scope="module")
def nltk_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """NLTK data for the checker, built locally (`tests.nltk_data`)."""
    return make_nltk_data(tmp_path_factory.mktemp("nltk_data"))


OVERRIDES = ["dataset=hotpotqa", "dataset.limit=2", "generator=extractive", "attribution=embedding", "logger=none",
             "metrics=[f1,em,recall,citation]"]


def test_a_run_with_attribution_exports_rag26_that_the_organizers_checker_passes(hotpot_data, tmp_path, nltk_data):
    from rag.main import run

    cfg = compose_config(OVERRIDES, tmp_path)
    run_dir = tmp_path / "run"
    metrics = run(cfg, run_dir)
    records = RunFolder(run_dir).records()
    assert len(records) == 2 and all(r.answer for r in records)
    for record in records:
        assert record.steps["attribution"]["method"] == "embedding"
        assert record.sentences and all(1 <= len(s["citations"]) <= 3 for s in record.sentences), record.sentences
        prompt_docs = {p.doc_IDs[0] for p in record.passages}
        assert {d for s in record.sentences for d in s["citations"]} <= prompt_docs
    for name in ("citation/gold_precision/all", "citation/gold_recall/all", "citation/coverage/all"):
        assert 0.0 <= metrics[name] <= 1.0, name
    assert metrics["citation/coverage/all"] == 1.0 and metrics["time/attribute_s"] >= 0
    # the stage is part of the answers' fingerprint; attribution=none leaves it out (older folders resume)
    assert fingerprint(cfg)["config"]["attribution.threshold"] == 0.5
    assert "attribution" not in fingerprint(compose_config(OVERRIDES[:3], tmp_path))["config"]

    topics = {r.id: r.question for r in records}
    tsv, requests = write_topics(tmp_path / "topics", topics)
    main([str(run_dir), "--format", "rag26", "--run-id", "extractive-attr", "--run-desc", "BM25, extractive, "
          "embedding attribution", "--topics", str(tsv)])
    rows = [json.loads(line) for line in (run_dir / RAG26_FILE).read_text().splitlines()]
    for row in rows:  # every sentence cited, every reference cited
        assert row["answer"] and all(1 <= len(a["citations"]) <= 3 for a in row["answer"]), row
        assert {c for a in row["answer"] for c in a["citations"]} == set(range(len(row["references"])))
    checked = organizers_check(run_dir / RAG26_FILE, "rag26", requests, nltk_data)
    assert checked.problems and checked.unexcepted(foreign_ids=True) == [] and checked.smells == [], checked.output
