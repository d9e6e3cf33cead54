"""Crucible's nugget bank: Q&A nuggets read from model output, paraphrases merged, popularity counted.

Merging follows the Crucible paper's "paraphrase detection and merging": two nuggets of one request whose
embeddings (the project's `rag.embed.Embedder`, "question answer" text) have cosine similarity at or above
`merge_threshold` are the same nugget; pairs between `check_threshold` and `merge_threshold` are borderline and
go to the LLM (`crucible_same` prompt, one batch for all requests); below `check_threshold` they stay apart.
Merged groups are the connected components of these decisions. A group's canonical nugget is its first-seen
member (documents are read in retrieval order), and its popularity is the number of distinct documents that
produced a member. The bank keeps the `size` most popular groups (ties: first seen).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_QA = re.compile(r"Q\s*[:.)-]\s*(?P<q>.+?)\s+A\s*[:.)-]\s*(?P<a>.+?)(?=\s+Q\s*[:.)-]|$)", re.IGNORECASE | re.DOTALL)
_Q_ONLY = re.compile(r"^Q\s*[:.)-]\s*(?P<q>[^?]*[A-Za-z][^?]*\?)\s*$", re.IGNORECASE)
_YES = re.compile(r"^\W*(yes|same|true)\b", re.IGNORECASE)
_NO = re.compile(r"^\W*(no|different|not|false)\b", re.IGNORECASE)


@dataclass
class Nugget:
    """A Q&A nugget, where it came from, and (once in the bank) its merged members and scores."""

    question: str
    answer: str
    doc_id: str = ""
    passage_id: str = ""
    doc_ids: list[str] = field(default_factory=list)
    members: list[dict[str, str]] = field(default_factory=list)
    popularity: int = 1
    quality: float | None = None
    score: float | None = None

    @property
    def text(self) -> str:
        return f"{self.question} {self.answer}".strip()

    def to_dict(self) -> dict[str, Any]:
        return {"question": self.question, "answer": self.answer, "doc_ids": self.doc_ids or [self.doc_id],
                "popularity": self.popularity, "members": self.members, "quality": self.quality,
                "score": self.score}


def parse_qa_nuggets(text: str, max_nuggets: int | None = None) -> list[tuple[str, str]] | None:
    """(question, answer) pairs written as "Q: ... A: ..." (one per line or run together); None when there is
    none, which the caller counts as a parse failure. Pairs with an empty side or no letter are dropped. A line
    with only "Q: <question>?" (small models often leave out the answer) is kept with an empty answer: the
    nugget's question still drives retrieval and extraction, which answer it from a passage."""
    pairs = []
    for line in (text or "").splitlines() or [""]:
        found = False
        for m in _QA.finditer(line.strip()):
            q, a = m.group("q").strip(), m.group("a").strip().rstrip(".")
            if re.search(r"[A-Za-z]", q) and re.search(r"\w", a):
                pairs.append((q if q.endswith("?") else q.rstrip(".") + "?", a))
                found = True
        question_only = None if found else _Q_ONLY.match(line.strip())
        if question_only:
            pairs.append((question_only.group("q").strip(), ""))
    pairs = list(dict.fromkeys(pairs))
    if max_nuggets:
        pairs = pairs[:max_nuggets]
    return pairs or None


#: structured output for the paraphrase check where the engine supports it
SAME_SCHEMA = {"type": "object", "properties": {"same": {"type": "string", "enum": ["yes", "no"]}},
               "required": ["same"], "additionalProperties": False}
_JSON_SAME = re.compile(r'"same"\s*:\s*"([^"]*)"', re.IGNORECASE)


def parse_yes_no(text: str) -> bool | None:
    """True for yes, False for no, None when the reply is neither; reads {"same": "yes"} objects too."""
    found = _JSON_SAME.search(text or "")
    text = found.group(1) if found else text
    if _YES.search(text or ""):
        return True
    if _NO.search(text or ""):
        return False
    return None


