"""The no-answer rate (issue 55): the share of answers that are empty or decline, as a metric picked by name."""

from __future__ import annotations

import json

import pytest

from rag.metrics.no_answer import NoAnswer, declines
from rag.records import AnswerRecord
from tests.cluster.helpers import rag_env, rag_main

DECLINING = ["", "   ", "I don't know.", "I do not know the answer.", "The context does not mention his birth year.",
             "The provided passages do not contain this information.", "There is not enough information to say.",
             "This cannot be determined from the documents.", "Unknown", "No answer.", "I am unable to answer that."]
ANSWERING = ["Paris.", "He was born in 1921 and did not know his father.", "Unknown Pleasures is a 1979 album.",
             "The answer is no.", "Yes, the context supports it: 42.", "The band knows no limits."]


@pytest.mark.parametrize("answer", DECLINING)
def test_empty_and_declining_answers_count(answer):
    assert declines(answer)
    assert NoAnswer().score_record(AnswerRecord(id="q", answer=answer), "document") == {"no_answer": 1.0}


@pytest.mark.parametrize("answer", ANSWERING)
def test_answers_that_answer_do_not(answer):
    assert not declines(answer)
    assert NoAnswer().score_record(AnswerRecord(id="q", answer=answer), "document") == {"no_answer": 0.0}


def test_a_run_reports_the_rate_as_the_mean_of_its_answers(hotpot_data, tmp_path):
    run_dir = tmp_path / "run"
    proc = rag_main(["dataset=hotpotqa", "dataset.limit=3", "generator=extractive", "metrics=[f1,no_answer]",
                     "logger=none", f"hydra.run.dir={run_dir}"], rag_env(tmp_path), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    records = [json.loads(line) for line in (run_dir / "answers.jsonl").read_text().splitlines()]
    rate = sum(r["scores"]["no_answer"] for r in records) / len(records)
    assert metrics["answer/no_answer/all"] == pytest.approx(rate) and "answer/f1/all" in metrics
