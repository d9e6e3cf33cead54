"""InstructRAG, in-context variant (InstructRAG-ICL; Wei et al., ICLR 2025). RAGtifier's submitted strategy.

Phase 1 (once per engine identity + prompt + demonstration set, cached under `<cache_dir>/instructrag/`): for each
demonstration question of a dev split, the model explains how the question's gold documents lead to its
known gold answer (a self-synthesised rationale). Phase 2: the demonstrations (documents, question, rationale,
"Final answer:" line) precede the new question's passages; the model writes a rationale and a final answer.

Demonstrations come from a declared split (`demo_questions`, cut to `demo_offset` / `demo_limit` in file order)
that shares no question with the evaluated set: a split holding an evaluated question (same id or same text) is
refused in one line, because its gold answer would sit in the other questions' prompts (InstructRAG's
demonstrations come from a training split); a demonstration whose gold document is also an evaluated question's
is left out. The pool holds `num_demos + 1` questions of the split in a seeded
order, so one pool (one rationale batch, one cache file) serves every question of a run. Answer: the text after the last "Final answer:"; without it
the whole cleaned output (the rationale, which is InstructRAG's original answer format), `fallback="whole_output"`.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from typing import Any

from rag.core.errors import ConfigError
from rag.core.hashing import stable_hash
from rag.core.text import cut_words, first_words
from rag.data.questions import DeclaredSplit, QuestionLoader, shared_questions
from rag.generate.base import GenerationContext, GenerationInput, passage_views
from rag.generate.multistep import MultiStepGenerator, output_record
from rag.generate.parsing import before_marker, clean_output, extract_answer
from rag.llm.base import LLMRequest
from rag.llm.cache import OutputCache
from rag.records import GenerationResult, Question

log = logging.getLogger(__name__)


def _one_line(text: str) -> str:
    return " ".join((text or "").split())


class InstructRAGGenerator(MultiStepGenerator):
    name = "instructrag"
    default_prompts = {"rationale": "instructrag_rationale", "answer": "instructrag_answer"}

    def __init__(self, demo_questions: QuestionLoader | Mapping[str, Any] | None = None, num_demos: int = 2,
                 demo_passage_words: int = 150, demo_passages: bool = True, demo_seed: int = 0,
                 rationale_max_tokens: int = 256, demo_offset: int = 0, demo_limit: int | None = None,
                 **kwargs: Any):
        super().__init__(**kwargs)
        if num_demos < 0:
            raise ValueError("generator.num_demos must be >= 0")
        if num_demos > 0 and demo_questions is None:
            raise ValueError("generator.num_demos > 0 needs generator.demo_questions (a question loader)")
        self.demo_questions = demo_questions
        self.num_demos, self.demo_passage_words, self.demo_passages = num_demos, demo_passage_words, demo_passages
        self.demo_seed, self.rationale_max_tokens = demo_seed, rationale_max_tokens
        if demo_offset < 0 or (demo_limit is not None and demo_limit < 1):
            raise ValueError("generator.demo_offset must be >= 0 and generator.demo_limit >= 1 (or null)")
        self.demo_offset, self.demo_limit = demo_offset, demo_limit

    # -- demonstrations ---------------------------------------------------------------------------------------
    def _loader(self, ctx: GenerationContext) -> QuestionLoader:
        loader = self.demo_questions
        if isinstance(loader, Mapping):  # a config that was not instantiated recursively
            from hydra.utils import instantiate

            loader = instantiate(loader)
        if getattr(loader, "data_dir", None) is None and ctx.data_dir:
            loader.data_dir = ctx.data_dir
        return loader

    def demo_split(self, ctx: GenerationContext) -> list[Question]:
        """The declared demonstration split: `demo_questions` from `demo_offset`, at most `demo_limit`."""
        questions = self._loader(ctx).load()
        end = None if self.demo_limit is None else self.demo_offset + self.demo_limit
        return questions[self.demo_offset:end]

    @classmethod
    def declared_splits(cls, node: Mapping[str, Any], path: str) -> list[DeclaredSplit]:
        """The demonstration split as the preflight sees it: refused before any index is built or cell launched
        when it overlaps the evaluated set (rag.preflight.cluster)."""
        if int(node.get("num_demos", 2) or 0) == 0 or not isinstance(node.get("demo_questions"), Mapping):
            return []
        from hydra.utils import instantiate

        loader = instantiate(dict(node["demo_questions"]))
        offset, limit = int(node.get("demo_offset") or 0), node.get("demo_limit")
        split = loader.load()[offset: None if limit is None else offset + int(limit)]
        return [DeclaredSplit(
            f"{path}.demo_questions", "InstructRAG's demonstrations",
            f"questions {offset + 1}..{offset + len(split)} of {loader.path}", split,
            f"their gold answers would sit in the other questions' prompts; evaluate questions the split does not "
            f"hold (dataset.limit / dataset.offset: e.g. dataset.limit={offset} with demo_offset={offset}) or "
            f"move the split ({path}.demo_offset / demo_limit, or another file)")]

    def check_split(self, split: list[Question], evaluated: tuple[Question, ...] | list[Question]) -> None:
        """One line if the split shares a question (id or text) with the evaluated set."""
        shared = shared_questions(split, evaluated)
        if shared:
            raise ConfigError(
                f"generator.demo_questions: the demonstration split (questions {self.demo_offset + 1}.."
                f"{self.demo_offset + len(split)} of its file) shares {len(shared)} question(s) with the evaluated "
                f"set (ids {', '.join(shared[:5])}{', ...' if len(shared) > 5 else ''}): their gold answers would "
                f"sit in the other questions' prompts; take demonstrations from questions the run does not "
                f"evaluate (generator.demo_offset / demo_limit, e.g. dataset.limit=275 with the default "
                f"demo_offset=275, or another file)")

    def demo_pool(self, ctx: GenerationContext, evaluated: tuple[Question, ...] | list[Question] = ()) -> list[Question]:
        """`num_demos + 1` questions of the split with an answer and gold documents, in a seeded order; the split
        is refused if it shares a question with `evaluated` (default: `ctx.evaluated`)."""
        if self.num_demos == 0:
            return []
        split = self.demo_split(ctx)
        evaluated = evaluated or ctx.evaluated
        self.check_split(split, evaluated)
        # a demonstration shows its gold documents: one that is also an evaluated question's gold document would
        # put that question's evidence into every prompt, so such demonstrations are left out
        evaluated_docs = {d for q in evaluated for d in q.gold_doc_ids}
        candidates = [q for q in split if q.answer and q.gold_docs]
        sharing = [q.id for q in candidates if evaluated_docs & set(q.gold_doc_ids)]
        if sharing:
            log.info("instructrag: %d demonstration question(s) left out: a gold document of theirs is one of an "
                     "evaluated question (%s)", len(sharing), ", ".join(sharing[:5]))
            candidates = [q for q in candidates if q.id not in sharing]
        random.Random(self.demo_seed).shuffle(candidates)
        pool = candidates[: self.num_demos + 1]
        if len(pool) < self.num_demos + 1:
            log.warning("instructrag: only %d demonstration questions available (wanted %d)", len(pool),
                        self.num_demos + 1)
        return pool

    def rationale_requests(self, ctx: GenerationContext, evaluated: tuple[Question, ...] | list[Question] = ()
                           ) -> tuple[list[dict[str, Any]], list[LLMRequest]]:
        """The demonstrations (without rationales yet) and the requests that ask for their rationales."""
        pool = self.demo_pool(ctx, evaluated)
        template = self.template("rationale")
        demos = [{"id": q.id, "question": q.question, "answer": _one_line(q.answer or ""),
                  "passages": [{"label": i + 1, "text": first_words(doc, self.demo_passage_words or None), "title": ""}
                               for i, doc in enumerate(q.gold_docs)]} for q in pool]
        return demos, [self.step_request(template, self.rationale_max_tokens, question=d["question"],
                                         answer=d["answer"], passages=d["passages"]) for d in demos]

    def demonstrations(self, ctx: GenerationContext, evaluated: tuple[Question, ...] | list[Question] = ()
                       ) -> tuple[list[dict[str, Any]], bool]:
        """Demonstrations with rationales, from the disk cache or made now in one batch; True if made now."""
        demos, requests = self.rationale_requests(ctx, evaluated)
        if not demos:
            return [], False
        cache, key = self.rationale_cache(ctx, requests)
        cached = cache.get(ctx.engine, key)
        if cached is not None and [d["id"] for d in cached.get("demos") or []] == [d["id"] for d in demos]:
            return cached["demos"], False
        outputs = self.run_step(ctx, requests, "instructrag rationales")
        for demo, completion in zip(demos, outputs):
            rationale = clean_output(before_marker(completion.text, "Final answer:", last=False))
            demo["rationale_raw"] = completion.text
            demo["rationale_fallback"] = None if rationale else "gold_answer"
            # an empty rationale (weak model) falls back to the gold answer so the example stays well formed
            demo["rationale"] = rationale or demo["answer"]
        cache.put(ctx.engine, key, {"model": ctx.engine.model, "prompt": self.prompt_names["rationale"],
                                    "demo_ids": [d["id"] for d in demos], "demos": demos})
        return demos, True

    @staticmethod
    def rationale_cache(ctx: GenerationContext, requests: list[LLMRequest]) -> tuple[OutputCache, dict[str, Any]]:
        """Where the demonstrations' rationales are kept (`<cache_dir>/instructrag/`) and their key: the rendered
        rationale prompts and their sampling settings, joined by the engine's identity (model by content, engine
        settings, as the response cache), so llama.cpp and vLLM engines of one model never share rationales."""
        key = {"prompts": stable_hash([ctx.engine.render(r) for r in requests]),
               "params": [r.params.to_dict() for r in requests]}
        return OutputCache(ctx.cache_dir, "instructrag"), key

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
        demos, made_now = self.demonstrations(ctx, ctx.evaluated or [item.question for item in items])
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
