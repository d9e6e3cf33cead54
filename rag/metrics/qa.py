"""Token F1 and exact match with SQuAD's answer normalisation (Rajpurkar et al., 2016, official eval script).

`TokenF1` and `ExactMatch` are the per-answer metrics (`conf/metrics/f1.yaml`, `em.yaml`): each answer against
the best-matching of its gold answer and aliases, run means as `answer/f1/<split>` and `answer/em/<split>`.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable

from rag.metrics.base import AnswerMetric, RunShape, ScoredAnswer
from rag.metrics.registry import MetricSpec

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:  # SQuAD v2: both empty counts as a match
        return float(pred_tokens == gold_tokens)
    common = Counter(pred_tokens) & Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(pred_tokens), overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def best_over_golds(metric, prediction: str, golds: list[str]) -> float:
    """Score against the best-matching gold answer (SQuAD has several, MuSiQue has aliases)."""
    return max((metric(prediction, g) for g in golds), default=0.0)


class GoldAnswerMetric(AnswerMetric):
    """A string metric against the gold answers; questions without a gold answer, and answers not written by an
    LLM generator (`ScoredAnswer.from_llm`), are not scored."""

    #: the string comparison, prediction x gold -> [0, 1]
    compare: Callable[[str, str], float]
    description: str = ""

    def score(self, item: ScoredAnswer) -> dict[str, float]:
        q = item.question
        if q.answer is None or not item.from_llm:
            return {}
        return {self.name: best_over_golds(type(self).compare, item.answer, [q.answer, *q.answer_aliases])}

    def run_metrics(self, shape: RunShape) -> dict[str, str]:
        return {self.name: f"answer/{self.name}"}

    def metric_specs(self) -> list[MetricSpec]:
        return [MetricSpec(f"answer/{self.name}/{{split}}", "per_answer", self.description, (0.0, 1.0), True)]


class TokenF1(GoldAnswerMetric):
    compare = staticmethod(token_f1)
    description = "token F1 against the best-matching gold answer (SQuAD normalisation), mean over answers"

    def __init__(self, name: str = "f1"):
        super().__init__(name)


class ExactMatch(GoldAnswerMetric):
    compare = staticmethod(exact_match)
    description = "exact match with any gold answer (SQuAD normalisation), share of answers"

    def __init__(self, name: str = "em"):
        super().__init__(name)
