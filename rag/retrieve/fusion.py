"""Fusion over several retrievers and several queries per question: the LiveRAG 2025 winners' first stage.

A `FusionRetriever` holds named sources (`retriever.sources.sparse`, `retriever.sources.dense`, ...). Given one query
per question it searches every source and fuses their lists; given a query stage's `QuerySet`s (rag/query/),
`search_query_sets` searches each query with the sources it names (`Query.source`, None: all of them) and fuses
every (query, source) list of a question with `fuse`; `select_per_group` is PreQRAG's per-sub-question context. Each sub-retrieval goes through the stage cache on its own
(`StageCache.retrieve_queries`: by source, query text and depth), so cells that fuse differently, or write other
queries, share every sub-retrieval they have in common.

Two fusions:
- `rrf`: reciprocal rank fusion (Cormack, Clarke and Buettcher, SIGIR 2009), `sum 1 / (rrf_k + rank)` with
  `rrf_k = 60` (GRAG's `query_fusion` over BM25 and dense lists of the question and its HyDE answer).
- `alternate`: the lists interleaved one item at a time (first list's rank 1, second list's rank 1, first list's
  rank 2, ...), a passage already taken skipped, until `k` (Magikarp's merge of its BM25 and E5 lists into 2,000
  candidates). The score is the reciprocal of the merged rank, so later stages see a decreasing list.
Passages are matched by `passage_id`, so every source must index the same passages (same corpus and chunking).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from rag.core.hashing import slug, stable_hash
from rag.data.corpus import Corpus
from rag.records import Passage, Question, ScoredPassage
from rag.retrieve.base import Retriever
from rag.retrieve.hybrid import MAX_KEY_CHARS, reciprocal_rank_fusion

FUSIONS = ("rrf", "alternate")

#: one search query as retrieval reads a query stage's `Query` (rag/query/base.py): (group, source or None, text)
PlannedQuery = tuple[int, str | None, str]
#: searches a retriever for query texts at a depth (the pipeline's stage cache: `StageCache.retrieve_queries`)
Search = Callable[[Retriever, list[str], int], list[list[ScoredPassage]]]
#: reranks (ids, question texts, candidate lists) (the pipeline's stage cache: `StageCache.rerank`)
Rerank = Callable[[list[str], list[str], list[list[ScoredPassage]]], list[list[ScoredPassage]]]


def alternate_merge(lists: list[list[ScoredPassage]], k: int | None = None) -> list[ScoredPassage]:
    """Interleave ranked lists one item at a time in list order, skipping passages already taken."""
    taken: dict[str, Passage] = {}
    longest = max((len(x) for x in lists), default=0)
    for position in range(longest):
        for ranked in lists:
            if position < len(ranked):
                taken.setdefault(ranked[position].passage.passage_id, ranked[position].passage)
                if k is not None and len(taken) >= k:
                    break
        if k is not None and len(taken) >= k:
            break
    return [ScoredPassage(p, 1.0 / rank, rank) for rank, p in enumerate(taken.values(), start=1)]


class FusionRetriever(Retriever):
    kind = "fusion"

    def __init__(self, sources: Mapping[str, Retriever], k: int = 20, method: str = "rrf", rrf_k: float = 60.0,
                 depth: int | None = None):
        super().__init__(k)
        if not sources:
            raise ValueError("retriever.sources needs at least one retriever")
        if method not in FUSIONS:
            raise ValueError(f"retriever.method must be one of {', '.join(FUSIONS)}, got {method!r}")
        if rrf_k <= 0:
            raise ValueError(f"retriever.rrf_k must be > 0, got {rrf_k}")
        if depth is not None and depth < 1:
            raise ValueError(f"retriever.depth must be >= 1 or null, got {depth}")
        self.sources: dict[str, Retriever] = dict(sources)
        self.method = method
        self.rrf_k = float(rrf_k)
        #: how deep each source searches each query (null: the fused list's own depth)
        self.depth = depth

    @property
    def key(self) -> str:
        depth = f"-d{self.depth}" if self.depth else ""
        params = f"fusion-{self.method}" + (f"{self.rrf_k:g}" if self.method == "rrf" else "") + depth
        parts = [f"{name}={src.key}" for name, src in self.sources.items()]
        full = "--".join([params, *parts])
        if len(full) <= MAX_KEY_CHARS:
            return slug(full)
        return slug(f"{params}--{'-'.join(self.sources)}-{stable_hash([params, parts], 10)}")

    @property
    def stores_text(self) -> bool:
        return self.corpus is None or any(src.stores_text for src in self.sources.values())

    def parts(self) -> list[Retriever]:
        return list(self.sources.values())

    def prepare(self, corpus: Corpus | None, cache_dir: str | Path) -> None:
        super().prepare(corpus, cache_dir)
        for src in self.sources.values():
            src.prepare(corpus, cache_dir)

    def source_depth(self, k: int) -> int:
        """How deep each source searches when the fused list must hold `k` passages."""
        return max(k, self.depth or 0)

    def fuse(self, lists: list[list[ScoredPassage]], k: int) -> list[ScoredPassage]:
        """One list from a question's (query, source) lists, in the order given, best first, at most `k`."""
        if self.method == "alternate":
            return alternate_merge(lists, k)
        return reciprocal_rank_fusion(lists, self.rrf_k)[:k]

    def routes(self, source: str | None) -> list[str]:
        """The sources a query meant for `source` goes to: that one, or every source for None (or a name this
        retriever lacks: a query written for "dense" still searches a fusion of sparse sources)."""
        return [source] if source in self.sources else list(self.sources)

    def search(self, queries: list[str], k: int) -> list[list[ScoredPassage]]:
        if not queries:
            return []
        depth = self.source_depth(k)
        per_source = [src.search(queries, depth) for src in self.sources.values()]
        return [self.fuse([lists[i] for lists in per_source], k) for i in range(len(queries))]

    def close(self) -> None:
        for src in self.sources.values():
            src.close()


