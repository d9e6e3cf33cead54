"""Dense (all-MiniLM-L6-v2, offline) built by `rag.index`: found by retriever=dense without re-encoding; the
vectors do not depend on the number of shards; N flat shards return exactly one index's ranked lists; IVF units
and their on-disk merge agree, and IVF probing every list finds what flat finds."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hydra.utils import instantiate

from rag.retrieve.dense import DenseRetriever
from rag.retrieve.sharded import ShardedRetriever
from tests.index.conftest import DENSE, build, retriever_config, slice_corpus


@pytest.fixture(scope="module")
def embedder():
    return instantiate(retriever_config("retriever=dense")).embedder


def _dense(embedder) -> DenseRetriever:
    return DenseRetriever(embedder=embedder)


def _lists(ranked_lists):
    return [[(p.passage.passage_id, p.score, p.rank) for p in ranked] for ranked in ranked_lists]


def test_dense_index_is_found_without_encoding_anything(dense_sharded, dense_slice, index_cache):
    corpus = slice_corpus(dense_slice, index_cache)
    retriever = instantiate(retriever_config("retriever=dense"))
    assert dense_sharded.name == f"{retriever.key}__{corpus.key}"
    before = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in dense_sharded.iterdir() if p.is_file()}
    retriever.prepare(corpus, index_cache)
    assert retriever.embedder.encoded_passages == 0  # the index was loaded, not rebuilt
    assert {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in dense_sharded.iterdir() if p.is_file()} == before
    assert json.loads((dense_sharded / "passage_ids.json").read_text()) == [p.passage_id for p in corpus.passages]
    assert retriever._index.ntotal == len(corpus.passages)


def test_flat_shards_return_the_ranked_lists_of_one_index(dense_sharded, dense_one, dense_slice, index_cache,
                                                          queries, embedder):
    import faiss

    corpus = slice_corpus(dense_slice, index_cache)
    a = faiss.read_index(str(dense_sharded / "index.faiss"))
    b = faiss.read_index(str(dense_one / "index.faiss"))
    # the encoder saw the same groups of documents in both builds: bitwise the same vectors
    assert np.array_equal(a.reconstruct_n(0, a.ntotal), b.reconstruct_n(0, b.ntotal))
    sharded = ShardedRetriever(base=_dense(embedder))
    sharded.prepare(corpus, index_cache)
    one = ShardedRetriever(base=_dense(embedder))
    one.prepare(corpus, dense_one.parent.parent)
    assert len(sharded.units) == 4 and len(one.units) == 1  # shards of 8, 8, 16 documents (groups of 8), parts of 8
    single = _dense(embedder)
    single.prepare(corpus, index_cache)
    for k in (1, 10, 200):
        got = sharded.search(queries, k)
        assert _lists(got) == _lists(one.search(queries, k))
        for ranked, reference in zip(got, single.search(queries, k)):  # retriever=dense on the same vectors
            assert [p.score for p in ranked] == [p.score for p in reference]
            assert sorted(p.passage.passage_id for p in ranked) == sorted(p.passage.passage_id for p in reference)


@pytest.mark.slow
def test_ivf_units_and_their_ondisk_merge_agree_and_match_flat(dense_slice, dense_sharded, index_cache, queries,
                                                               embedder, tmp_path):
    corpus = slice_corpus(dense_slice, tmp_path)
    ann = ["index.ann.type=ivf", "index.ann.nlist=4", "index.ann.train_size=1000"]
    folder = build(str(dense_slice), tmp_path, *DENSE, "index.num_shards=3", "index.part_docs=8", *ann)
    assert folder.name.startswith("dense-all-MiniLM-L6-v2") and "-ivf4__" in folder.name
    assert (folder / "ivf.faiss").is_file() and (folder / "ivf.ivfdata").is_file()
    assert not (folder / "index.faiss").exists()  # no flat copy of an IVF index

    def sharded(layout: str, nprobe: int) -> ShardedRetriever:
        r = ShardedRetriever(base=_dense(embedder), ann={"type": "ivf", "nlist": 4, "nprobe": nprobe}, layout=layout)
        r.prepare(corpus, tmp_path)
        return r

    merged, units = sharded("merged", 2), sharded("units", 2)
    assert merged._merged is not None and units._merged is None
    assert _lists(merged.search(queries, 10)) == _lists(units.search(queries, 10))
    flat = ShardedRetriever(base=_dense(embedder))
    flat.prepare(corpus, index_cache)
    exhaustive = sharded("merged", 4).search(queries, 10)  # every list probed: an exact search
    for ranked, reference in zip(exhaustive, flat.search(queries, 10)):
        np.testing.assert_allclose([p.score for p in ranked], [p.score for p in reference], atol=1e-5)
        overlap = {p.passage.passage_id for p in ranked} & {p.passage.passage_id for p in reference}
        assert len(overlap) >= 9


@pytest.mark.slow
def test_ivfpq_builds_searches_and_is_refused_by_a_flat_retriever(dense_slice, queries, embedder, tmp_path):
    from rag.core.errors import ConfigError

    corpus = slice_corpus(dense_slice, tmp_path)
    ann = ["index.ann.type=ivfpq", "index.ann.nlist=2", "index.ann.pq_m=8", "index.ann.pq_nbits=4",
           "index.ann.train_size=1000", "index.ann.merge=units"]
    with pytest.raises(ConfigError, match=r"IVF2,PQ8x8 needs at least 256 training passages .* has \d+"):
        build(str(dense_slice), tmp_path / "too-few", *DENSE, *ann[:3], "index.ann.train_size=1000")
    folder = build(str(dense_slice), tmp_path, *DENSE, "index.num_shards=2", *ann)
    assert "-ivf2pq8x4__" in folder.name and not (folder / "ivf.faiss").exists()
    retriever = ShardedRetriever(base=_dense(embedder), ann={"type": "ivfpq", "nlist": 2, "pq_m": 8, "pq_nbits": 4,
                                                             "nprobe": 2})
    retriever.prepare(corpus, tmp_path)
    results = retriever.search(queries[:5], 5)
    assert [len(r) for r in results] == [5] * 5
    assert all(r[0].score >= r[-1].score for r in results)
    wrong = ShardedRetriever(base=_dense(embedder), index_dir=str(folder))
    with pytest.raises(ConfigError, match=r"built with ann\.type=ivfpq, but retriever\.ann\.type=flat"):
        wrong.prepare(None, tmp_path)
