"""GRAG's pointwise LLM relevance filter (`rerank=pointwise`): keep the passages an LLM says help answer.

RMIT-ADM+S's GRAG (Ran et al., LiveRAG 2025, arXiv 2506.14516; code: github.com/rmit-ir/GRAG-LiveRAG,
`src/services/logits_reranker.py`, read for this module) asks the LLM, for every (question, passage) pair, whether
the document contains information that helps answer the question, to be answered Yes or No, and scores the
passage by the probability of "Yes" at the first generated position. Followed from the reference:

- the score is the probability of "Yes" in the whole next-token distribution, not renormalised against "No": the
  reference's logits server (`scripts/aws/apps/mini_tgi/llm_server.py`) returns both a Yes/No softmax
  (`probabilities`) and the full-vocabulary softmax (`raw_probabilities`), and the reranker reads the latter.
  `normalize=true` uses P(Yes) / (P(Yes) + P(No)) instead;
- a passage whose score is below `threshold` is dropped (a strict `<`: exactly 0.5 is kept); the rest are sorted by
  score, best first (ties keep the incoming order), and `k` cuts them (`threshold: null` drops nothing);
- newlines inside a passage become spaces before it goes into the prompt;
- GRAG's system (`src/systems/grag/grag.py`) falls back to the first 10 candidates when no passage passes:
  `fallback` keeps that many of the incoming list (ordered by score, so the list stays sorted; null: keep none),
  counted in `stats["fallbacks"]`;
- GRAG cut its context by words (10,000 in the paper), not by a count of passages: `rerank.k=null` with
  `generation.max_context_words=10000` does the same here.

Inferred or ours: the prompt's wording (layout kept, our words: rag/prompts/grag_relevance.yaml); the probability
is read from the engine's `top_logprobs` most likely first tokens (the reference read the logit of the one token
id of "Yes"), summing every alternative that `rag.llm.asking.label_probabilities` assigns to Yes (" Yes", "yes"),
and a Yes outside those alternatives counts as 0; `passage_words` cuts long passages for the engine's context
(null: the whole passage, as the reference).

A passage is unreadable when neither Yes nor No is among its first token's alternatives: it scores 0.0 (the
reference's default for a missing probability), so any positive threshold drops it; `stats["unreadable"]` counts
these (they are counted in `dropped` too). All pairs of all questions go to the engine in one `generate` call, so
vLLM batches them and the response cache answers pairs seen before.
"""

from __future__ import annotations

import math
from typing import Any

from rag.core.hashing import slug
from rag.llm.asking import label_probabilities
from rag.llm.base import LLMEngine, LLMRequest, SamplingParams
from rag.records import ScoredPassage, with_ranks
from rag.rerank.base import PromptedReranker

YES, NO = "Yes", "No"
LABELS = (YES, NO)