class _Groups:
    """Union-find over nugget indices."""

    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, i: int, j: int) -> None:
        a, b = self.find(i), self.find(j)
        if a != b:
            self.parent[max(a, b)] = min(a, b)  # the first-seen member stays the root


@dataclass
class BankStats:
    """What merging did for one request (stored under `steps.merge`)."""

    candidates: int = 0
    auto_merged: int = 0
    llm_checked: int = 0
    llm_merged: int = 0
    llm_parse_failures: int = 0

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


#: ask the LLM about borderline pairs: list of (first, second) -> replies in order (one batch)
PairCheck = Callable[[list[tuple[Nugget, Nugget]]], list[str]]


class NuggetBank:
    def __init__(self, embedder: Any, merge_threshold: float = 0.9, check_threshold: float = 0.75,
                 size: int = 20, max_llm_checks: int = 40):
        if not 0 <= check_threshold <= merge_threshold <= 1:
            raise ValueError("generator.bank: need 0 <= check_threshold <= merge_threshold <= 1")
        self.embedder = embedder
        self.merge_threshold, self.check_threshold = merge_threshold, check_threshold
        self.size, self.max_llm_checks = size, max_llm_checks

    def build(self, per_request: Sequence[Sequence[Nugget]], check: PairCheck | None
              ) -> tuple[list[list[Nugget]], list[BankStats]]:
        """Merge each request's nuggets (one embedder call and one LLM batch for all requests)."""
        flat = [n for ns in per_request for n in ns]
        vectors = self.embedder.encode_passages([n.text for n in flat]) if flat else np.zeros((0, 1))
        offsets = np.cumsum([0, *[len(ns) for ns in per_request]])
        groups, stats, borderline = [], [], []
        for r, nuggets in enumerate(per_request):
            vec = np.asarray(vectors[offsets[r]: offsets[r + 1]], dtype=np.float32)
            g, s = _Groups(len(nuggets)), BankStats(candidates=len(nuggets))
            sims = vec @ vec.T if len(nuggets) else np.zeros((0, 0))
            pairs = [(float(sims[i, j]), i, j) for i in range(len(nuggets)) for j in range(i + 1, len(nuggets))]
            asked = []
            for sim, i, j in sorted(pairs, reverse=True):
                if sim >= self.merge_threshold:
                    if g.find(i) != g.find(j):
                        s.auto_merged += 1
                    g.union(i, j)
                elif sim >= self.check_threshold and len(asked) < self.max_llm_checks and check is not None:
                    asked.append((i, j))
            borderline.extend((r, i, j) for i, j in asked)
            groups.append(g)
            stats.append(s)
        replies = check([(per_request[r][i], per_request[r][j]) for r, i, j in borderline]) \
            if borderline and check is not None else []
        for (r, i, j), reply in zip(borderline, replies):
            stats[r].llm_checked += 1
            same = parse_yes_no(reply)
            if same is None:
                stats[r].llm_parse_failures += 1  # fallback "not_merged": an unreadable check keeps both
            elif same and groups[r].find(i) != groups[r].find(j):
                groups[r].union(i, j)
                stats[r].llm_merged += 1
        return [self._canonical(ns, g) for ns, g in zip(per_request, groups)], stats

    def _canonical(self, nuggets: Sequence[Nugget], groups: _Groups) -> list[Nugget]:
        members: dict[int, list[int]] = {}
        for i in range(len(nuggets)):
            members.setdefault(groups.find(i), []).append(i)
        bank = []
        for root, idx in members.items():
            first = nuggets[root]
            docs = list(dict.fromkeys(nuggets[i].doc_id for i in idx))
            bank.append(Nugget(first.question, first.answer, first.doc_id, first.passage_id, doc_ids=docs,
                               members=[{"question": nuggets[i].question, "answer": nuggets[i].answer,
                                         "doc_id": nuggets[i].doc_id} for i in idx],
                               popularity=len(docs)))
        order = sorted(range(len(bank)), key=lambda k: (-bank[k].popularity, k))
        return [bank[k] for k in order][: self.size]
