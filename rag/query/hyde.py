"""HyDE as GRAG runs it (RMIT-ADMS, LiveRAG 2025, arXiv 2506.14516; rmit-ir/GRAG-LiveRAG `src/systems/grag/grag.py`
with `enable_hyde`): the model writes a short hypothetical answer, and the question and that answer are both
searched, each by every source (GRAG's `query_fusion`, `src/services/indicies.py`, sends every query to BM25 and
to the dense index and fuses the lists).

The hypothetical answer is the whole stripped reply, as in GRAG (an echoed "Answer:" label is dropped). An empty
reply is re-asked, then falls back to the question alone.
"""

from __future__ import annotations

import re
from typing import Any

from rag.llm.base import LLMEngine
from rag.query.base import Query, QuerySet
from rag.query.common import LLMQueryWriter, drop_label, unique_queries
from rag.records import Question

_LABEL = re.compile(r"^(?:hypothetical\s+)?(?:answer|passage)\s*[:\-]\s*", re.IGNORECASE)


def parse_passage(text: str) -> str | None:
    """The hypothetical answer passage, or None when the reply is empty."""
    return drop_label((text or "").strip(), _LABEL) or None


class HyDEWriter(LLMQueryWriter):
    """`query=hyde`: the question and a hypothetical answer passage, both for every source."""

    name = "hyde"

    def __init__(self, max_tokens: int = 256, **kwargs: Any):
        super().__init__(max_tokens=max_tokens, **kwargs)

    def prompt_names(self) -> tuple[str, ...]:
        return ("hyde",)

    def write(self, questions: list[Question], engine: LLMEngine | None) -> list[QuerySet]:
        template = self.prompt("hyde")
        requests = [self.request(template, question=q.question) for q in questions]
        asked = self.ask(engine, requests, [parse_passage] * len(requests), "query hyde")
        self.stats["questions"] += len(questions)
        out = []
        for q, a in zip(questions, asked):
            steps: dict[str, Any] = {"hypothetical_answer": a.value}
            queries = [Query(q.question)] if self.include_question else []
            if a.value is None:
                steps["raw"] = a.raw
                self.fell_back(steps, "hypothetical_answer")
                queries = [Query(q.question)]
            else:
                queries.append(Query(a.value))
            out.append(QuerySet(unique_queries(queries), steps=steps))
        return out