class PointwiseReranker(PromptedReranker):
    kind = "pointwise"

    def __init__(self, llm: LLMEngine | None = None, k: int | None = 5, threshold: float | None = 0.5,
                 normalize: bool = False, fallback: int | None = 10, top_logprobs: int = 20,
                 passage_words: int | None = None, prompt: str = "grag_relevance", prompt_dir: str | None = None):
        super().__init__(k)
        if threshold is not None and not 0.0 <= threshold <= 1.0:
            raise ValueError(f"rerank.threshold must be a probability in [0, 1] or null, got {threshold}")
        if fallback is not None and fallback < 0:
            raise ValueError(f"rerank.fallback must be >= 0 or null, got {fallback}")
        if top_logprobs < 1:
            raise ValueError(f"rerank.top_logprobs must be >= 1, got {top_logprobs}")
        if passage_words is not None and passage_words < 1:
            raise ValueError(f"rerank.passage_words must be >= 1 or null, got {passage_words}")
        if llm is not None:
            llm.require_logprobs("rerank=pointwise")  # at start-up, not after retrieval
        self.engine = llm
        self.threshold, self.normalize, self.fallback = threshold, normalize, fallback
        self.top_logprobs, self.passage_words = top_logprobs, passage_words
        self.prompt_name, self.prompt_dir = prompt, prompt_dir
        #: pairs judged, passages dropped, unreadable answers, questions that fell back (metrics.json: rerank/<name>)
        self.stats: dict[str, Any] = {}

    @property
    def key(self) -> str:
        """The engine by identity, the prompt's text, the threshold, the reading rule and the word cap; the hash
        comes before the model's name, so the 80-character slug never cuts it."""
        digest, model = self.key_parts(self.top_logprobs)
        threshold = "none" if self.threshold is None else f"{self.threshold:g}"
        words = f"-w{self.passage_words}" if self.passage_words else ""
        norm = "-norm" if self.normalize else ""
        fallback = f"-fb{self.fallback}" if self.fallback else ""
        return slug(f"pointwise-t{threshold}{norm}{words}{fallback}-{digest}-{model}")

    def probability(self, alternatives: dict[str, float]) -> float | None:
        """P(Yes) from one position's alternatives (token -> log-probability); None when neither label is there."""
        shares = label_probabilities(alternatives, LABELS)
        if not shares:
            return None
        if self.normalize:
            return shares[YES]
        # the raw mass: each alternative counts for the label `label_probabilities` gives it alone
        mass = sum(math.exp(logprob) for token, logprob in alternatives.items()
                   if label_probabilities({token: logprob}, LABELS).get(YES, 0.0) > 0.5)
        return min(1.0, mass)

    def score(self, queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[float]]:
        """P(Yes) of every candidate (0.0 when unreadable), all pairs of all questions in one engine call."""
        engine = self._engine()
        template = self.template
        params = SamplingParams(temperature=0.0, max_tokens=1, top_logprobs=self.top_logprobs)
        pairs = [(qi, i) for qi, cands in enumerate(candidates) for i in range(len(cands))]
        requests = [LLMRequest(messages=template.messages(question=queries[qi],
                                                          document=_document(candidates[qi][i].passage.text,
                                                                             self.passage_words)),
                               params=params, stop_plain=template.stop_plain) for qi, i in pairs]
        completions = engine.generate(requests, desc="pointwise relevance") if requests else []
        scores = [[0.0] * len(cands) for cands in candidates]
        unreadable = 0
        for (qi, i), completion in zip(pairs, completions):
            p = self.probability((completion.top_logprobs or [{}])[0])
            if p is None:
                unreadable += 1
                p = 0.0
            scores[qi][i] = p
        self._count(judged=len(pairs), unreadable=unreadable)
        return scores

    def rerank(self, queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[ScoredPassage]]:
        """Passages at or above the threshold, by P(Yes); all below it: the incoming top `fallback`."""
        out = []
        dropped = fallbacks = 0
        for cands, probs in zip(candidates, self.score(queries, candidates)):
            order = sorted(range(len(cands)), key=lambda i: -probs[i])  # stable: ties keep the incoming order
            kept = [i for i in order if self.threshold is None or probs[i] >= self.threshold]
            if not kept and cands and self.fallback:
                fallbacks += 1
                head = set(range(min(self.fallback, len(cands))))
                kept = [i for i in order if i in head]
            dropped += len(cands) - len(kept)
            out.append(with_ranks([ScoredPassage(cands[i].passage, probs[i]) for i in kept]))
        self._count(dropped=dropped, fallbacks=fallbacks)
        return out

    def _count(self, **counts: int) -> None:
        for name, n in counts.items():
            self.stats[name] = self.stats.get(name, 0) + n

    def _engine(self) -> LLMEngine:
        if self.engine is None:
            raise ValueError("rerank=pointwise needs an LLM engine: rerank.llm (the generator's own by default, "
                             "llm: ${llm})")
        return self.engine

    def close(self) -> None:
        """Nothing to release: the engine belongs to the run's engine factory (often the generator's own)."""


def _document(text: str, max_words: int | None) -> str:
    """The passage on one line (as the reference), cut to `max_words` words when set."""
    flat = text.replace("\n", " ")
    if not max_words:
        return flat
    words = flat.split()
    return flat if len(words) <= max_words else " ".join(words[:max_words])
