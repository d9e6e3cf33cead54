"""AstuteRAG (Wang et al., 2024): internal knowledge, source-aware consolidation, confident answer selection.

1. elicit internal knowledge as up to `max_internal_passages` memorized passages; a passage saying
   "I don't know" is dropped (the paper's adaptive elicitation: no passage when the model is unsure);
2. `consolidation_rounds` rounds of consolidation: memorized and external passages, labelled by source, are
   grouped into consistent / conflicting documents; each round sees the previous round's output;
3. the final prompt proposes an answer with a confidence per group and picks one inside <ANSWER></ANSWER>.
   With `consolidation_rounds: 0` step 3 also does the consolidation (TrustRAG's one-call re-implementation).

Each step is one batch over all questions. The answer is the last <ANSWER> tag's content (an open tag cut by
the base model's stop at </ANSWER> counts); without a tag: the whole cleaned output, `fallback="whole_output"`;
an empty output: the last consolidated context (`"consolidated_context"`), else the first memorized passage
(`"memorized_passage"`), else `"empty_output"`.
"""

from __future__ import annotations

import re
from typing import Any

from rag.core.text import cut_words
from rag.generate.base import GenerationContext, GenerationInput, passage_views
from rag.generate.multistep import MultiStepGenerator, output_record
from rag.generate.parsing import ParsedAnswer, clean_output, extract_answer, says_unknown
from rag.records import GenerationResult

_CONFIDENCE = re.compile(r"confidence(?:\s+score)?\s*(?:[:=\-]|is|of)?\s*(\d+(?:\.\d+)?\s*%?|high|medium|low)",
                         re.IGNORECASE)


def memorized_passages(text: str, limit: int) -> list[str]:
    """Split the elicitation output into at most `limit` passages (blank-line separated), dropping unsure ones."""
    parts = [clean_output(re.sub(r"^\s*document\s*\d*\s*:\s*", "", p, flags=re.IGNORECASE))
             for p in re.split(r"\n\s*\n", text or "")]
    return [p for p in parts if p and not says_unknown(p)][: max(0, limit)]


class AstuteRAGGenerator(MultiStepGenerator):
    name = "astuterag"
    default_prompts = {"internal": "astuterag_internal", "consolidate": "astuterag_consolidate",
                       "answer": "astuterag_answer"}

    def __init__(self, max_internal_passages: int = 1, consolidation_rounds: int = 1,
                 internal_max_tokens: int = 160, consolidate_max_tokens: int = 384, **kwargs: Any):
        super().__init__(**kwargs)
        if max_internal_passages < 0 or consolidation_rounds < 0:
            raise ValueError("generator.max_internal_passages and consolidation_rounds must be >= 0")
        self.max_internal_passages = max_internal_passages
        self.consolidation_rounds = consolidation_rounds
        self.internal_max_tokens, self.consolidate_max_tokens = internal_max_tokens, consolidate_max_tokens

    def generate(self, items: list[GenerationInput], ctx: GenerationContext) -> list[GenerationResult]:
        if not items:
            return []
        questions = [item.question.question for item in items]
        views = [passage_views(item.passages) for item in items]
        calls = 0

        memorized: list[list[str]] = [[] for _ in items]
        internal_out = []
        if self.max_internal_passages > 0:
            internal_t = self.template("internal")
            reqs = [self.step_request(internal_t, self.internal_max_tokens, question=q,
                                      max_passages=self.max_internal_passages) for q in questions]
            internal_out = self.run_step(ctx, reqs, "astuterag internal")
            memorized = [memorized_passages(c.text, self.max_internal_passages) for c in internal_out]
            calls += 1

        rounds: list[list[str]] = [[] for _ in items]
        round_records: list[list[dict[str, Any]]] = [[] for _ in items]
        consolidate_t = self.template("consolidate")
        for r in range(self.consolidation_rounds):
            reqs = [self.step_request(consolidate_t, self.consolidate_max_tokens, question=q, passages=v,
                                      memorized=m, last=rs[-1] if rs else "")
                    for q, v, m, rs in zip(questions, views, memorized, rounds)]
            outs = self.run_step(ctx, reqs, f"astuterag consolidate {r + 1}")
            for i, c in enumerate(outs):
                # an empty round keeps the previous context so the next prompt still has one
                rounds[i].append(clean_output(c.text) or (rounds[i][-1] if rounds[i] else ""))
                round_records[i].append(output_record(c))
            calls += 1

        answer_t = self.template("answer")
        answer_reqs = [self.step_request(answer_t, question=q, passages=v, memorized=m,
                                         consolidated=rs[-1] if rs else "")
                       for q, v, m, rs in zip(questions, views, memorized, rounds)]
        answer_out = self.run_step(ctx, answer_reqs, "astuterag answer")
        calls += 1

        results = []
        for i in range(len(items)):
            parsed = self.parse(answer_out[i].text, rounds[i], memorized[i])
            steps = {
                "memorized_passages": memorized[i],
                "internal": output_record(internal_out[i]) if internal_out else None,
                "consolidations": rounds[i], "consolidate": round_records[i],
                "confidences": [m.strip() for m in _CONFIDENCE.findall(answer_out[i].text)],
                "answer": output_record(answer_out[i]),
                "llm_calls": calls,
            }
            results.append(GenerationResult(
                answer=cut_words(parsed.answer, self.max_answer_words), final_prompt=ctx.engine.render(answer_reqs[i]),
                steps=steps, parse_failed=parsed.parse_failed, fallback=parsed.fallback))
        return results

    @staticmethod
    def parse(final_output: str, consolidations: list[str], memorized: list[str]) -> ParsedAnswer:
        """<ANSWER> content; no tag -> whole output; empty -> last consolidated context -> first memorized
        passage -> empty answer (each names its rule in `fallback`)."""
        parsed = extract_answer(final_output, tag="ANSWER")
        if parsed.fallback != "empty_output":
            return parsed
        if consolidations and consolidations[-1]:
            return ParsedAnswer(consolidations[-1], parse_failed=True, fallback="consolidated_context")
        if memorized:
            return ParsedAnswer(memorized[0], parse_failed=True, fallback="memorized_passage")
        return parsed
