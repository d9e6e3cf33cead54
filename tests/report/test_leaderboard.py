"""The report's leaderboard: a row per run that names a system, measured values per question, published beside."""

from __future__ import annotations

import pytest

from rag.folders import RunFolder
from rag.records import AnswerRecord
from rag.report.build import build_report


def _run(root, name: str, system: str | None, f1: float, calls: int) -> None:
    records = [AnswerRecord(id=f"q{i}", question=f"q{i}", answer="a", scores={"f1": f1}) for i in range(4)]
    metrics = {"n_questions": 4, "answer/f1/all": f1, "judge/liverag/correctness/all": 1.5,
               "recall/retrieval@5_any/all": 0.75, "recall/rerank@5_any/all": 0.5, "llm_calls": calls,
               "prompt_tokens": 1000, "completion_tokens": 200, "time/total_s": 28.0, "time/index_s": 8.0}
    config = {"retriever": {"k": 50}, "rerank": {"k": 5}}
    if system:
        config["system"] = {"name": system, "published": {"correctness": 1.199, "faithfulness": 0.477,
                                                          "source": "the LiveRAG report"}}
    RunFolder(root / name).finish(records, metrics, config)


def test_every_named_system_gets_a_row_with_its_costs_per_question_and_its_published_scores(tmp_path):
    sweep = tmp_path / "sweep"
    _run(sweep, "0_grag", "GRAG", 0.25, 12)
    _run(sweep, "1_plain", None, 0.5, 4)
    report = build_report(sweep, formats=("png",), n_boot=20)
    [row] = report.tables["leaderboard"]
    assert row["system"] == "GRAG" and row["answer F1"] == 0.25 and row["correctness"] == 1.5
    assert row["faithfulness"] is None  # not judged: shown as "-", never 0
    assert row["recall after retrieval"] == 0.75 and row["recall after rerank"] == 0.5
    assert row["LLM calls / q"] == 3 and row["tokens / q"] == 300 and row["seconds / q"] == 5
    assert row["published correctness"] == 1.199 and row["published source"] == "the LiveRAG report"
    markdown = (sweep / "report" / "report.md").read_text()
    board = markdown.split("## Leaderboard")[1]
    assert "| GRAG | 0.250 | 1.500 | - | 0.750 | 0.500 | 3.0 | 300 | 5.0 | 1.199 | 0.477 |" in board
    assert "- GRAG: published scores from the LiveRAG report" in board
    assert "Not drawn" not in board.split("\n## ")[0]  # the leaderboard is a table: nothing was left undrawn


def test_a_sweep_without_named_systems_says_why_there_is_no_leaderboard(tmp_path):
    _run(tmp_path / "sweep", "0_plain", None, 0.5, 4)
    report = build_report(tmp_path / "sweep", formats=("png",), n_boot=20)
    assert "leaderboard" not in report.tables
    assert report.skipped["leaderboard"].startswith("no finished run names a system")
    markdown = (tmp_path / "sweep" / "report" / "report.md").read_text()
    assert "Not drawn: no finished run names a system" in markdown.split("## Leaderboard")[1]
    with pytest.raises(KeyError):
        report.tables["leaderboard"]
