"""GRAG (RMIT-ADM+S, SIGIR 2025 LiveRAG, arXiv 2506.14516): answer from the documents, then condense.

Follows `GRAG.process_question` in rmit-ir/GRAG-LiveRAG `src/systems/grag/grag.py` from the point where its
context is ready (query variants, HyDE, fusion retrieval, the logits reranker and the context word cap are the
pipeline's stages here, not the generator's):

1. answer: the `naive` answer prompt of `answer_gen_prompts.json`, the level of the submitted run (README:
   `--rag_prompt_level naive`): a helpful-assistant system message, then "Documents:", each passage as
   "Document [i] <text>" separated by blank lines, the question and "Answer:" (`grag_answer.yaml`);
2. condense: answers longer than `condense_words` words (GRAG: 300) are rewritten more concisely by the LLM
   (`rag.generate.condense.Condenser`, GRAG's `condense_answer`), in one batch over those answers only.

Each step is one `engine.generate` call over all questions (the condense call only when some answer is over
the limit). GRAG's client sampled at temperature 0 with up to 1024 new tokens (`AI71Client`); `grag.yaml`
keeps 1024 tokens so that an over-long answer can happen at all. The answer is the cleaned output (an echoed
"Answer:" label removed), condensed, then cut to `max_answer_words` like every strategy's.
"""

from __future__ import annotations

from typing import Any

from rag.core.text import cut_words
from rag.generate.base import GenerationContext, GenerationInput, passage_views
from rag.generate.condense import Condenser
from rag.generate.multistep import MultiStepGenerator, output_record
from rag.generate.parsing import clean_output
from rag.records import GenerationResult


class GRAGGenerator(MultiStepGenerator):
    name = "grag"
    default_prompts = {"answer": "grag_answer", "condense": "grag_condense"}

    def __init__(self, condense_words: int | None = None, condense_max_tokens: int = 512,
                 drop_stop_words: bool = True, **kwargs: Any):
        """`condense_words`: the word limit above which an answer is condensed (null: `max_answer_words`,
        so the condensed answer is never cut by the final limit; 0 turns condensing off)."""
        super().__init__(**kwargs)
        words = self.max_answer_words if condense_words is None else condense_words
        self.condenser = Condenser(words=words, prompt=self.prompt_names["condense"],
                                   max_tokens=condense_max_tokens, temperature=self.temperature,
                                   drop_stop_words=drop_stop_words, prompt_dir=self.prompt_dir)

    def generate(self, items: list[GenerationInput], ctx: GenerationContext) -> list[GenerationResult]:
        if not items:
            return []
        template = self.template("answer")
        requests = [self.step_request(template, question=item.question.question,
                                      passages=passage_views(item.passages)) for item in items]
        outputs = self.run_step(ctx, requests, "grag answer")
        answers = [clean_output(c.text) for c in outputs]
        condensed = self.condenser(ctx.engine, answers, desc="grag condense")
        results = []
        for request, output, done in zip(requests, outputs, condensed):
            steps = {"answer": output_record(output), "condense": done.record,
                     "condense_words": self.condenser.words, "llm_calls": 1 + int(done.record["sent"])}
            results.append(GenerationResult(
                answer=cut_words(done.answer, self.max_answer_words), final_prompt=ctx.engine.render(request),
                steps=steps, parse_failed=done.fallback is not None, fallback=done.fallback))
        return results
