"""Components added from the test folder: one class here and one YAML under `conf/<group>/` each.

Nothing in `rag/` or `conf/` knows about them; `tests/extensions/test_extensions.py` composes the project's
config with `hydra.searchpath` pointing at `tests/extensions/conf` and runs the real pipeline with each one.
Every class is small but real: it does its stage's work on the real corpus and questions.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Sequence
from pathlib import Path

from rag.core.text import cut_words
from rag.data.corpus import Corpus
from rag.generate.base import GenerationContext, GenerationInput, Generator
from rag.llm.base import Completion, LLMEngine, LLMRequest
from rag.llm.cache import ResponseCache
from rag.metrics.base import AnswerMetric, RunShape, ScoredAnswer
from rag.metrics.registry import MetricSpec
from rag.records import GenerationResult, ScoredPassage, with_ranks
from rag.rerank.base import Reranker
from rag.retrieve.base import Retriever

_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def word_set(text: str, min_length: int = 1) -> set[str]:
    """Lower-cased alphanumeric words of `text` with at least `min_length` characters."""
    return {w for w in _WORD.findall(text.lower()) if len(w) >= min_length}


def first_sentence(text: str) -> str:
    """The text up to its first sentence end (`.`, `!` or `?` followed by white space), or all of it."""
    return _SENTENCE_END.split(text.strip(), maxsplit=1)[0].strip()


class WordOverlapRetriever(Retriever):
    """Ranks the corpus's passages by how many distinct query words (of `min_word_length`+ letters) they hold;
    ties keep corpus order. No index on disk: the word sets are built in memory by `prepare`."""

    kind = "word_overlap"

    def __init__(self, k: int = 20, min_word_length: int = 3):
        super().__init__(k)
        self.min_word_length = min_word_length
        self._bags: list[set[str]] | None = None

    @property
    def key(self) -> str:
        return f"word_overlap-min{self.min_word_length}"

    def prepare(self, corpus: Corpus | None, cache_dir: str | Path) -> None:
        if corpus is None:
            raise ValueError("retriever=word_overlap needs a dataset with a corpus")
        super().prepare(corpus, cache_dir)
        self._bags = [word_set(p.text, self.min_word_length) for p in corpus.passages]

    def search(self, queries: list[str], k: int) -> list[list[ScoredPassage]]:
        if self._bags is None or self.corpus is None:
            raise RuntimeError("WordOverlapRetriever.prepare() must run before search()")
        passages, bags = self.corpus.passages, self._bags
        out = []
        for query in queries:
            wanted = word_set(query, self.min_word_length)
            scores = [len(wanted & bag) for bag in bags]
            top = heapq.nlargest(min(k, len(bags)), range(len(bags)), key=lambda i: (scores[i], -i))
            out.append(with_ranks([ScoredPassage(passages[i], float(scores[i])) for i in top]))
        return out


class PassageLengthReranker(Reranker):
    """Re-scores candidates by their length in words: shortest first (or longest first), ties in retrieval
    order."""

    kind = "passage_length"

    def __init__(self, k: int | None = None, shortest_first: bool = True):
        super().__init__(k)
        self.shortest_first = shortest_first

    @property
    def key(self) -> str:
        return f"passage_length-{'shortest' if self.shortest_first else 'longest'}_first"

    def score(self, queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[float]]:
        sign = -1.0 if self.shortest_first else 1.0
        return [[sign * len(p.passage.text.split()) for p in cands] for cands in candidates]


class FirstSentenceGenerator(Generator):
    """No LLM: answers with the first sentence of the best-ranked passage it is given."""

    name = "first_sentence"
    uses_llm = False

    def __init__(self, max_answer_words: int | None = 50, **kwargs):
        super().__init__(max_answer_words=max_answer_words, **kwargs)

    def generate(self, items: list[GenerationInput], ctx: GenerationContext) -> list[GenerationResult]:
        out = []
        for item in items:
            if not item.passages:
                out.append(GenerationResult(answer="", final_prompt="", passages=[], fallback="no_passages"))
                continue
            top = min(item.passages, key=lambda p: p.rank)
            answer = cut_words(first_sentence(top.passage.text), self.max_answer_words)
            out.append(GenerationResult(answer=answer, final_prompt="", passages=[top],
                                        steps={"first_sentence": {"passage_id": top.passage.passage_id}}))
        return out


class EchoEngine(LLMEngine):
    """A deterministic engine: the completion is the last `last_words` words of the rendered prompt (at most
    the request's `max_tokens`, cut at its first stop sequence); one token per whitespace-separated word."""

    def __init__(self, model: str = "echo", last_words: int = 8, chat_format: str = "plain",
                 cache: ResponseCache | None = None):
        super().__init__(model=model, chat_format=chat_format, cache=cache)
        if last_words < 1:
            raise ValueError(f"llm.last_words must be >= 1, got {last_words}")
        self.last_words = last_words

    def signature(self) -> dict[str, int]:
        return {"last_words": self.last_words}

    def _generate(self, requests: Sequence[LLMRequest], desc: str) -> list[Completion]:
        out = []
        for i, request in enumerate(requests):
            prompt = self.render(request)
            words = prompt.split()
            text = " ".join(words[-min(self.last_words, request.params.max_tokens):])
            finish = "length" if request.params.max_tokens < self.last_words else "stop"
            for stop in request.params.stop:
                if stop and stop in text:
                    text, finish = text.split(stop, 1)[0], "stop"
            completion = Completion(text=text, prompt_tokens=len(words), completion_tokens=len(text.split()),
                                    finish_reason=finish, prompt=prompt)
            self._completed(i, completion)
            out.append(completion)
        return out


class CitedPassageShare(AnswerMetric):
    """A per-answer metric: the share of the generator's passages whose document the answer's words overlap
    (a crude groundedness proxy, real on real answers), run means as `grounded/passage_share/<split>`."""

    def __init__(self, name: str = "passage_share", min_overlap: int = 2):
        super().__init__(name)
        self.min_overlap = min_overlap

    def score(self, item: ScoredAnswer) -> dict[str, float]:
        if not item.answer.strip() or not item.context:
            return {}
        words = word_set(item.answer, 3)
        hits = [len(words & word_set(p.passage.text, 3)) >= self.min_overlap for p in item.context]
        return {self.name: sum(hits) / len(hits)}

    def run_metrics(self, shape: RunShape) -> dict[str, str]:
        return {self.name: f"grounded/{self.name}"}

    def metric_specs(self) -> list[MetricSpec]:
        return [MetricSpec(f"grounded/{self.name}/{{split}}", "per_answer",
                           "share of the generator's passages the answer overlaps", (0.0, 1.0), True)]
