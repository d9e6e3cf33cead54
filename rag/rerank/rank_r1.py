"""Rank-R1: setwise reranking with a reasoning LLM, batched across questions.

Rank-R1 (Zhuang et al., 2025; github.com/ielab/llm-rankers) shows the model a query and up to 20 labelled
passages; the model reasons inside <think> and names the most relevant passage's label, e.g. `<answer>[3]</answer>`.
A full ranking comes from the Setwise heap sort of that repository: passages sit in a heap in which every node
has `num_child` children (19, so each comparison shows 20 passages); building the heap and then extracting the
best `sort_depth` passages takes one comparison per sift step. Passages below the sorted top keep the
retriever's order, as in the reference implementation.

Batching: each question's heap sort runs as a Python generator that yields the passages of its next comparison
and receives the winner. Every step collects the pending comparison of every unfinished question and sends them
to the engine as one `generate` batch, so vLLM sees all questions at once and the number of engine calls is the
longest question's number of comparisons, not the sum.

An answer that cannot be parsed (or names a label outside the set) is counted in `stats["parse_failures"]` and
the retriever's order decides that comparison (the best-ranked passage of the set wins). The reference code lets
the heap parent win instead, which after heap swaps scrambles the list; with our rule a model that never answers
in format leaves the retrieval order exactly as it was. RAGtifier found Rank-R1 too slow for the LiveRAG time
budget (up to 100 s per question); `stats` reports the seconds per question.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Generator
from typing import Any

from rag.core.hashing import slug
from rag.core.text import cut_words
from rag.llm.base import LLMEngine, LLMRequest, SamplingParams
from rag.prompts import PromptTemplate
from rag.records import ScoredPassage
from rag.rerank.base import PromptedReranker

log = logging.getLogger(__name__)

#: the published answer pattern (applied to the lower-cased completion), then a lenient one for a missing
#: </think> or a completion cut at the stop sequence "</answer>"
_STRICT = re.compile(r"<think>.*?</think>\s*<answer>(.*?)</answer>", re.DOTALL)
_LENIENT = re.compile(r"<answer>\s*(\[\s*\d+\s*\]|\d+)", re.DOTALL)
_LABEL = re.compile(r"^\[\s*(\d+)\s*\]$|^(\d+)$")

#: a comparison: candidate indices (parent first); the generator receives the winner's position in it
HeapSort = Generator[list[int], int, list[int]]


def parse_label(text: str, n: int) -> int | None:
    """0-based position of the chosen passage among `n`, or None when the answer is missing or out of range."""
    lowered = text.lower()
    match = _STRICT.search(lowered)
    answer = match.group(1).strip() if match else None
    if answer is None or not _LABEL.match(answer):
        lenient = _LENIENT.findall(lowered)
        answer = lenient[-1].strip() if lenient else None
    if answer is None:
        return None
    label = _LABEL.match(answer.replace(" ", ""))
    if not label:
        return None
    number = int(label.group(1) or label.group(2))
    return number - 1 if 1 <= number <= n else None


def setwise_heapsort(n: int, num_child: int, depth: int) -> HeapSort:
    """Setwise heap sort over candidates 0..n-1; yields comparisons, returns the order (best first).

    The top `depth` positions are sorted by the comparisons; the rest keep their original order.
    """
    arr = list(range(n))

    def sift(size: int, i: int) -> HeapSort:
        while num_child * i + 1 < size:
            group = [i, *range(num_child * i + 1, min(num_child * (i + 1) + 1, size))]
            best = yield [arr[j] for j in group]
            largest = group[best] if 0 <= best < len(group) else i
            if largest == i:
                return []
            arr[i], arr[largest] = arr[largest], arr[i]
            i = largest
        return []

    for i in range(n // num_child, -1, -1):
        yield from sift(n, i)
    for ranked, end in enumerate(range(n - 1, 0, -1), start=1):
        arr[0], arr[end] = arr[end], arr[0]  # the current best goes behind the heap
        if ranked == depth:
            break
        yield from sift(end, 0)
    top = list(reversed(arr))[:min(depth, n)]
    chosen = set(top)
    return top + [i for i in range(n) if i not in chosen]


class RankR1Reranker(PromptedReranker):
    kind = "rank_r1"

    def __init__(self, llm: LLMEngine | None = None, k: int | None = 5, num_child: int = 19, sort_depth: int = 10,
                 prompt: str = "rank_r1", prompt_dir: str | None = None, temperature: float = 0.0,
                 max_tokens: int = 2048, passage_words: int | None = 400, query_words: int | None = None):
        super().__init__(k)
        if num_child < 1 or sort_depth < 1:
            raise ValueError("rerank.num_child and rerank.sort_depth must be >= 1")
        self.engine = llm
        self.num_child, self.sort_depth = num_child, sort_depth
        self.prompt_name, self.prompt_dir = prompt, prompt_dir
        self.temperature, self.max_tokens = temperature, max_tokens
        #: Rank-R1 cut passages to 512 tokens; words are a tokenizer-free stand-in (about 1.3 tokens per word)
        self.passage_words, self.query_words = passage_words, query_words
        #: what the last `score` call cost: the pipeline reads latency and failures from here
        self.stats: dict[str, Any] = {}

    @property
    def key(self) -> str:
        """The engine by identity (model by content, LoRA adapter, backend settings: `LLMEngine.identity`, as the
        other LLM stages key), the prompt's text and the tournament's settings; the hash comes before the model's
        display name, so the 80-character slug never cuts it."""
        digest, model = self.key_parts()
        words = f"-w{self.passage_words}" if self.passage_words else ""
        return slug(f"rank_r1-c{self.num_child}-d{self.sort_depth}-t{self.temperature:g}{words}-{self.prompt_name}"
                    f"-{digest}-{model}")

    def request(self, template: PromptTemplate, query: str, passages: list[ScoredPassage]) -> LLMRequest:
        """One comparison: the query and the passages labelled [1]..[n] in the given order."""
        docs = [{"label": i + 1, "text": cut_words(p.passage.text, self.passage_words)} for i, p in enumerate(passages)]
        params = SamplingParams(temperature=self.temperature, max_tokens=self.max_tokens)
        return LLMRequest(messages=template.messages(query=cut_words(query, self.query_words), docs=docs),
                          params=params, stop_plain=template.stop_plain)

    def orders(self, queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[int]]:
        """Each question's candidate indices, best first, with one engine batch per tournament step."""
        if self.engine is None:
            raise ValueError("rerank=rank_r1 needs an LLM engine: set rerank.llm (e.g. the vLLM engine config)")
        template = self.template
        start = time.perf_counter()
        results: list[list[int] | None] = [None] * len(queries)
        running: dict[int, tuple[HeapSort, list[int]]] = {}
        for qi, cands in enumerate(candidates):
            sorter = setwise_heapsort(len(cands), self.num_child, self.sort_depth)
            try:
                running[qi] = (sorter, next(sorter))
            except StopIteration as done:
                results[qi] = done.value
        calls, steps, failures, prompt_tokens, completion_tokens = 0, 0, 0, 0, 0
        calls_per_question = [0] * len(queries)
        while running:
            batch = list(running.items())
            requests = [self.request(template, queries[qi], [candidates[qi][j] for j in group])
                        for qi, (_, group) in batch]
            completions = self.engine.generate(requests, desc=f"rank_r1 step {steps + 1}")
            steps += 1
            for (qi, (sorter, group)), completion in zip(batch, completions):
                calls += 1
                calls_per_question[qi] += 1
                prompt_tokens += completion.prompt_tokens
                completion_tokens += completion.completion_tokens
                best = parse_label(completion.text, len(group))
                if best is None:  # fall back to the retrieval order: the best-ranked candidate of the set wins
                    failures += 1
                    log.debug("rank_r1: unparsable answer for question %d: %r", qi, completion.text[-200:])
                    best = group.index(min(group))
                try:
                    running[qi] = (sorter, sorter.send(best))
                except StopIteration as done:
                    results[qi] = done.value
                    del running[qi]
        seconds = time.perf_counter() - start
        self.stats = {"seconds": seconds, "questions": len(queries),
                      "seconds_per_question": seconds / max(1, len(queries)), "llm_calls": calls,
                      "llm_steps": steps, "calls_per_question": calls_per_question, "parse_failures": failures,
                      "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
        if failures:
            log.warning("rank_r1: %d of %d answers unparsable; the retrieval order decided those comparisons",
                        failures, calls)
        return [r if r is not None else list(range(len(c))) for r, c in zip(results, candidates)]

    def score(self, queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[float]]:
        out = []
        for order, cands in zip(self.orders(queries, candidates), candidates):
            scores = [0.0] * len(cands)
            for position, index in enumerate(order):
                scores[index] = float(len(cands) - position)
            out.append(scores)
        return out

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
