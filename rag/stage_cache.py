"""Stage caches shared by every run and sweep cell: retrieval and reranking are computed once per key.

Retrieval runs at depth `cache.retrieval_depth` (at least the run's own k), so cells that differ only in k,
rerank.k, ordering or generator reuse one retrieval file and cut their own k. Reranking is cached per
(retrieval file, reranker). Files are named by their parameters, written atomically, and built under a file
lock so concurrent jobs never compute or write the same entry twice. Counters report work actually done.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from rag.core.hashing import cap_name
from rag.core.io import atomic_write_jsonl, read_jsonl
from rag.records import Passage, ScoredPassage
from rag.rerank.base import Reranker
from rag.retrieve.base import Retriever

log = logging.getLogger(__name__)


@dataclass
class StageCounters:
    retrieval_calls: int = 0
    rerank_calls: int = 0
    retrieval_cache_hits: int = 0
    rerank_cache_hits: int = 0


def _to_rows(qids: list[str], lists: list[list[ScoredPassage]], with_text: bool) -> list[dict[str, Any]]:
    rows = []
    for qid, ranked in zip(qids, lists):
        hits = []
        for p in ranked:
            hit = {"passage_id": p.passage.passage_id, "doc_id": p.passage.doc_id, "score": p.score}
            if with_text:
                hit.update(text=p.passage.text, title=p.passage.title)
            hits.append(hit)
        rows.append({"qid": qid, "hits": hits})
    return rows


def _from_rows(rows: list[dict[str, Any]], retriever: Retriever) -> dict[str, list[ScoredPassage]]:
    out = {}
    for row in rows:
        ranked = []
        for rank, hit in enumerate(row["hits"], start=1):
            if "text" in hit:
                passage = Passage(hit["passage_id"], hit["doc_id"], hit["text"], hit.get("title", ""))
            else:
                passage = retriever.passage(hit["passage_id"])
            ranked.append(ScoredPassage(passage, float(hit["score"]), rank))
        out[row["qid"]] = ranked
    return out


class StageCache:
    def __init__(self, cache_dir: str | Path, enabled: bool = True):
        self.root = Path(cache_dir)
        self.enabled = enabled
        self.counters = StageCounters()

    def _cached(self, path: Path, qids: list[str], compute, retriever: Retriever, hit_attr: str,
                call_attr: str, with_text: bool) -> list[list[ScoredPassage]]:
        """Serve qids from `path`, computing (under a lock) only those the file lacks."""
        if not self.enabled:
            result = compute(qids)
            setattr(self.counters, call_attr, getattr(self.counters, call_attr) + len(qids))
            return result
        if path.exists():  # files are replaced atomically: a complete entry is read without the lock, so a
            known = _from_rows(read_jsonl(path), retriever)  # read-only shared cache serves every reader
            if all(q in known for q in qids):
                setattr(self.counters, hit_attr, getattr(self.counters, hit_attr) + len(qids))
                return [known[q] for q in qids]
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock"):
            known = _from_rows(read_jsonl(path), retriever) if path.exists() else {}
            missing = [q for q in dict.fromkeys(qids) if q not in known]
            if missing:
                fresh = compute(missing)
                known.update(zip(missing, fresh))
                setattr(self.counters, call_attr, getattr(self.counters, call_attr) + len(missing))
                order = list(known)
                atomic_write_jsonl(path, _to_rows(order, [known[q] for q in order], with_text))
            setattr(self.counters, hit_attr, getattr(self.counters, hit_attr) + len(qids) - len(missing))
        return [known[q] for q in qids]

    def retrieve(self, retriever: Retriever, corpus_key: str, questions_key: str, qids: list[str],
                 queries: list[str], depth: int) -> list[list[ScoredPassage]]:
        path = self.root / "retrieval" / f"{cap_name(self.retrieval_name(retriever, corpus_key, questions_key, depth))}.jsonl"
        by_qid = dict(zip(qids, queries))
        return self._cached(path, qids, lambda ids: retriever.search([by_qid[i] for i in ids], depth), retriever,
                            "retrieval_cache_hits", "retrieval_calls", retriever.stores_text)

    def rerank(self, reranker: Reranker, retrieval_name: str, retriever: Retriever, qids: list[str],
               queries: list[str], candidates: list[list[ScoredPassage]]) -> list[list[ScoredPassage]]:
        if reranker.is_identity:
            return candidates
        # a chain of rerankers behind a query stage names a file longer than file systems take: capped, still unique
        path = self.root / "rerank" / f"{cap_name(f'{retrieval_name}__{reranker.key}')}.jsonl"
        by_qid = {q: (text, cands) for q, text, cands in zip(qids, queries, candidates)}

        def compute(ids: list[str]) -> list[list[ScoredPassage]]:
            return reranker.rerank([by_qid[i][0] for i in ids], [by_qid[i][1] for i in ids])

        return self._cached(path, qids, compute, retriever, "rerank_cache_hits", "rerank_calls",
                            retriever.stores_text)

    def retrieve_queries(self, retriever: Retriever, corpus_key: str, queries: list[str],
                         depth: int) -> list[list[ScoredPassage]]:
        """Ad-hoc queries (IterDRAG sub-queries), cached by the hash of their text."""
        from rag.core.hashing import stable_hash

        ids = [stable_hash(q, length=16) for q in queries]
        path = self.root / "retrieval" / f"{cap_name(f'{retriever.key}__{corpus_key}__adhoc__depth{depth}')}.jsonl"
        by_id = dict(zip(ids, queries))
        return self._cached(path, ids, lambda xs: retriever.search([by_id[i] for i in xs], depth), retriever,
                            "retrieval_cache_hits", "retrieval_calls", retriever.stores_text)

    @staticmethod
    def retrieval_name(retriever: Retriever, corpus_key: str, questions_key: str, depth: int) -> str:
        return f"{retriever.key}__{corpus_key}__{questions_key}__depth{depth}"
