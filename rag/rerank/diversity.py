"""Knowledge-aware diverse selection (`rerank=diversity`), after Team Magikarp's LiveRAG 2025 winner.

Zhou, "Knowledge-Aware Diverse Reranking for Cross-Source Question Answering" (arXiv 2506.20476; no code public)
merges BM25 and E5 lists into 2,000 candidates, ranks them with a pretrained reranker (jina-reranker-m0), then has
an LLM declare knowledge elements and reorders for diversity, to counter a single-faceted reading of the question
and the generator's limited context. Only that much of the paper could be read here (the stored copies stop at its
"Knowledge Element Declaration" step), so whether the paper's elements are declared per passage or per question,
and how its reordering works, is not confirmed. Followed: an incoming relevance ranking (in this project a chain
such as `rerank=bge_diversity`, BGE first), an LLM declaring knowledge elements, and a selection that prefers
passages adding knowledge not yet covered. Inferred (this project's reading, as the issue describes it):

- the LLM reads the top `pool` passages of the incoming ranking, one request per (question, passage), with the
  question, and writes short facts one per line (NONE for none): rag/prompts/magikarp_elements.yaml, our words;
- the selection is greedy: walking the ranking, a passage joins when at least `min_new` of its elements are not
  yet covered, and its elements become covered; the other passages follow in the incoming order (pool first, then
  the candidates beyond it), so `k` takes the covering passages first and fills with the best remaining ones. The
  order does not depend on `k` (stopping the walk at `k` passages would select the same first `k`);
- elements match when the Jaccard overlap of their content words (lower-cased, punctuation and a short stop-word
  list removed) is at least `overlap`: "Paris is the capital of France" and "The capital of France is Paris" are
  one element; `overlap: 1.0` asks for the same words. Text matching instead of embeddings keeps the step free of
  another model and exactly reproducible.

The reranked list's scores count down from the list's length (higher is better, as `score` returns), so tools
that sort by score (trec_eval) keep the order. All requests of all questions go to the engine in one `generate`
call, through its response cache. `stats`: `pool` (passages read), `elements` (elements written), `selected`
(passages that added knowledge) and `empty` (passages with no element).
"""

from __future__ import annotations

import re
from typing import Any

from rag.core.hashing import slug
from rag.core.text import cut_words
from rag.llm.base import LLMEngine, LLMRequest, SamplingParams
from rag.records import ScoredPassage, with_ranks
from rag.rerank.base import PromptedReranker

#: a list marker at the start of a line: "-", "*", "•", "1.", "2)", "(3)", "[4]"
_MARKER = re.compile(r"^\s*(?:[-*•]+|\(?\d+[.)]|\[\d+\])\s*")
_WORD = re.compile(r"\w+")
_POSSESSIVE = re.compile(r"['’]s\b")
#: function words that carry no fact of their own (negations stay: "is" and "is not" are different facts)
STOP_WORDS = frozenset({
    "a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "by", "for", "with", "from", "as", "is", "are",
    "was", "were", "be", "been", "being", "it", "its", "this", "that", "these", "those", "which", "who", "whom",
    "whose", "has", "have", "had", "do", "does", "did", "there", "their", "they", "he", "she", "his", "her", "we",
    "our", "you", "your"})


def parse_elements(text: str, max_elements: int | None = None) -> list[str]:
    """Knowledge elements from the model's text: one per line, list markers, headings and NONE left out."""
    out: list[str] = []
    for line in text.splitlines():
        item = _MARKER.sub("", line).strip()
        if not item or item.endswith(":") or item.rstrip(".").strip().lower() in ("none", "n/a"):
            continue
        if item not in out:
            out.append(item)
    return out[:max_elements] if max_elements else out


def content_words(element: str) -> frozenset[str]:
    """The words an element is matched on: lower-cased, without punctuation, possessive 's or stop words."""
    return frozenset(w for w in _WORD.findall(_POSSESSIVE.sub("", element.lower())) if w not in STOP_WORDS)


def same_element(a: frozenset[str], b: frozenset[str], overlap: float) -> bool:
    """Jaccard overlap of two elements' content words at least `overlap`."""
    if not a or not b:
        return False
    return len(a & b) / len(a | b) >= overlap


def greedy_cover(elements: list[list[str]], overlap: float = 0.5, min_new: int = 1) -> list[int]:
    """Positions of the passages (in ranking order) that each add at least `min_new` elements not yet covered."""
    covered: list[frozenset[str]] = []
    chosen = []
    for position, passage_elements in enumerate(elements):
        words = [w for w in (content_words(e) for e in passage_elements) if w]
        new = [w for w in words if not any(same_element(w, c, overlap) for c in covered)]
        if len(new) >= min_new:
            chosen.append(position)
            covered.extend(words)
    return chosen


