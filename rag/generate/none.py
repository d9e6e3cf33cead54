"""No generation: a retrieval-only run (rank, write the ranked lists and retrieval metrics, load no LLM).

For studies of retrieval alone, such as gold-document recall against depth (RAGtifier's Fig. 4): with
`generator=none` the pipeline never builds the `llm` engine, the answers file keeps the ranked lists (ids and
scores under `retrieved` / `reranked`; no passage text, since no prompt used any) with an empty answer, and
metrics.json has no answer scores.
"""

from __future__ import annotations

from rag.generate.base import GenerationContext, GenerationInput, Generator
from rag.records import GenerationResult


class NoGenerator(Generator):
    name = "none"
    uses_llm = False

    def __init__(self, **kwargs):
        super().__init__(max_answer_words=None, **kwargs)

    @property
    def uses_ordering(self) -> bool:
        """The ranked lists are written in rank order (no prompt, so no prompt order)."""
        return False

    def generate(self, items: list[GenerationInput], ctx: GenerationContext) -> list[GenerationResult]:
        # no prompt, so no passages were "used": the ranked lists are in the record's retrieved/reranked fields
        return [GenerationResult(answer="", final_prompt="", steps={}, passages=[]) for _ in items]
