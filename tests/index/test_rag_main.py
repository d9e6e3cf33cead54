"""The pipeline (`rag.main`'s Pipeline, retrieval only) on an index `rag.index` built: retriever=bm25 finds it in its
cache without rebuilding, and retriever=sharded over the same index retrieves the same scored passages."""

from __future__ import annotations

from itertools import groupby

from rag.core.io import read_jsonl
from rag.pipeline import Pipeline
from tests.conftest import compose_config


def _score_groups(hits: list[dict]) -> list[tuple[float, frozenset[str]]]:
    """Each score of a ranked list with the passages holding it; the last group may be cut by k."""
    ordered = sorted(hits, key=lambda h: -h["score"])
    return [(score, frozenset(h["passage_id"] for h in group)) for score, group in
            groupby(ordered, key=lambda h: h["score"])]


def test_rag_main_uses_the_built_index_and_sharded_retrieves_the_same(bm25_sharded, bm25_slice, index_cache,
                                                                      tmp_path):
    base = [f"paths.cache_dir={index_cache}", f"dataset.corpus.path={bm25_slice}", "dataset.corpus.name=fineweb_slice",
            "dataset.limit=10", "generator=none", "retriever.k=20", "logger=none", "cache.stages=false"]
    before = {p.name: p.stat().st_ino for p in bm25_sharded.iterdir() if p.is_file()}
    runs = {}
    for name in ("bm25", "sharded"):
        cfg = compose_config([*base, f"retriever={name}"])
        pipeline = Pipeline(cfg)
        metrics = pipeline.run(tmp_path / name)
        assert metrics["n_questions"] == 10
        runs[name] = read_jsonl(tmp_path / name / "answers.jsonl")
    assert {p.name: p.stat().st_ino for p in bm25_sharded.iterdir() if p.is_file()} == before  # not rebuilt
    assert not list(index_cache.glob("index/.bm25-*.building-*"))
    for a, b in zip(runs["bm25"], runs["sharded"]):
        assert [h["score"] for h in a["retrieved"]] == [h["score"] for h in b["retrieved"]]
        groups_a, groups_b = _score_groups(a["retrieved"]), _score_groups(b["retrieved"])
        assert groups_a[:-1] == groups_b[:-1]  # every tie group but the one cut at k holds the same passages
        assert [h["passage_id"] for h in b["retrieved"]] == \
            [h["passage_id"] for h in sorted(b["retrieved"], key=lambda h: (-h["score"], h["passage_id"]))]
