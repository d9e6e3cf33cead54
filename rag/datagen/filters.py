"""Filters a generated candidate must pass to become a pair; every filter counts what it checked and rejected.

Order: cheap text checks first (phrasing, length, support by token overlap, near-duplicate questions), then the
two LLM checks on the survivors, each one batched engine call (answerable from the documents by the judge
engine, not answerable closed-book). A candidate stops at the first filter that rejects it, so `checked` of a
filter is the number of candidates that reached it and `rejected / checked` is its rejection rate.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rag.core.errors import ConfigError
from rag.datagen.replies import RETRY_TEMPERATURE, parse_yes_no
from rag.llm.asking import ask_with_retries
from rag.llm.base import LLMEngine, LLMRequest, SamplingParams
from rag.metrics.qa import normalize_answer, token_f1
from rag.prompts import load_prompt

#: the order filters run in (and are reported in)
FILTER_ORDER = ("phrasing", "length", "support", "near_duplicate", "answerable", "closed_book")

#: phrases that give away that the question was written from a document (DataMorgana drops such questions)
DEFAULT_PATTERNS = (
    r"\baccording to (the|this|these|that) (document|text|passage|article|context|source|excerpt)s?\b",
    r"\b(in|from|by) (the|this|these) (given |provided |above )?(document|text|passage|article|excerpt)s?\b",
    r"\b(the|this) (given|provided|above) (document|text|passage|article|context|excerpt)s?\b",
    r"\b(document|passage|excerpt) (1|2|one|two)\b",
    r"\b(as )?(mentioned|stated|described|discussed) (in|by) the (document|text|passage|article)s?\b",
)

#: words that carry no content when checking that an answer's words come from the documents
STOPWORDS = frozenset(
    ["a", "an", "the", "and", "or", "but", "if", "of", "to", "in", "on", "at", "by", "for", "with", "from", "as", "is", "are", "was", "were", "be", "been", "being", "it", "its", "this", "that", "these", "those", "there", "their", "they", "them", "he", "she", "his", "her", "we", "our", "you", "your", "i", "not", "no", "yes", "do", "does", "did", "have", "has", "had", "can", "could", "will", "would", "should", "may", "might", "must", "so", "than", "then", "also", "such", "which", "who", "whom", "whose", "what", "when", "where", "why", "how", "all", "any", "both", "each", "more", "most", "other", "some", "about", "into", "over", "after", "before", "between", "because", "while", "during", "per"])


@dataclass
class Candidate:
    """One generated (question, answer) for a pair slot, with the documents it was written from."""

    slot: int
    number: int
    question: str
    answer: str
    #: the document texts as shown to the model
    shown: list[str]
    rejected_by: str | None = None
    #: the filters this candidate reached, in order
    checked: list[str] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)


def tally(candidates: Sequence[Candidate]) -> dict[str, dict[str, int]]:
    """Per filter: candidates that reached it and candidates it rejected."""
    out: dict[str, dict[str, int]] = {}
    for c in candidates:
        for name in c.checked:
            entry = out.setdefault(name, {"checked": 0, "rejected": 0})
            entry["checked"] += 1
            entry["rejected"] += c.rejected_by == name
    return out


def content_tokens(text: str) -> list[str]:
    return [t for t in normalize_answer(text).split() if t not in STOPWORDS]


def support_overlap(answer: str, documents: Sequence[str]) -> float:
    """Share of the answer's content words that occur in the documents (0 when it has none)."""
    words = content_tokens(answer)
    if not words:
        return 0.0
    vocabulary = set(normalize_answer(" ".join(documents)).split())
    return sum(w in vocabulary for w in words) / len(words)


