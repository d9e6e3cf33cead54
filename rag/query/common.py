"""What the LLM query writers share: one batched, re-asked step per call, fallback counting, reply cleaning.

Every writer asks all of a step's prompts in one `engine.generate` batch (`ask_with_retries`, so only the
unparsable outputs are asked again, in a batch of their own). An output still unusable after `max_retries`
falls back to the question as asked: a writer never fails a run because a model ignored the format, and each
fallback is counted in `stats["fallbacks"]` and named in the question's `steps["fallbacks"]`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from rag.core.errors import ConfigError
from rag.llm.asking import Asked, ask_with_retries
from rag.llm.base import LLMEngine, LLMRequest
from rag.query.base import Query, QueryWriter

#: turns one raw output into its value, or None when it is unusable
Parser = Callable[[str], Any]

_MARKDOWN = re.compile(r"^[\s*#>`_-]+|[\s*`_]+$")


def strip_markdown(text: str) -> str:
    """A line without the bold, heading and bullet marks a chat model wraps it in."""
    return _MARKDOWN.sub("", text).strip()


def plain_reply(text: str | None) -> str:
    """The reply as PreQRAG's `call_llm` reads it: double quotes removed, surrounding blanks stripped."""
    return (text or "").replace('"', "").replace("\u201c", "").replace("\u201d", "").strip()


def drop_label(text: str, label: re.Pattern[str]) -> str:
    """The text without the label a model echoes from the prompt's cue ("Answer:", "Rewritten question:")."""
    return label.sub("", text, count=1).strip()


def unique_queries(queries: Sequence[Query]) -> list[Query]:
    """The queries without repeats: an exact repeat, or a query for one source whose text the same group already
    searches with every source, adds nothing to retrieval."""
    everywhere = {(q.text, q.group) for q in queries if q.source is None}
    out: list[Query] = []
    seen: set[Query] = set()
    for q in queries:
        if q in seen or (q.source is not None and (q.text, q.group) in everywhere):
            continue
        seen.add(q)
        out.append(q)
    return out


class LLMQueryWriter(QueryWriter):
    """A writer whose steps are LLM calls: the re-ask budget, the run's counters and PreQRAG's context sizes.

    `per_group_k` and `single_k` tell the pipeline how to pick the context (None: its usual cut to `rerank.k`):
    a question with sub-questions (`QuerySet.groups`) keeps the top `per_group_k` passages of each sub-question,
    interleaved without duplicates; a question without keeps its top `single_k`. They join the key, so a context
    built with other sizes is never taken for this one.
    """

    per_group_k: int | None = None
    single_k: int | None = None

    def __init__(self, max_retries: int = 1, **kwargs: Any):
        super().__init__(**kwargs)
        if max_retries < 0:
            raise ConfigError(f"query.max_retries must be >= 0, got {max_retries}")
        #: re-asks of an unparsable output (new seed, temperature at least 0.2) before it falls back
        self.max_retries = max_retries
        #: counters over every `write` of this writer: questions, LLM outputs asked, outputs re-asked, fallbacks
        self.stats: dict[str, int] = {"questions": 0, "outputs": 0, "retried": 0, "fallbacks": 0}

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "max_retries": self.max_retries, "per_group_k": self.per_group_k,
                "single_k": self.single_k}

    def require_engine(self, engine: LLMEngine | None) -> LLMEngine:
        if engine is None:
            raise ConfigError(f"query={self.name} writes its queries with an LLM, but no engine was given")
        return engine

    def ask(self, engine: LLMEngine | None, requests: Sequence[LLMRequest], parsers: Sequence[Parser],
            desc: str) -> list[Asked[Any]]:
        """One batch for the whole step (none when it is empty), then batched re-asks of the unparsable outputs
        only; request i is read by `parsers[i]`. Counts outputs and re-asks; the caller counts fallbacks."""
        if not requests:
            return []
        asked = ask_with_retries(self.require_engine(engine), requests, lambda i, text: parsers[i](text),
                                 max_retries=self.max_retries, desc=desc)
        self.stats["outputs"] += len(asked)
        self.stats["retried"] += sum(1 for a in asked if a.attempts > 1)
        return asked

    def fell_back(self, steps: dict[str, Any], what: str) -> None:
        """Record one output that fell back to the question as asked."""
        self.stats["fallbacks"] += 1
        steps.setdefault("fallbacks", []).append(what)
