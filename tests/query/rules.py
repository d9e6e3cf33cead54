"""A rule-based query writer for pipeline tests: no LLM, queries that say where they came from."""

from __future__ import annotations

from rag.llm.base import LLMEngine
from rag.query.base import Query, QuerySet, QueryWriter
from rag.records import Question


class HalvesWriter(QueryWriter):
    """Decomposes a question into its two halves (groups 1 and 2): the question goes to every source, each half to
    the sparse source as it is and to the dense source prefixed with "dense:"."""

    name = "halves"
    uses_llm = False
    per_group_k = 1

    def write(self, questions: list[Question], engine: LLMEngine | None) -> list[QuerySet]:
        out = []
        for q in questions:
            words = q.question.split()
            halves = [" ".join(words[: len(words) // 2]), " ".join(words[len(words) // 2:])]
            queries = [Query(q.question)]
            for g, half in enumerate(halves, start=1):
                queries += [Query(half, "sparse", g), Query(f"dense: {half}", "dense", g)]
            out.append(QuerySet(queries, groups=halves, steps={"class": "multi"}))
        return out


class FirstFallsBackWriter(QueryWriter):
    """The question as its query; the first question's output "could not be read" twice (a nested step, as
    PreQRAG nests its parts), so it falls back as an LLM writer would."""

    name = "first_falls_back"
    uses_llm = False

    def write(self, questions: list[Question], engine: LLMEngine | None) -> list[QuerySet]:
        out = []
        for i, q in enumerate(questions):
            steps: dict = {"rewrite": {}}
            if i == 0:
                steps["fallbacks"] = ["hypothetical_answer"]
                steps["rewrite"]["fallbacks"] = ["sparse"]
            out.append(QuerySet([Query(q.question)], steps=steps))
        return out