def search_query_sets(plans: Sequence[Sequence[PlannedQuery]], retriever: Retriever, depth: int, search: Search
                      ) -> tuple[list[list[ScoredPassage]], list[dict[int, list[ScoredPassage]]]]:
    """Search every question's queries with the sources they name, each (source, query) through `search` on its own,
    and fuse each question's lists: the whole set's, and each group's (sub-question's) apart.

    A fusion retriever routes by source and fuses its way; a single retriever searches every query and fuses by
    reciprocal rank fusion (rrf_k 60)."""
    fusion = retriever if isinstance(retriever, FusionRetriever) else None
    sources: dict[str, Retriever] = fusion.sources if fusion else {retriever.kind: retriever}
    source_depth = fusion.source_depth(depth) if fusion else depth
    routed: list[list[tuple[int, str, str]]] = []
    wanted: dict[str, dict[str, None]] = {name: {} for name in sources}
    for plan in plans:
        route = []
        for group, source, text in plan:
            for name in (fusion.routes(source) if fusion else list(sources)):
                wanted[name][text] = None
                route.append((group, name, text))
        routed.append(route)
    found: dict[tuple[str, str], list[ScoredPassage]] = {}
    for name, texts in wanted.items():
        if texts:
            lists = search(sources[name], list(texts), source_depth)
            found.update({(name, text): ranked for text, ranked in zip(texts, lists)})

    def fuse(lists: list[list[ScoredPassage]]) -> list[ScoredPassage]:
        return fusion.fuse(lists, depth) if fusion else reciprocal_rank_fusion(lists)[:depth]

    deep = [fuse([found[(name, text)] for _, name, text in route]) for route in routed]
    groups = [{g: fuse([found[(name, text)] for group, name, text in route if group == g])
               for g in sorted({group for group, _, _ in route})} for route in routed]
    return deep, groups


def select_per_group(questions: Sequence[Question], n_subquestions: Sequence[int],
                     groups: Sequence[dict[int, list[ScoredPassage]]], reranked: list[list[ScoredPassage]], k: int,
                     per_group_k: int, rerank: Rerank) -> tuple[list[list[ScoredPassage]], set[int]]:
    """PreQRAG's context for a decomposed question: each sub-question's top `k` candidates reranked against the
    question (as PreQRAG's `handle_multidoc` does; batched across questions), the top `per_group_k` of each kept,
    and the sub-questions' lists interleaved without duplicates (not cut to rerank.k). Questions without
    sub-questions keep `reranked`; returns the lists and the positions of the questions selected per group."""
    ids, texts, candidates, owners = [], [], [], []
    for i, (question, by_group, n) in enumerate(zip(questions, groups, n_subquestions)):
        for g in range(1, n + 1):
            if by_group.get(g):
                ids.append(f"{question.id}#g{g}")
                texts.append(question.question)
                candidates.append(by_group[g][:k])
                owners.append(i)
    if not ids:
        return reranked, set()
    lists: dict[int, list[list[ScoredPassage]]] = defaultdict(list)
    for owner, ranked_list in zip(owners, rerank(ids, texts, candidates)):
        lists[owner].append(ranked_list[:per_group_k])
    return [alternate_merge(lists[i]) if i in lists else r for i, r in enumerate(reranked)], set(lists)
