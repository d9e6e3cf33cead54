"""LLM attribution: the engine judges whether each candidate passage supports each answer sentence.

The judgment is the TREC 2024 RAG track's support evaluation (three grades per (sentence, cited passage): full,
partial or no support) with the labels of this project's nugget assignment (support / partial_support /
not_support, eval/nuggets.py), so one scale reads across nuggets and citations. Every (sentence, passage) pair
among a sentence's `max_candidates` best-ranked prompt passages is one request; all of a batch's requests go to the
engine's `generate` at once (its response cache answers a rerun), with batched re-asks of unreadable replies
(`rag.llm.asking.ask_with_retries`). Strength: support 1, partial_support 0.5, not_support (or unreadable) 0; a
sentence cites the supporting passages, and the partially supporting ones when `cite_partial`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag.attribute.base import MAX_CITATIONS, Attribution, AttributionItem, Support
from rag.llm.asking import ask_with_retries
from rag.llm.base import LLMRequest, SamplingParams
from rag.prompts import PromptTemplate, load_prompt

if TYPE_CHECKING:
    from rag.llm.base import LLMEngine

#: the attribution prompts shipped with this stage
PROMPT_DIR = Path(__file__).parent / "prompts"
LABELS = ("support", "partial_support", "not_support")
STRENGTH = {"support": 1.0, "partial_support": 0.5, "not_support": 0.0}
#: the first label word of a reply, in the nugget assignment's spellings and their usual variants (longest first,
#: so `not_support` is never read as `support`)
_LABEL = re.compile(r"\b(not[_ ]support(?:ed)?|no[_ ]support|unsupported|partial(?:ly)?(?:[_ ]support(?:ed)?)?|"
                    r"full(?:y)?[_ ]support(?:ed)?|support(?:ed|s)?|none|yes|no)\b", re.IGNORECASE)
_ALIASES = {"yes": "support", "supported": "support", "supports": "support", "no": "not_support",
            "none": "not_support", "unsupported": "not_support"}


def parse_support(text: str) -> str | None:
    """support / partial_support / not_support from the first label word of a reply, or None."""
    match = _LABEL.search(text or "")
    if match is None:
        return None
    word = match.group(1).lower().replace(" ", "_")
    if word.startswith(("not_", "no_")):
        return "not_support"
    if word.startswith("partial"):
        return "partial_support"
    if word.startswith("full"):
        return "support"
    return _ALIASES.get(word, word if word in LABELS else None)


class LLMSupportAttribution(Attribution):
    """Support / partial_support / not_support per (sentence, passage) from the run's engine."""

    name = "llm_support"
    uses_llm = True

    def __init__(self, llm: Any = None, prompt: str = "attribution_support", prompt_dir: str | None = None,
                 max_candidates: int = 5, cite_partial: bool = True, max_citations: int = MAX_CITATIONS,
                 temperature: float = 0.0, max_tokens: int = 16, max_retries: int = 1, seed: int = 0):
        super().__init__(max_citations)
        del llm  # the pipeline turns the `llm` node into an engine (the generator's when equal)
        self.prompt_name = prompt
        self.prompt_dir = prompt_dir or str(PROMPT_DIR)
        self.max_candidates = max_candidates
        self.threshold = STRENGTH["partial_support"] if cite_partial else STRENGTH["support"]
        self.params = SamplingParams(temperature=temperature, max_tokens=max_tokens, seed=seed)
        self.max_retries = max_retries

    @property
    def template(self) -> PromptTemplate:
        return load_prompt(self.prompt_name, self.prompt_dir)

    def settings(self) -> dict[str, Any]:
        return {"prompt": self.prompt_name}

    def requests(self, items: list[AttributionItem]) -> tuple[list[LLMRequest], list[tuple[int, int, int]]]:
        """One request per (item, sentence, candidate) among the first `max_candidates` candidates, and where
        each belongs."""
        template, requests, where = self.template, [], []
        for i, item in enumerate(items):
            for s, sentence in enumerate(item.sentences):
                for c, candidate in enumerate(item.candidates[: self.max_candidates]):
                    requests.append(LLMRequest(template.messages(sentence=sentence, passage=candidate.text),
                                               self.params, stop_plain=template.stop_plain))
                    where.append((i, s, c))
        return requests, where

    def support(self, items: list[AttributionItem], engine: LLMEngine | None) -> list[Support]:
        if engine is None:
            raise ValueError("attribution=llm_support needs an engine (the run's llm, or attribution.llm)")
        requests, where = self.requests(items)
        asked = ask_with_retries(engine, requests, lambda _, text: parse_support(text), self.max_retries,
                                 desc="attribution")
        strength = [[[0.0] * len(item.candidates) for _ in item.sentences] for item in items]
        labels: list[list[list[str | None]]] = [[[None] * min(len(item.candidates), self.max_candidates)
                                                 for _ in item.sentences] for item in items]
        for (i, s, c), result in zip(where, asked):
            labels[i][s][c] = result.value
            strength[i][s][c] = STRENGTH.get(result.value or "", 0.0)
        return [Support(strength[i], {"labels": labels[i],
                                      "unreadable": sum(label is None for row in labels[i] for label in row)})
                for i in range(len(items))]
