"""Helpers for the eval tests (a uniquely named module, so it never clashes with other test folders)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rag.judge.base import Judge
from rag.llm.base import Completion, LLMEngine, LLMRequest
from rag.llm.cache import ResponseCache
from rag.llm.factory import EngineFactory
from rag.metrics.registry import MetricSpec
from rag.records import AnswerRecord

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


def record_from_question(q: Any, answer: str | None = None, with_gold: bool = True) -> AnswerRecord:
    """An answer record (docs/architecture.md) built from a loaded Question."""
    return AnswerRecord.from_json({"id": q.id, "question": q.question, "answer": answer if answer is not None else q.answer,
            "passages": [{"doc_IDs": [d], "passage": t} for d, t in zip(q.gold_doc_ids, q.gold_docs)],
            "gold_answer": q.answer if with_gold else None, "gold_doc_ids": list(q.gold_doc_ids) if with_gold else [],
            "gold_docs": list(q.gold_docs) if with_gold else [], "hop": q.hop, "categories": dict(q.categories)})


def synthetic_records(n: int = 4) -> list[AnswerRecord]:
    """Small hand-made records: alternating single/multi hop, with gold answers and passages."""
    return [AnswerRecord.from_json({"id": f"q{i}", "question": f"What is fact {i}?", "answer": f"Fact {i} is true.",
             "passages": [{"doc_IDs": [f"d{i}"], "passage": f"Passage saying fact {i} is true."}],
             "gold_answer": f"Fact {i} holds.", "gold_docs": [f"Gold document about fact {i}."],
             "gold_doc_ids": [f"d{i}"], "hop": "single" if i % 2 == 0 else "multi", "categories": {}})
            for i in range(n)]


CONF = REPO / "conf"
SCRIPTED_LLM = {"_target_": "scripted.Engine"}


def judge_root(*names: str, llm: dict[str, Any] | None = None, **overrides: Any) -> DictConfig:
    """A root config {llm, judge: {llm: ${llm}, <name>: conf/judge/<name>.yaml ...}} as the pipeline composes it:
    a judge YAML's defaults (the shared `nuggetizer` node of the nugget judges) are added beside it once, and
    `overrides[<key>]` updates any node (`nuggetizer={...}` the shared one)."""
    judge: dict[str, Any] = {"llm": "${llm}", "report": True}
    for name in names:
        node = OmegaConf.to_container(OmegaConf.load(CONF / "judge" / f"{name}.yaml"))
        for included in node.pop("defaults", []):
            if included != "_self_" and included not in judge:
                judge[included] = OmegaConf.to_container(OmegaConf.load(CONF / "judge" / f"{included}.yaml"))
        judge[name] = node
    for key, values in overrides.items():
        judge[key].update(values)
    return OmegaConf.create({"llm": llm or SCRIPTED_LLM, "judge": judge})


def factory_with(engine: LLMEngine, root: DictConfig, cache_dir: Path | None = None) -> EngineFactory:
    """An engine factory that already holds `engine` under the root's `llm` config (as the pipeline's does)."""
    factory = EngineFactory(cache_dir)
    factory.adopt(root.llm, engine)
    return factory


class FixedReplyEngine(LLMEngine):
    """A real engine buildable from YAML (`_target_: evaltools.FixedReplyEngine`) that answers every request with
    `reply`: for tests of config plumbing (entry points, factories) where the model's words do not matter."""

    def __init__(self, reply: str, model: str = "fixed", cache: ResponseCache | None = None):
        super().__init__(model=model, chat_format="chat", cache=cache)
        self.reply = reply

    def _generate(self, requests: Sequence[LLMRequest], desc: str) -> list[Completion]:
        return [Completion(text=self.reply, prompt_tokens=len(prompt_text(r).split()), completion_tokens=3)
                for r in requests]


class AnswerLengthJudge(Judge):
    """A judge without an LLM, defined outside the project: words per answer (to show class + YAML suffice)."""

    def __init__(self, name: str = "length", llm: Any = None, max_words: int = 100):
        super().__init__(name, None)
        self.max_words = max_words

    def metric_specs(self) -> list[MetricSpec]:
        return [MetricSpec(f"judge/{self.name}/words/{{split}}", "per_answer", "words per answer",
                           (0, self.max_words), False)]

    def evaluate(self, records: Sequence[AnswerRecord], engine: LLMEngine | None, ctx: Any) -> dict[str, Any]:
        for r in records:
            r.judges[self.name] = {"words": min(len(r.answer.split()), self.max_words)}
        return {f"judge/{self.name}/words/all": sum(r.judges[self.name]["words"] for r in records) / len(records)}
