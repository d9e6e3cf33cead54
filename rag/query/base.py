"""The query-stage interface: questions in, one or more search queries per question out.

Data flows dataset -> query -> retrieve -> rerank -> order -> generate. A `QueryWriter` turns each question into a
`QuerySet`: the queries it is searched with, each naming the retriever source it is meant for (`source`, a name of
`retriever.sources` in a fusion retriever, or None for every source) and the sub-question it serves (`group`, for
decompositions whose sub-questions are reranked and kept apart). The question itself is always what the reranker
and the generator see; the queries only change what is retrieved.

Writers that call an LLM batch each step across questions (one `engine.generate` per step) and go through the
engine's response cache, so a rerun or a second sweep cell with the same writer and engine costs nothing.
`query=none` (no writer) keeps the pipeline's single-query path and its cache keys exactly as they were.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rag.core.hashing import stable_hash
from rag.llm.base import LLMEngine, LLMRequest, SamplingParams
from rag.prompts import PromptTemplate, load_prompt
from rag.records import Question


@dataclass(frozen=True)
class Query:
    """One search query. `source`: the retriever source it is for (None: every source). `group`: which
    sub-question it serves (0 for the question itself)."""

    text: str
    source: str | None = None
    group: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"text": self.text}
        if self.source is not None:
            out["source"] = self.source
        if self.group:
            out["group"] = self.group
        return out


@dataclass
class QuerySet:
    """A question's queries, and what the writer produced on the way (for the answer record's `queries`)."""

    queries: list[Query]
    #: the sub-questions of a decomposition, in group order (group g >= 1 is `groups[g - 1]`); empty otherwise
    groups: list[str] = field(default_factory=list)
    #: intermediate outputs a reader needs to see why these queries came out (hypothetical answer, class)
    steps: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"queries": [q.to_json() for q in self.queries]}
        if self.groups:
            out["groups"] = list(self.groups)
        if self.steps:
            out["steps"] = dict(self.steps)
        return out


def fallbacks_in(steps: Any) -> int:
    """Outputs that fell back to the question as asked (`QueryWriter.fell_back`), at any depth of a record's query
    steps (PreQRAG nests its decomposition and rewrites)."""
    if isinstance(steps, Mapping):
        return sum(len(v) if k == "fallbacks" and isinstance(v, list) else fallbacks_in(v) for k, v in steps.items())
    if isinstance(steps, list):
        return sum(fallbacks_in(v) for v in steps)
    return 0


def query_metrics(records: Sequence[Any]) -> dict[str, int | float]:
    """How often the query stage fell back to the question (HyDE without a hypothetical answer, a decomposition or
    rewrite that could not be read), counted from the answers' records so a resumed or cached run counts them too;
    nothing without a query stage."""
    staged = [r for r in records if r.queries]
    if not staged:
        return {}
    per_record = [fallbacks_in(r.queries.get("steps")) for r in staged]
    return {"query/fallbacks": sum(per_record), "query/questions_fell_back": sum(n > 0 for n in per_record),
            "query/fallback_rate": round(sum(n > 0 for n in per_record) / len(staged), 4)}


class QueryWriter(ABC):
    """One query-stage component (a class plus `conf/query/<name>.yaml`)."""

    name: str = "query"
    #: False for writers that need no engine (rule-based ones)
    uses_llm: bool = True

    def __init__(self, temperature: float = 0.0, max_tokens: int = 256, prompt_dir: str | None = None,
                 include_question: bool = True):
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.prompt_dir = prompt_dir
        #: also search with the question as asked (HyDE's and GRAG's "both queries")
        self.include_question = include_question

    @property
    def key(self) -> str:
        """Names everything that changes the queries except the engine (the pipeline adds the engine's
        identity): the writer's name and a hash of its settings and prompt texts."""
        return f"{self.name}-{stable_hash(self.settings(), 10)}"

    def settings(self) -> dict[str, Any]:
        """The settings and prompt texts the key hashes; subclasses add their own."""
        return {"name": self.name, "temperature": self.temperature, "max_tokens": self.max_tokens,
                "include_question": self.include_question,
                "prompts": {n: [p.system, p.user] for n in self.prompt_names() for p in [self.prompt(n)]}}

    def prompt_names(self) -> tuple[str, ...]:
        """The prompt files this writer reads (their texts join the key)."""
        return ()

    def prompt(self, name: str) -> PromptTemplate:
        return load_prompt(name, self.prompt_dir)

    def request(self, template: PromptTemplate, **variables: Any) -> LLMRequest:
        params = SamplingParams(temperature=self.temperature, max_tokens=self.max_tokens)
        return LLMRequest(messages=template.messages(**variables), params=params, stop_plain=template.stop_plain)

    @abstractmethod
    def write(self, questions: list[Question], engine: LLMEngine | None) -> list[QuerySet]:
        """One `QuerySet` per question, in order; batch every LLM step across questions."""

    def write_checked(self, questions: list[Question], engine: LLMEngine | None) -> list[QuerySet]:
        """`write`, refusing a writer that returned another number of query sets than questions."""
        sets = self.write(questions, engine)
        if len(sets) != len(questions):
            raise RuntimeError(f"query={self.name} returned {len(sets)} query sets for {len(questions)} questions")
        return sets

    def output_key(self, engine: LLMEngine | None) -> str:
        """Names the queries written: the writer's settings and prompts (`key`), and the engine that wrote them
        ("rules" for a writer without one)."""
        return f"{self.key}-{stable_hash(engine.identity(), 10) if self.uses_llm and engine is not None else 'rules'}"