def diverse_order(n: int, chosen: list[int]) -> list[int]:
    """All `n` positions: the chosen ones first (in their order), then the rest in the incoming order."""
    taken = set(chosen)
    return chosen + [i for i in range(n) if i not in taken]


class DiversityReranker(PromptedReranker):
    kind = "diversity"

    def __init__(self, llm: LLMEngine | None = None, k: int | None = 5, pool: int = 20, overlap: float = 0.5,
                 min_new: int = 1, max_elements: int | None = 20, passage_words: int | None = 400,
                 prompt: str = "magikarp_elements", prompt_dir: str | None = None, temperature: float = 0.0,
                 max_tokens: int = 256):
        super().__init__(k)
        if pool < 1:
            raise ValueError(f"rerank.pool must be >= 1, got {pool}")
        if not 0.0 < overlap <= 1.0:
            raise ValueError(f"rerank.overlap must be in (0, 1], got {overlap}")
        if min_new < 1:
            raise ValueError(f"rerank.min_new must be >= 1, got {min_new}")
        self.engine = llm
        self.pool, self.overlap, self.min_new = pool, overlap, min_new
        self.max_elements, self.passage_words = max_elements, passage_words
        self.prompt_name, self.prompt_dir = prompt, prompt_dir
        self.temperature, self.max_tokens = temperature, max_tokens
        #: passages read, elements written, passages selected, passages without elements (metrics: rerank/<name>)
        self.stats: dict[str, Any] = {}

    @property
    def key(self) -> str:
        """Pool, matching rule, the engine by identity, the prompt's text and decoding; not `k`, which only cuts."""
        digest, model = self.key_parts(self.temperature, self.max_tokens, self.max_elements, self.passage_words)
        return slug(f"diversity-p{self.pool}-o{self.overlap:g}-n{self.min_new}-{digest}-{model}")

    def elements(self, queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[list[str]]]:
        """Each question's pool passages' knowledge elements, from one engine batch across questions."""
        if self.engine is None:
            raise ValueError("rerank=diversity needs an LLM engine: rerank.llm (the generator's own by default, "
                             "llm: ${llm})")
        template = self.template
        params = SamplingParams(temperature=self.temperature, max_tokens=self.max_tokens)
        pairs = [(qi, i) for qi, cands in enumerate(candidates) for i in range(min(self.pool, len(cands)))]
        requests = [LLMRequest(messages=template.messages(question=queries[qi],
                                                          passage=cut_words(candidates[qi][i].passage.text,
                                                                       self.passage_words)),
                               params=params, stop_plain=template.stop_plain) for qi, i in pairs]
        completions = self.engine.generate(requests, desc="knowledge elements") if requests else []
        out: list[list[list[str]]] = [[[] for _ in range(min(self.pool, len(c)))] for c in candidates]
        for (qi, i), completion in zip(pairs, completions):
            out[qi][i] = parse_elements(completion.text, self.max_elements)
        self._count(pool=len(pairs), elements=sum(len(e) for q in out for e in q),
                    empty=sum(1 for q in out for e in q if not e))
        return out

    def orders(self, queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[int]]:
        """Each question's candidate positions in the diverse order."""
        out, selected = [], 0
        for cands, elements in zip(candidates, self.elements(queries, candidates)):
            chosen = greedy_cover(elements, self.overlap, self.min_new)
            selected += len(chosen)
            out.append(diverse_order(len(cands), chosen))
        self._count(selected=selected)
        return out

    def rerank(self, queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[ScoredPassage]]:
        return [with_ranks([ScoredPassage(cands[i].passage, float(len(cands) - n)) for n, i in enumerate(order)])
                for cands, order in zip(candidates, self.orders(queries, candidates))]

    def score(self, queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[float]]:
        """Scores that count down along the diverse order (the first passage gets the list's length)."""
        out = []
        for cands, order in zip(candidates, self.orders(queries, candidates)):
            scores = [0.0] * len(cands)
            for n, i in enumerate(order):
                scores[i] = float(len(cands) - n)
            out.append(scores)
        return out

    def _count(self, **counts: int) -> None:
        for name, n in counts.items():
            self.stats[name] = self.stats.get(name, 0) + n

    def close(self) -> None:
        """Nothing to release: the engine belongs to the run's engine factory (often the generator's own)."""
