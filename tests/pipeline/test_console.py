"""The closing block a run prints (`rag.metrics.console`): about ten lines, the numbers that matter first, and
where the rest is; `report_console=full` prints every metric before it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rag.metrics.console import closing_block, console_report, format_metrics_table
from rag.metrics.stats import bootstrap_means, sensitivity_text
from rag.records import AnswerRecord

F1 = [0.0, 0.5, 1.0, 0.25, 0.75, 0.5]
HOPS = ["single", "multi"] * 3


def _records() -> list[AnswerRecord]:
    return [AnswerRecord(id=f"q{i}", hop=hop, scores={"f1": f1, "em": float(f1 == 1.0), "recall_rerank": 1.0},
                         judges={"liverag": {"correctness": float(i % 3), "faithfulness": 1.0}})
            for i, (f1, hop) in enumerate(zip(F1, HOPS))]


def _metrics() -> dict[str, object]:
    metrics: dict[str, object] = {"n_questions": 6, "answer/f1/all": 0.5, "answer/em/all": 1 / 6,
                                  "recall/rerank@3/all": 1.0, "recall/rerank@1/all": 0.5,
                                  "judge/liverag/correctness/all": 1.0, "judge/liverag/faithfulness/all": 1.0,
                                  "llm_calls": 6, "llm_cache_hits": 0, "prompt_tokens": 1200,
                                  "completion_tokens": 60, "eval/llm_calls": 12, "eval/prompt_tokens": 4000,
                                  "eval/completion_tokens": 100, "time/total_s": 30.0}
    metrics.update({f"recall/retrieval@{k}/{s}": 1.0 for k in (1, 5, 10, 20, 50, 100) for s in ("all", "multi")})
    return metrics


def test_closing_block_is_short_and_says_what_matters(tmp_path: Path):
    block = closing_block(_metrics(), _records(), tmp_path, prompt_k=3)
    lines = block.splitlines()
    assert len(lines) <= 15, block
    header, f1 = lines[0], next(line for line in lines if line.startswith("answer/f1 "))
    assert "all (6)" in header and "single (3)" in header and "multi (3)" in header
    mean, low, high = bootstrap_means(F1)  # the report's interval, the same resamples
    assert f1.split()[1:4] == [f"{mean[0]:.3f}", f"[{low[0]:.3f},", f"{high[0]:.3f}]"]
    assert any(line.startswith("recall/rerank@3 ") for line in lines)  # the prompt's depth, not @1
    assert not any(line.startswith("recall/rerank@1 ") for line in lines)
    assert any(line.startswith("judge/liverag/correctness ") for line in lines)
    cost = next(line for line in lines if line.startswith("Cost: "))
    assert "6 LLM calls, 1,200 prompt + 60 completion tokens" in cost and "judges 12 LLM calls" in cost
    assert "5.00 s per question" in cost
    assert re.search(r"Smallest visible difference with 6 questions \(.*\): answer/f1 \d", block)
    assert lines[-1].startswith(f"Every metric: {tmp_path / 'metrics.json'}") and "report_console=full" in lines[-1]
    assert "recall/retrieval@50" not in block  # the cutoffs stay in metrics.json


def test_full_prints_every_metric_first(tmp_path: Path):
    (tmp_path / "answers.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in _records()))
    short = console_report(_metrics(), tmp_path, 3, "short")
    full = console_report(_metrics(), tmp_path, 3, "full")
    assert short.splitlines()[0] == full.splitlines()[0] == f"Run folder: {tmp_path}"
    assert format_metrics_table(_metrics()) in full and "recall/retrieval@50/multi" in full
    assert "recall/retrieval@50" not in short and len(short.splitlines()) <= 16
    with pytest.raises(ValueError, match="report_console"):
        console_report(_metrics(), tmp_path, 3, "long")


def test_sensitivity_line_names_each_metric_once():
    line = sensitivity_text({"answer/f1": F1, "answer/em": [0.0] * 6})
    assert line.count("\n") == 0 and line.startswith("Smallest visible difference with 6 questions")
    assert "answer/em none: every answer scores 0, no variance" in line
    assert sensitivity_text({"answer/f1": [0.5]}) == ""  # one question: nothing to estimate
