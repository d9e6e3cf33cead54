"""InstructRAG, in-context variant (InstructRAG-ICL; Wei et al., ICLR 2025). RAGtifier's submitted strategy.

Phase 1 (once per model + prompt + demonstration set, cached under `<cache_dir>/instructrag/`): for each
demonstration question of a dev split, the model explains how the question's gold documents lead to its
known gold answer (a self-synthesised rationale). Phase 2: the demonstrations (documents, question, rationale,
"Final answer:" line) precede the new question's passages; the model writes a rationale and a final answer.

Demonstrations never include the question being answered: the pool holds `num_demos + 1` questions and each
question uses the first `num_demos` whose id and text differ from its own, so one pool (one rationale batch,
one cache file) serves every question of a run. Answer: the text after the last "Final answer:"; without it
the whole cleaned output (the rationale, which is InstructRAG's original answer format), `fallback="whole_output"`.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rag.core.hashing import slug, stable_hash
from rag.core.io import atomic_write_text
from rag.data.questions import QuestionLoader
from rag.generate.base import GenerationContext, GenerationInput, GenerationResult, cut_words, passage_views
from rag.generate.multistep import MultiStepGenerator, output_record
from rag.generate.parsing import before_marker, clean_output, extract_answer
from rag.records import Question

log = logging.getLogger(__name__)


def _one_line(text: str) -> str:
    return " ".join((text or "").split())


def _truncate(text: str, words: int | None) -> str:
    tokens = text.split()
    return " ".join(tokens if not words or len(tokens) <= words else tokens[:words])


class InstructRAGGenerator(MultiStepGenerator):
    name = "instructrag"
    default_prompts = {"rationale": "instructrag_rationale", "answer": "instructrag_answer"}

    def __init__(self, demo_questions: QuestionLoader | Mapping[str, Any] | None = None, num_demos: int = 2,
                 demo_passage_words: int = 150, demo_passages: bool = True, demo_seed: int = 0,
                 rationale_max_tokens: int = 256, **kwargs: Any):
        super().__init__(**kwargs)
        if num_demos < 0:
            raise ValueError("generator.num_demos must be >= 0")
        if num_demos > 0 and demo_questions is None:
            raise ValueError("generator.num_demos > 0 needs generator.demo_questions (a question loader)")
        self.demo_questions = demo_questions
        self.num_demos, self.demo_passage_words, self.demo_passages = num_demos, demo_passage_words, demo_passages
        self.demo_seed, self.rationale_max_tokens = demo_seed, rationale_max_tokens

    # -- demonstrations ---------------------------------------------------------------------------------------
    def _loader(self, ctx: GenerationContext) -> QuestionLoader:
        loader = self.demo_questions
        if isinstance(loader, Mapping):  # a config that was not instantiated recursively
            from hydra.utils import instantiate

            loader = instantiate(loader)
        if getattr(loader, "data_dir", None) is None and ctx.data_dir:
            loader.data_dir = ctx.data_dir
        return loader

    def demo_pool(self, ctx: GenerationContext) -> list[Question]:
        """`num_demos + 1` dev questions with an answer and gold documents, in a seeded order."""
        if self.num_demos == 0:
            return []
        candidates = [q for q in self._loader(ctx).load() if q.answer and q.gold_docs]
        random.Random(self.demo_seed).shuffle(candidates)
        pool = candidates[: self.num_demos + 1]
        if len(pool) < self.num_demos + 1:
            log.warning("instructrag: only %d demonstration questions available (wanted %d)", len(pool),
                        self.num_demos + 1)
        return pool

    def demonstrations(self, ctx: GenerationContext) -> tuple[list[dict[str, Any]], bool]:
        """Demonstrations with rationales, from the disk cache or made now in one batch; True if made now."""
        pool = self.demo_pool(ctx)
        if not pool:
            return [], False
        template = self.template("rationale")
        demos = [{"id": q.id, "question": q.question, "answer": _one_line(q.answer or ""),
                  "passages": [{"label": i + 1, "text": _truncate(doc, self.demo_passage_words), "title": ""}
                               for i, doc in enumerate(q.gold_docs)]} for q in pool]
        requests = [self.step_request(template, self.rationale_max_tokens, question=d["question"],
                                      answer=d["answer"], passages=d["passages"]) for d in demos]
        key = stable_hash({"model": ctx.engine.model, "prompts": [ctx.engine.render(r) for r in requests],
                           "params": [r.params.to_dict() for r in requests]})
        path = (Path(ctx.cache_dir) / "instructrag" / slug(ctx.engine.model) / f"demos_{key[:20]}.json"
                if ctx.cache_dir else None)
        if path is not None and path.is_file():
            cached = json.loads(path.read_text(encoding="utf-8"))
            if [d["id"] for d in cached["demos"]] == [d["id"] for d in demos]:
                return cached["demos"], False
        outputs = self.run_step(ctx, requests, "instructrag rationales")
        for demo, completion in zip(demos, outputs):
            rationale = clean_output(before_marker(completion.text, "Final answer:", last=False))
            demo["rationale_raw"] = completion.text
            demo["rationale_fallback"] = None if rationale else "gold_answer"
            # an empty rationale (weak model) falls back to the gold answer so the example stays well formed
            demo["rationale"] = rationale or demo["answer"]
        if path is not None:
            atomic_write_text(path, json.dumps({"model": ctx.engine.model, "prompt": self.prompt_names["rationale"],
                                                "demo_ids": [d["id"] for d in demos], "demos": demos},
                                               ensure_ascii=False, indent=1))
        return demos, True

    def demos_for(self, question: Question, demos: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The first `num_demos` demonstrations that are not the question itself (same id or same text)."""
        text = _one_line(question.question).lower()
        chosen = [d for d in demos if d["id"] != question.id and _one_line(d["question"]).lower() != text]
        chosen = chosen[: self.num_demos]
        if not self.demo_passages:
            chosen = [{**d, "passages": []} for d in chosen]
        return chosen

    # -- answering --------------------------------------------------------------------------------------------
    def generate(self, items: list[GenerationInput], ctx: GenerationContext) -> list[GenerationResult]:
        if not items:
            return []
        demos, made_now = self.demonstrations(ctx)
        template = self.template("answer")
        per_item = [self.demos_for(item.question, demos) for item in items]
        requests = [self.step_request(template, question=item.question.question,
                                      passages=passage_views(item.passages), demos=d)
                    for item, d in zip(items, per_item)]
        outputs = self.run_step(ctx, requests, "instructrag answer")
        results = []
        for item_demos, request, completion in zip(per_item, requests, outputs):
            parsed = extract_answer(completion.text, marker="Final answer:")
            rationale = clean_output(before_marker(completion.text, "Final answer:"))
            steps = {"demo_ids": [d["id"] for d in item_demos], "rationale": rationale,
                     "answer": output_record(completion), "demo_rationales_made_now": made_now,
                     "llm_calls": 1}
            results.append(GenerationResult(
                answer=cut_words(parsed.answer, self.max_answer_words), final_prompt=ctx.engine.render(request),
                steps=steps, parse_failed=parsed.parse_failed, fallback=parsed.fallback))
        return results
