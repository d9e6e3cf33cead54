"""Simple: one call per question, passages then question (the reference strategy)."""

from __future__ import annotations

from rag.core.text import cut_words
from rag.generate.base import GenerationContext, GenerationInput, GenerationResult, Generator, passage_views


class SimpleGenerator(Generator):
    name = "simple"

    def __init__(self, prompt: str = "simple", **kwargs):
        super().__init__(**kwargs)
        self.prompt_name = prompt

    def generate(self, items: list[GenerationInput], ctx: GenerationContext) -> list[GenerationResult]:
        template = self.prompt(self.prompt_name)
        requests = [self.request(template, question=item.question.question, passages=passage_views(item.passages))
                    for item in items]
        completions = ctx.engine.generate(requests, desc="simple")
        return [GenerationResult(answer=cut_words(c.text, self.max_answer_words), final_prompt=ctx.engine.render(r),
                                 steps={"raw_output": c.text, "finish_reason": c.finish_reason})
                for r, c in zip(requests, completions)]
