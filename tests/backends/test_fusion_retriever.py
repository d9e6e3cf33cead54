"""Fusion retriever: reciprocal rank fusion over (query, source) lists worked by hand, the alternating merge's order
and deduplication, routing by a query's source, and its key."""

from __future__ import annotations

import pytest

from rag.records import Passage, ScoredPassage
from rag.retrieve.fusion import FusionRetriever, alternate_merge
from tests.backends.test_hybrid_retriever import FixedRetriever


def _ranked(*ids: str) -> list[ScoredPassage]:
    return [ScoredPassage(Passage(pid, pid, f"text of {pid}"), 1.0 / i, i) for i, pid in enumerate(ids, start=1)]


def _ids(ranked: list[ScoredPassage]) -> list[str]:
    return [p.passage.passage_id for p in ranked]


def test_rrf_over_two_queries_and_two_sources_matches_the_hand_worked_fusion():
    """GRAG's fusion: question and HyDE answer, each searched by BM25 and dense, four lists, rrf_k 60.
    y: 1/62 (q,bm25) + 1/61 (q,dense) + 1/61 (hyde,bm25) = 0.04892; x: 1/61 + 1/63 + 1/62 = 0.04802 and z:
    1/63 + 1/62 + 1/61 (hyde,dense) tie, and the tie goes to the passage seen first (x, in the first list);
    w: 1/63 (hyde,bm25) + 1/62 (hyde,dense) = 0.03200."""
    fusion = FusionRetriever({"sparse": FixedRetriever("a", []), "dense": FixedRetriever("b", [])}, k=4)
    lists = [_ranked("x", "y", "z"), _ranked("y", "z", "x"), _ranked("y", "x", "w"), _ranked("z", "w")]
    fused = fusion.fuse(lists, 4)
    expected = {"x": 1 / 61 + 1 / 63 + 1 / 62, "y": 1 / 62 + 1 / 61 + 1 / 61, "z": 1 / 63 + 1 / 62 + 1 / 61,
                "w": 1 / 63 + 1 / 62}
    assert _ids(fused) == ["y", "x", "z", "w"]
    assert [p.score for p in fused] == pytest.approx([expected[i] for i in _ids(fused)])
    assert [p.rank for p in fused] == [1, 2, 3, 4]
    assert _ids(fusion.fuse(lists, 2)) == ["y", "x"]


def test_the_alternating_merge_interleaves_in_list_order_and_skips_what_it_already_took():
    """Magikarp's merge: BM25's rank 1, E5's rank 1, BM25's rank 2, ...; a passage already taken is skipped."""
    bm25, e5 = _ranked("a", "b", "c", "e"), _ranked("b", "d", "a")
    merged = alternate_merge([bm25, e5])
    assert _ids(merged) == ["a", "b", "d", "c", "e"]
    assert [p.rank for p in merged] == [1, 2, 3, 4, 5]
    assert [p.score for p in merged] == pytest.approx([1, 1 / 2, 1 / 3, 1 / 4, 1 / 5])
    assert _ids(alternate_merge([bm25, e5], k=3)) == ["a", "b", "d"]
    assert _ids(alternate_merge([e5, bm25])) == ["b", "a", "d", "c", "e"]  # the first list leads
    assert alternate_merge([]) == []


def test_search_fuses_every_source_at_its_depth_and_routes_a_query_to_its_source():
    sparse, dense = FixedRetriever("s", ["x", "y", "z"]), FixedRetriever("d", ["z", "y"])
    fusion = FusionRetriever({"sparse": sparse, "dense": dense}, k=3, method="alternate", depth=10)
    assert _ids(fusion.search(["q"], 3)[0]) == ["x", "z", "y"]
    assert sparse.depths == [10] and dense.depths == [10]  # depth per source, not the fused k
    assert fusion.routes("sparse") == ["sparse"] and fusion.routes(None) == ["sparse", "dense"]
    assert fusion.routes("keywords") == ["sparse", "dense"]  # a source this retriever lacks: every source


def test_the_key_names_method_depth_and_every_source_and_bad_settings_are_refused():
    a, b = FixedRetriever("bm25-x", []), FixedRetriever("dense-y", [])
    rrf = FusionRetriever({"sparse": a, "dense": b}, depth=100).key
    assert "rrf60" in rrf and "d100" in rrf and "bm25-x" in rrf and "dense-y" in rrf
    assert FusionRetriever({"sparse": a, "dense": b}, method="alternate").key != rrf
    assert FusionRetriever({"dense": b, "sparse": a}, depth=100).key != rrf  # order decides alternate's lead
    long = FusionRetriever({"sparse": FixedRetriever("s" * 90, []), "dense": b}).key
    assert len(long) <= 100
    with pytest.raises(ValueError, match="retriever.method"):
        FusionRetriever({"sparse": a}, method="max")
    with pytest.raises(ValueError, match="retriever.sources"):
        FusionRetriever({})
