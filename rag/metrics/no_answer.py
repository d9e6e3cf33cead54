"""The no-answer rate: the share of answers that are empty or decline to answer.

TREC RAG 2026 asks how often a system declines (issue 55); a strategy that says "I don't know" whenever its
passages fall short trades F1 for fewer wrong answers, and this metric shows the trade. Our own definition (no
paper's): an answer declines when it is empty (after stripping) or when it matches one of `DECLINE`, phrases of
refusal the strategies' prompts allow ("I don't know", TopClust's and TrustRAG's own) and the common ways a model
says the context falls short. Read from the stored record, so resumed answers are scored too.
"""

from __future__ import annotations

import re

from rag.metrics.base import RecordMetric, RunShape
from rag.metrics.registry import MetricSpec
from rag.records import AnswerRecord

#: phrases that decline to answer (case-insensitive, anywhere in the answer)
DECLINE = re.compile(
    r"\bi\s+(?:do\s+not|don['’]?t)\s+know\b"
    r"|\b(?:cannot|can['’]?t|unable\s+to)\s+(?:be\s+)?(?:answer|determine|determined|find|tell)\b"
    r"|\b(?:not\s+enough|insufficient|no\s+relevant)\s+(?:information|context|evidence)\b"
    r"|\b(?:context|passages?|documents?|information)\s+(?:provided\s+)?(?:does|do)\s+not\s+"
    r"(?:contain|provide|mention|say|include)\b"
    r"|^\s*(?:no\s+answer|unknown|n/?a)\s*\.?\s*$",
    re.IGNORECASE)


def declines(answer: str) -> bool:
    """True for an empty answer or one that declines (`DECLINE`)."""
    return not (answer or "").strip() or bool(DECLINE.search(answer))


class NoAnswer(RecordMetric):
    """Per answer 1 when it is empty or declines, else 0; the run mean is the no-answer rate."""

    key_prefix = "no_answer"

    def __init__(self, name: str = "no_answer"):
        super().__init__(name)

    def score_record(self, record: AnswerRecord, qrels_level: str) -> dict[str, float]:
        return {"no_answer": float(declines(record.answer))}

    def run_metrics(self, shape: RunShape) -> dict[str, str]:
        return {"no_answer": "answer/no_answer"}

    def metric_specs(self) -> list[MetricSpec]:
        return [MetricSpec("answer/no_answer/{split}", "rate", "share of answers that are empty or decline to "
                           "answer (our phrase list, rag/metrics/no_answer.py)", (0.0, 1.0), None)]
