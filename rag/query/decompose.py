"""Decomposition of a multi-document question into sub-questions, as PreQRAG does (UDInfo, LiveRAG 2025,
arXiv 2506.17493; Infolab-UDEL/LiveRag `main_final_code.py`, `handle_multidoc`).

The model lists simpler questions as "Question1: ...?", "Question2: ...?", read as PreQRAG reads them (its
pattern `Question\\d+:\\s*(.*?\\?)` on the reply without double quotes; we also allow "Question 1", bold marks
and, when no line is labelled, a numbered list "1. ...?"). Each sub-question becomes group g = 1..n, searched
as written by every source; at most `max_subquestions` are kept (PreQRAG interleaves the first two), repeats
dropped. `include_question` also searches the question itself (group 0); PreQRAG does not.

PreQRAG's decomposition prompt (`convert_multidoc_questions`) is called in its code but missing from the
published `prompt_library.py`; ours asks for its parsed output format, and uses the system line of its other
query prompts. A reply without a sub-question is re-asked, then falls back to the question as asked (no groups).
"""

from __future__ import annotations

import re
from typing import Any

from rag.core.errors import ConfigError
from rag.llm.asking import Asked
from rag.llm.base import LLMEngine, LLMRequest
from rag.query.base import Query, QuerySet
from rag.query.common import LLMQueryWriter, Parser, plain_reply, strip_markdown, unique_queries
from rag.records import Question

_LABELLED = re.compile(r"question\s*\d+\s*\**\s*[:.)]\s*\**\s*([^\n]*?\?)", re.IGNORECASE)
_NUMBERED = re.compile(r"^\s*\**\s*\d+\s*[.)]\s*\**\s*([^\n]*?\?)", re.IGNORECASE | re.MULTILINE)


def parse_subquestions(text: str, limit: int) -> list[str] | None:
    """The first `limit` distinct sub-questions of a reply, or None when it has none."""
    reply = plain_reply(text)
    found = _LABELLED.findall(reply) or _NUMBERED.findall(reply)
    out: list[str] = []
    for sub in found:
        sub = strip_markdown(sub)
        if sub.strip("? ") and sub.lower() not in {s.lower() for s in out}:
            out.append(sub)
    return out[:limit] or None


class DecomposeWriter(LLMQueryWriter):
    """`query=decompose`: sub-questions as groups 1..n, each for every source, plus the question (group 0) when
    `include_question`. `per_group_k` / `single_k`: see `LLMQueryWriter` (None: the pipeline's usual cut)."""

    name = "decompose"

    def __init__(self, max_subquestions: int = 2, max_tokens: int = 256, include_question: bool = True,
                 per_group_k: int | None = None, single_k: int | None = None, **kwargs: Any):
        super().__init__(max_tokens=max_tokens, include_question=include_question, **kwargs)
        if max_subquestions < 1:
            raise ConfigError(f"query.max_subquestions must be >= 1, got {max_subquestions}")
        for name, k in (("per_group_k", per_group_k), ("single_k", single_k)):
            if k is not None and k < 1:
                raise ConfigError(f"query.{name} must be >= 1 or null, got {k}")
        self.max_subquestions = max_subquestions
        self.per_group_k, self.single_k = per_group_k, single_k

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "max_subquestions": self.max_subquestions}

    def prompt_names(self) -> tuple[str, ...]:
        return ("preqrag_decompose",)

    def parse(self, text: str) -> list[str] | None:
        return parse_subquestions(text, self.max_subquestions)

    def requests_for(self, question: Question) -> tuple[list[LLMRequest], list[Parser]]:
        """The question's one prompt and its parser."""
        request = self.request(self.prompt("preqrag_decompose"), question=question.question,
                               max_subquestions=self.max_subquestions)
        return [request], [self.parse]

    def assemble(self, question: Question, asked: list[Asked[Any]]) -> QuerySet:
        """The question's queries and groups from its one answer."""
        (a,) = asked
        steps: dict[str, Any] = {"sub_questions": a.value or []}
        if a.value is None:
            steps["raw"] = a.raw
            self.fell_back(steps, "sub_questions")
            return QuerySet([Query(question.question)], steps=steps)
        queries = [Query(question.question)] if self.include_question else []
        queries += [Query(sub, None, g) for g, sub in enumerate(a.value, start=1)]
        return QuerySet(unique_queries(queries), groups=list(a.value), steps=steps)

    def write(self, questions: list[Question], engine: LLMEngine | None) -> list[QuerySet]:
        per_question = [self.requests_for(q) for q in questions]
        asked = self.ask(engine, [rs[0] for rs, _ in per_question], [ps[0] for _, ps in per_question],
                         "query decompose")
        self.stats["questions"] += len(questions)
        return [self.assemble(q, [a]) for q, a in zip(questions, asked)]
