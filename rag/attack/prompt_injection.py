"""Prompt injection ("pia" in TrustRAG, Zhou et al. 2025): planted passages that instruct the generator to give
the target answer. The instruction is a template (rag/prompts/prompt_injection.yaml), not written by an LLM; the
target answer is made as PoisonedRAG's is (`attack.answer_prompt`), or read from `attack.attack_file`.

TrustRAG appends the instruction to the retrieved list; here it is planted in the corpus after the question
(`CorpusAttack.passage`, PoisonedRAG's form), so the attack has to be retrieved like any other. `n_passages` copies are planted under
their own ids (PoisonedRAG's code also repeats a text when it has fewer than asked).
"""

from __future__ import annotations

from typing import Any

from rag.attack.base import INCORRECT, QUESTION, CorpusAttack
from rag.llm.base import LLMEngine


class PromptInjection(CorpusAttack):
    name = "injection"
    option = "prompt_injection"

    def __init__(self, template: str = "prompt_injection", **kwargs: Any):
        super().__init__(**kwargs)
        self.template = template

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "template": self._prompt_text(self.template)}

    def _texts(self, rows: list[dict[str, Any]], engine: LLMEngine | None) -> list[list[str]]:
        template = self.prompt(self.template)
        return [[template.messages(question=row[QUESTION], target=row[INCORRECT])[-1]["content"]]
                * self.texts_per_question for row in rows]
