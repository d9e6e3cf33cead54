"""TrustRAG: a retrieval-side defence, then three-stage conflict resolution (Zhou et al., 2025).

1. filter (`filter: kmeans | kmeans_ngram | none`, see `rag.generate.defense`): drop suspicious dense clusters
   and near-duplicate passages, the signature of corpus poisoning;
2. internal knowledge: the model answers from memory in under 50 words, "I don't know" allowed;
3. consolidation: the memorized text and the kept passages are merged, manipulative or conflicting ones left out;
4. final answer with a brief explanation, from the consolidated information only.

Each LLM stage is one batch over all questions. The answer is the whole cleaned final output (the method asks
for explanation plus answer, no marker). Fallbacks when that output is empty: the consolidated information
(`fallback="consolidated_information"`), else the internal knowledge unless it is "I don't know"
(`"internal_knowledge"`), else `"empty_output"`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rag.core.text import cut_words
from rag.generate.base import GenerationContext, GenerationInput, passage_views
from rag.generate.defense import FILTERS, FilterDecision, defend_lists
from rag.generate.multistep import MultiStepGenerator, output_record
from rag.generate.parsing import ParsedAnswer, clean_output, first_paragraph, says_unknown
from rag.records import GenerationResult

if TYPE_CHECKING:
    from rag.embed import Embedder


class TrustRAGGenerator(MultiStepGenerator):
    name = "trustrag"
    default_prompts = {"internal": "trustrag_internal", "consolidate": "trustrag_consolidate",
                       "answer": "trustrag_answer"}

    def __init__(self, filter: str = "kmeans_ngram", embedder: Embedder | None = None,
                 similarity_threshold: float = 0.88, ngram_threshold: float = 0.25,
                 internal_max_tokens: int = 96, consolidate_max_tokens: int = 384, seed: int = 0, **kwargs: Any):
        super().__init__(**kwargs)
        if filter not in FILTERS:
            raise ValueError(f"generator.filter must be one of {FILTERS}, got {filter!r}")
        if filter != "none" and embedder is None:
            raise ValueError(f"generator.filter={filter} needs generator.embedder (a rag.embed.Embedder)")
        self.filter_mode = filter
        self.embedder = embedder
        self.similarity_threshold, self.ngram_threshold = similarity_threshold, ngram_threshold
        self.internal_max_tokens, self.consolidate_max_tokens = internal_max_tokens, consolidate_max_tokens
        self.seed = seed

    def defend(self, items: list[GenerationInput]) -> list[FilterDecision]:
        """Filter decisions per question (`rag.generate.defense.defend_lists`: only the passages of questions the
        filter clusters are embedded, in one encoder call)."""
        return defend_lists([[p.passage.text for p in item.passages] for item in items], self.embedder,
                            self.filter_mode, self.similarity_threshold, self.ngram_threshold, self.seed)

    def generate(self, items: list[GenerationInput], ctx: GenerationContext) -> list[GenerationResult]:
        if not items:
            return []
        decisions = self.defend(items)
        kept = [[item.passages[i] for i in d.kept] for item, d in zip(items, decisions)]
        questions = [item.question.question for item in items]

        internal_t = self.template("internal")
        internal_reqs = [self.step_request(internal_t, self.internal_max_tokens, question=q) for q in questions]
        internal_out = self.run_step(ctx, internal_reqs, "trustrag internal")
        # an empty answer from memory is treated as the method's own "I don't know" (raw output kept in steps)
        internal = [clean_output(first_paragraph(c.text)) or "I don't know" for c in internal_out]

        consolidate_t = self.template("consolidate")
        consolidate_reqs = [self.step_request(consolidate_t, self.consolidate_max_tokens, question=q,
                                              passages=passage_views(ps), internal=k)
                            for q, ps, k in zip(questions, kept, internal)]
        consolidate_out = self.run_step(ctx, consolidate_reqs, "trustrag consolidate")
        consolidated = [clean_output(c.text) for c in consolidate_out]

        answer_t = self.template("answer")
        answer_reqs = [self.step_request(answer_t, question=q, consolidated=c or "(none)")
                       for q, c in zip(questions, consolidated)]
        answer_out = self.run_step(ctx, answer_reqs, "trustrag answer")

        results = []
        for i, item in enumerate(items):
            parsed = self.parse(answer_out[i].text, consolidated[i], internal[i])
            decision = decisions[i]
            steps = {
                "filter": {**decision.to_dict(), "mode": self.filter_mode,
                           "kept_ids": [item.passages[j].passage.passage_id for j in decision.kept],
                           "removed_ids": [item.passages[j].passage.passage_id for j in decision.removed]},
                "internal_knowledge": internal[i], "internal_says_unknown": says_unknown(internal[i]),
                "internal": output_record(internal_out[i]),
                "consolidated": consolidated[i], "consolidate": output_record(consolidate_out[i]),
                "answer": output_record(answer_out[i]),
                "llm_calls": 3,
            }
            results.append(GenerationResult(
                answer=cut_words(parsed.answer, self.max_answer_words), final_prompt=ctx.engine.render(answer_reqs[i]),
                steps=steps, passages=kept[i] if self.filter_mode != "none" else None,
                parse_failed=parsed.parse_failed, fallback=parsed.fallback))
        return results

    @staticmethod
    def parse(final_output: str, consolidated: str, internal: str) -> ParsedAnswer:
        """Whole cleaned output; empty -> the consolidated information -> the internal knowledge unless it says
        "I don't know" -> empty answer (each names its rule in `fallback`)."""
        answer = clean_output(final_output)
        if answer:
            return ParsedAnswer(answer)
        if consolidated:
            return ParsedAnswer(consolidated, parse_failed=True, fallback="consolidated_information")
        if internal and not says_unknown(internal):
            return ParsedAnswer(internal, parse_failed=True, fallback="internal_knowledge")
        return ParsedAnswer("", parse_failed=True, fallback="empty_output")
