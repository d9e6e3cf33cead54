"""Helpers for the eval tests (a uniquely named module, so it never clashes with other test folders)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rag.llm.base import Completion, LLMEngine, LLMRequest
from rag.llm.cache import ResponseCache

REPO = Path(__file__).resolve().parents[2]
DATA_DIR = Path(os.environ.get("RAG_DATA_DIR", REPO.parent / "shared" / "data"))


class ScriptedEngine(LLMEngine):
    """A real LLMEngine whose backend answers from a function of the request (test double for bad output).

    It goes through the base class's cache and usage accounting like any engine; `batches` records the
    requests of every backend call so tests can check batching and re-asks.
    """

    def __init__(self, respond: Callable[[LLMRequest], str], supports_json_schema: bool = False,
                 cache: ResponseCache | None = None, model: str = "scripted"):
        super().__init__(model=model, chat_format="chat", cache=cache, supports_json_schema=supports_json_schema)
        self.respond = respond
        self.batches: list[list[LLMRequest]] = []

    def _generate(self, requests: Sequence[LLMRequest], desc: str) -> list[Completion]:
        self.batches.append(list(requests))
        return [Completion(text=self.respond(r), prompt_tokens=1, completion_tokens=1) for r in requests]


def prompt_text(request: LLMRequest) -> str:
    return "\n".join(m["content"] for m in request.messages)


def record_from_question(q: Any, answer: str | None = None, with_gold: bool = True) -> dict[str, Any]:
    """An answers.jsonl record (docs/architecture.md) built from a loaded Question."""
    return {"id": q.id, "question": q.question, "answer": answer if answer is not None else q.answer,
            "passages": [{"doc_IDs": [d], "passage": t} for d, t in zip(q.gold_doc_ids, q.gold_docs)],
            "gold_answer": q.answer if with_gold else None, "gold_doc_ids": list(q.gold_doc_ids) if with_gold else [],
            "gold_docs": list(q.gold_docs) if with_gold else [], "hop": q.hop, "categories": dict(q.categories)}


def synthetic_records(n: int = 4) -> list[dict[str, Any]]:
    """Small hand-made records: alternating single/multi hop, with gold answers and passages."""
    return [{"id": f"q{i}", "question": f"What is fact {i}?", "answer": f"Fact {i} is true.",
             "passages": [{"doc_IDs": [f"d{i}"], "passage": f"Passage saying fact {i} is true."}],
             "gold_answer": f"Fact {i} holds.", "gold_docs": [f"Gold document about fact {i}."],
             "gold_doc_ids": [f"d{i}"], "hop": "single" if i % 2 == 0 else "multi", "categories": {}}
            for i in range(n)]