class Filters:
    """The configured filters and their thresholds; each marks the candidates it checked and rejected."""

    def __init__(self, spec: Mapping[str, Any]):
        spec = dict(spec or {})
        unknown = set(spec) - set(FILTER_ORDER)
        if unknown:
            raise ConfigError(f"filters: unknown filter(s) {sorted(unknown)}; known: {list(FILTER_ORDER)}")
        self.spec = {name: dict(spec.get(name) or {}) for name in FILTER_ORDER}
        self.enabled = [n for n in FILTER_ORDER if self.spec[n].get("enabled", True)]
        try:
            self.patterns = [re.compile(p, re.I) for p in self.spec["phrasing"].get("patterns") or DEFAULT_PATTERNS]
        except re.error as err:
            raise ConfigError(f"filters.phrasing.patterns: bad regular expression ({err})") from None
        length = self.spec["length"]
        self.question_words = self._bounds(length.get("question_words", (4, 60)), "question_words")
        self.answer_words = self._bounds(length.get("answer_words", (1, 150)), "answer_words")
        self.min_overlap = float(self.spec["support"].get("min_overlap", 0.6))
        self.max_cosine = float(self.spec["near_duplicate"].get("max_cosine", 0.9))
        self.max_f1 = float(self.spec["closed_book"].get("max_f1", 0.5))

    @staticmethod
    def _bounds(value: Any, name: str) -> tuple[int, int]:
        try:
            low, high = (int(v) for v in value)
        except (TypeError, ValueError):
            raise ConfigError(f"filters.length.{name}: expected [min, max] words, got {value!r}") from None
        if not 0 <= low <= high:
            raise ConfigError(f"filters.length.{name}: need 0 <= min <= max, got [{low}, {high}]")
        return low, high

    def _apply(self, name: str, candidates: list[Candidate], passes) -> list[Candidate]:
        """Run one filter over the candidates still alive; returns the survivors."""
        if name not in self.enabled:
            return candidates
        alive = [c for c in candidates if c.rejected_by is None]
        verdicts = passes(alive) if alive else []
        for cand, ok in zip(alive, verdicts):
            cand.checked.append(name)
            if not ok:
                cand.rejected_by = name
        return [c for c in alive if c.rejected_by is None]

    # -- text filters -----------------------------------------------------------------------------------------
    def text_checks(self, candidates: list[Candidate]) -> None:
        def phrasing(cands):
            return [not any(p.search(c.question) or p.search(c.answer) for p in self.patterns) for c in cands]

        def length(cands):
            (ql, qh), (al, ah) = self.question_words, self.answer_words
            return [ql <= len(c.question.split()) <= qh and al <= len(c.answer.split()) <= ah for c in cands]

        def support(cands):
            out = []
            for c in cands:
                c.detail["support_overlap"] = round(support_overlap(c.answer, c.shown), 4)
                out.append(c.detail["support_overlap"] >= self.min_overlap)
            return out

        for name, fn in (("phrasing", phrasing), ("length", length), ("support", support)):
            self._apply(name, candidates, fn)

    def near_duplicates(self, candidates: list[Candidate], vectors: np.ndarray | None,
                        kept: np.ndarray | None) -> None:
        """Reject candidates whose question is too close (cosine) to a question already kept."""
        if kept is None or not len(kept) or vectors is None:
            self._apply("near_duplicate", candidates, lambda cands: [True] * len(cands))
            return
        index = {id(c): i for i, c in enumerate(candidates)}

        def check(cands):
            sims = vectors[[index[id(c)] for c in cands]] @ kept.T
            out = []
            for c, row in zip(cands, sims):
                c.detail["max_cosine"] = round(float(row.max()), 4)
                out.append(c.detail["max_cosine"] < self.max_cosine)
            return out

        self._apply("near_duplicate", candidates, check)

    def is_duplicate(self, vector: np.ndarray, kept: list[np.ndarray]) -> bool:
        """Used when choosing among this round's survivors: a question close to one chosen moments ago."""
        return "near_duplicate" in self.enabled and any(float(vector @ k) >= self.max_cosine for k in kept)

    # -- LLM filters ------------------------------------------------------------------------------------------
    def answerable(self, engine: LLMEngine, candidates: list[Candidate], seed: int, retries: int) -> int:
        """Judge: answerable from the documents alone, answer agrees. Returns the number of unreadable verdicts."""
        if "answerable" not in self.enabled:
            return 0
        spec = self.spec["answerable"]
        template = load_prompt(spec.get("prompt", "datagen_answerable"), spec.get("prompt_dir"))
        schema = {"type": "object", "properties": {"answerable": {"type": "string", "enum": ["yes", "no"]}},
                  "required": ["answerable"], "additionalProperties": False}
        unreadable = 0

        def check(cands):
            nonlocal unreadable
            requests = [LLMRequest(
                messages=template.messages(documents=[{"label": i + 1, "text": t} for i, t in enumerate(c.shown)],
                                           question=c.question, answer=c.answer),
                params=SamplingParams(temperature=float(spec.get("temperature", 0.0)),
                                      max_tokens=int(spec.get("max_tokens", 16)), seed=seed,
                                      json_schema=schema if engine.supports_json_schema else None),
                stop_plain=template.stop_plain) for c in cands]
            out = []
            for c, asked in zip(cands, ask_with_retries(
                    engine, requests, lambda _i, text: parse_yes_no(text), max_retries=retries,
                    retry_temperature=RETRY_TEMPERATURE, desc="datagen answerable")):
                c.detail["answerable"] = asked.value
                unreadable += asked.value is None
                out.append(asked.value is True)  # an unreadable verdict is not a yes
            return out

        self._apply("answerable", candidates, check)
        return unreadable

    def closed_book(self, engine: LLMEngine, candidates: list[Candidate], seed: int) -> None:
        """The judge engine answers without documents; token F1 with the pair's answer >= max_f1 rejects."""
        if "closed_book" not in self.enabled:
            return
        spec = self.spec["closed_book"]
        template = load_prompt(spec.get("prompt", "datagen_closed_book"), spec.get("prompt_dir"))

        def check(cands):
            requests = [LLMRequest(messages=template.messages(question=c.question),
                                   params=SamplingParams(temperature=0.0, max_tokens=int(spec.get("max_tokens", 48)),
                                                         seed=seed),
                                   stop_plain=template.stop_plain) for c in cands]
            out = []
            for c, completion in zip(cands, engine.generate(requests, desc="datagen closed-book")):
                f1 = token_f1(completion.text, c.answer)
                c.detail["closed_book_answer"] = completion.text[:300]
                c.detail["closed_book_f1"] = round(f1, 4)
                out.append(f1 < self.max_f1)
            return out

        self._apply("closed_book", candidates, check)
