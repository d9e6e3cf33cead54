"""Question rewriting per retriever source, as PreQRAG does for single-document questions (UDInfo, LiveRAG 2025,
arXiv 2506.17493; Infolab-UDEL/LiveRag `main_final_code.py`, `handle_singledoc`, prompts `TEST#sparse` and
`TEST#dense` of `prompt_library.py`).

The sparse retriever (BM25) gets a keyword-style web search query that keeps the question's key terms; the dense
retriever gets the question with its premise removed, as one natural-language question. PreQRAG searches only
the two rewrites (`include_question: false`); each rewrite is read as PreQRAG reads it (double quotes removed,
the text after a bold "...:**" label), then, our addition for chatty models, its first line that is not an
introduction ending in ":" and without an echoed "Rewritten question:" label. Both prompts of all questions go
in one batch. A rewrite that stays empty falls back to the question as asked for that source; when both do,
the question is searched once, by every source.
"""

from __future__ import annotations

import re
from typing import Any

from rag.llm.asking import Asked
from rag.llm.base import LLMEngine, LLMRequest
from rag.query.base import Query, QuerySet
from rag.query.common import LLMQueryWriter, Parser, drop_label, plain_reply, strip_markdown, unique_queries
from rag.records import Question

_LABEL = re.compile(r"^(?:re-?writ(?:e|ten)\s+)?(?:search\s+)?(?:question|query)\s*[:\-]\s*", re.IGNORECASE)


def parse_rewrite(text: str) -> str | None:
    """The rewritten query, or None when the reply holds none."""
    reply = plain_reply(text).split(":**")[-1]
    for line in reply.splitlines():
        line = drop_label(strip_markdown(line), _LABEL)
        if line and not line.endswith(":"):
            return line
    return None


class RewriteWriter(LLMQueryWriter):
    """`query=rewrite`: one rewrite of the question per source, a keyword query for `sparse_source` and a
    natural-language question for `dense_source` (the names of `retriever.sources` in `retriever=fusion`)."""

    name = "rewrite"

    def __init__(self, sparse_source: str = "sparse", dense_source: str = "dense", max_tokens: int = 128,
                 include_question: bool = False, **kwargs: Any):
        super().__init__(max_tokens=max_tokens, include_question=include_question, **kwargs)
        self.sources = {"sparse": sparse_source, "dense": dense_source}

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "sources": dict(self.sources)}

    def prompt_names(self) -> tuple[str, ...]:
        return ("preqrag_rewrite_sparse", "preqrag_rewrite_dense")

    def requests_for(self, question: Question) -> tuple[list[LLMRequest], list[Parser]]:
        """The question's two prompts (sparse, dense) and their parsers."""
        requests = [self.request(self.prompt(name), question=question.question) for name in self.prompt_names()]
        return requests, [parse_rewrite] * len(requests)

    def assemble(self, question: Question, asked: list[Asked[Any]]) -> QuerySet:
        """The question's queries from its two answers (sparse, dense)."""
        steps: dict[str, Any] = {"rewrites": {}}
        queries = [Query(question.question)] if self.include_question else []
        rewritten = []
        for kind, a in zip(self.sources, asked):
            steps["rewrites"][kind] = a.value
            if a.value is None:
                steps.setdefault("raw", {})[kind] = a.raw
                self.fell_back(steps, kind)
            else:
                rewritten.append(kind)
            queries.append(Query(a.value or question.question, self.sources[kind]))
        if not rewritten:
            queries = [Query(question.question)]
        return QuerySet(unique_queries(queries), steps=steps)

    def write(self, questions: list[Question], engine: LLMEngine | None) -> list[QuerySet]:
        per_question = [self.requests_for(q) for q in questions]
        requests = [r for rs, _ in per_question for r in rs]
        parsers = [p for _, ps in per_question for p in ps]
        asked = self.ask(engine, requests, parsers, "query rewrite")
        self.stats["questions"] += len(questions)
        out, pos = [], 0
        for q, (rs, _) in zip(questions, per_question):
            out.append(self.assemble(q, asked[pos: pos + len(rs)]))
            pos += len(rs)
        return out
