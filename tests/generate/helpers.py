"""Shared pieces for the strategy tests: real dev questions and passages, call counting, a scripted engine."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

from rag.data.corpus import chunk_words
from rag.data.questions import DataMorganaQA
from rag.generate.base import GenerationInput
from rag.llm.base import Completion, LLMEngine, LLMRequest
from rag.records import Passage, Question, ScoredPassage

ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = Path(os.environ.get("RAG_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()
#: two multi-hop questions and a single-hop one from the LiveRAG dev set
QUESTION_IDS = ("1", "2", "3")


@lru_cache(maxsize=1)
def dev_questions() -> tuple[Question, ...]:
    return tuple(DataMorganaQA(path="liverag_dm/dev_qa.tsv", data_dir=str(DATA_DIR)).load())


def question(qid: str) -> Question:
    return next(q for q in dev_questions() if q.id == qid)


def gold_passages(q: Question, words: int = 60) -> list[Passage]:
    """The first `words`-word chunk of each gold document (short, so the small model runs fast)."""
    return [Passage(passage_id=f"{doc_id}#p0", doc_id=doc_id, text=chunk_words(doc, words)[0])
            for doc_id, doc in zip(q.gold_doc_ids, q.gold_docs)]


def items_for(ids: Sequence[str] = QUESTION_IDS, words: int = 60, distractors: int = 2) -> list[GenerationInput]:
    """Each question's gold passages plus other dev questions' gold passages as distractors."""
    pool = [q for q in dev_questions() if q.id not in ids]
    out = []
    for n, qid in enumerate(ids):
        q = question(qid)
        others = [gold_passages(o, words)[0] for o in pool[n * distractors: (n + 1) * distractors]]
        passages = gold_passages(q, words) + others
        out.append(GenerationInput(q, [ScoredPassage(p, 10.0 - i, i + 1) for i, p in enumerate(passages)]))
    return out


class CallLog:
    """Counts `engine.generate` calls (one per batched step) and their sizes, without changing results."""

    def __init__(self, engine: LLMEngine, monkeypatch) -> None:
        self.calls: list[tuple[str, int]] = []
        original = engine.generate

        def counting(requests, desc: str = "generate"):
            self.calls.append((desc, len(requests)))
            return original(requests, desc=desc)

        monkeypatch.setattr(engine, "generate", counting)

    @property
    def n(self) -> int:
        return len(self.calls)


class ScriptedEngine(LLMEngine):
    """A plain-text engine whose reply is a function of the rendered prompt: exercises the strategies' state
    machines and fallbacks deterministically (the real-model tests cover the real thing)."""

    def __init__(self, respond: Callable[[str, LLMRequest], str]):
        super().__init__(model="scripted", chat_format="plain")
        self.respond = respond
        self.prompts: list[str] = []

    def _generate(self, requests: Sequence[LLMRequest], desc: str) -> list[Completion]:
        out = []
        for request in requests:
            prompt = self.render(request)
            self.prompts.append(prompt)
            text = self.respond(prompt, request)
            out.append(Completion(text=text, prompt_tokens=len(prompt.split()), completion_tokens=len(text.split()),
                                  prompt=prompt))
        return out
