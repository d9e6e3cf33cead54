"""BM25 built by `rag.index`: the folder rag.main looks up, found without a rebuild; scores bitwise those of
retriever=bm25's own bm25s index; N shards return exactly the ranked lists of one index."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hydra.utils import instantiate

from rag.data.corpus import JsonlCorpus
from rag.retrieve.bm25 import BM25Retriever
from rag.retrieve.sharded import ShardedRetriever
from tests.index.conftest import build, retriever_config, slice_corpus


def _files_identity(folder):
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file()}


def _all_scores(retriever: BM25Retriever, queries: list[str]) -> list[np.ndarray]:
    """Every passage's score for every query, from the bm25s index the retriever loaded."""
    tokenized = retriever.tokenize(queries)
    words = {i: w for w, i in tokenized.vocab.items()}
    n = retriever._index.scores["num_docs"]
    return [retriever._index.get_scores([words[i] for i in ids]) if ids else np.zeros(n, np.float32)
            for ids in tokenized.ids]


def _by_score_then_id(scores: np.ndarray, ids: list[str]) -> list[tuple[float, str]]:
    """Every passage ranked by its score, ties by passage id: the order a sharded search promises."""
    return sorted((-float(s), pid) for s, pid in zip(scores, ids))


def test_index_lands_where_rag_main_looks_and_is_not_rebuilt(bm25_sharded, bm25_slice, index_cache):
    corpus = slice_corpus(bm25_slice, index_cache)
    retriever = instantiate(retriever_config("retriever=bm25"))
    assert bm25_sharded.name == f"{retriever.key}__{corpus.key}"
    before = _files_identity(bm25_sharded)
    retriever.prepare(corpus, index_cache)  # what rag.main's pipeline calls
    assert _files_identity(bm25_sharded) == before  # no rebuild: build_once replaces the folder whole
    assert not list(bm25_sharded.parent.glob(f".{bm25_sharded.name}.building-*"))
    assert json.loads((bm25_sharded / "passage_ids.json").read_text()) == [p.passage_id for p in corpus.passages]
    manifest = json.loads((bm25_sharded / "manifest.json").read_text())
    assert (manifest["num_shards"], len(manifest["units"]), manifest["passages"]) == (4, 12, len(corpus.passages))


def test_scores_are_bitwise_those_of_retriever_bm25(bm25_sharded, bm25_slice, index_cache, queries, tmp_path):
    corpus = slice_corpus(bm25_slice, index_cache)
    ours = BM25Retriever()
    ours.prepare(corpus, index_cache)  # loads the index rag.index wrote
    theirs = BM25Retriever()
    theirs.prepare(corpus, tmp_path)  # bm25s builds its own in a fresh cache
    for query, a, b in zip(queries, _all_scores(ours, queries), _all_scores(theirs, queries)):
        assert np.array_equal(a, b), query
    k = 20
    for a, b in zip(ours.search(queries, k), theirs.search(queries, k)):
        assert [p.score for p in a] == [p.score for p in b]


@pytest.mark.parametrize("k", [1, 7, 50, 10_000])
def test_shards_return_the_ranked_lists_of_one_index(bm25_sharded, bm25_one, bm25_slice, index_cache, queries,
                                                     tmp_path, k):
    corpus = slice_corpus(bm25_slice, index_cache)
    sharded = ShardedRetriever(base=BM25Retriever())
    sharded.prepare(corpus, index_cache)
    one = ShardedRetriever(base=BM25Retriever())
    one.prepare(corpus, bm25_one.parent.parent)
    assert len(sharded.units) == 12 and len(one.units) == 1
    a, b = sharded.search(queries, k), one.search(queries, k)
    expected_k = min(k, len(corpus.passages))
    for ranked_a, ranked_b in zip(a, b):
        assert [(p.passage.passage_id, p.score, p.rank) for p in ranked_a] == \
            [(p.passage.passage_id, p.score, p.rank) for p in ranked_b]
        assert len(ranked_a) == expected_k
    # without the dataset's corpus, hits are read from the units' passage stores: the same passages
    from_store = ShardedRetriever(base=BM25Retriever(), index_dir=str(bm25_sharded))
    from_store.prepare(None, tmp_path)
    by_id = {p.passage_id: p for p in corpus.passages}
    for ranked_a, ranked_c in zip(a, from_store.search(queries, k)):
        assert [(p.passage, p.score) for p in ranked_c] == [(by_id[p.passage.passage_id], p.score) for p in ranked_a]
    # against retriever=bm25 itself: its top-k scores, and every passage's score sorted with ties by id
    single = BM25Retriever()
    single.prepare(corpus, bm25_one.parent.parent)
    ids = [p.passage_id for p in corpus.passages]
    for ranked, reference, scores in zip(a, single.search(queries, expected_k), _all_scores(single, queries)):
        assert [p.score for p in ranked] == [p.score for p in reference]
        assert [(-p.score, p.passage.passage_id) for p in ranked] == _by_score_then_id(scores, ids)[:expected_k]


def test_other_bm25_variants_score_exactly_as_bm25s(bm25_slice, queries, tmp_path):
    """bm25+ (with bm25s's non-occurrence scores) and robertson, built in 3 shards."""
    corpus = slice_corpus(bm25_slice, tmp_path)
    for method in ("bm25+", "robertson"):
        cache = tmp_path / method
        build(str(bm25_slice), cache, "retriever=bm25", f"retriever.method={method}", "retriever.k1=1.2",
              "retriever.b=0.6", "index.num_shards=3", "index.part_docs=25")
        ours, theirs = BM25Retriever(method=method, k1=1.2, b=0.6), BM25Retriever(method=method, k1=1.2, b=0.6)
        ours.prepare(corpus, cache)
        theirs.prepare(corpus, tmp_path / f"{method}-bm25s")
        for a, b in zip(_all_scores(ours, queries), _all_scores(theirs, queries)):
            assert np.array_equal(a, b), method
        sharded = ShardedRetriever(base=BM25Retriever(method=method, k1=1.2, b=0.6))
        sharded.prepare(corpus, cache)
        ids = [p.passage_id for p in corpus.passages]
        for ranked, scores in zip(sharded.search(queries, 10), _all_scores(theirs, queries)):
            assert [(-p.score, p.passage.passage_id) for p in ranked] == _by_score_then_id(scores, ids)[:10]


def test_sharded_retriever_refuses_an_index_of_other_settings(bm25_sharded, bm25_slice, index_cache):
    from rag.core.errors import ConfigError, MissingDataError

    corpus = slice_corpus(bm25_slice, index_cache)
    other = ShardedRetriever(base=BM25Retriever(k1=0.9))
    with pytest.raises(MissingDataError, match=r"no sharded index at .*python -m rag\.index corpus="):
        other.prepare(corpus, index_cache)  # another key: another folder, not this one
    forced = ShardedRetriever(base=BM25Retriever(k1=0.9), index_dir=str(bm25_sharded))
    with pytest.raises(ConfigError, match=r"built with other BM25 settings: k1=1\.5 \(retriever: 0\.9\)"):
        forced.prepare(None, index_cache)
    # an index folder given explicitly serves without the dataset's corpus (hits carry their text)
    remote = ShardedRetriever(base=BM25Retriever(), index_dir=str(bm25_sharded))
    remote.prepare(None, "unused")
    [ranked] = remote.search(["history of the internet"], 3)
    assert len(ranked) == 3 and all(p.passage.text for p in ranked) and remote.capacity() == len(corpus.passages)


def test_fineweb_parquet_shards_build_the_same_index_as_jsonl(fineweb, tmp_path):
    """FineWeb's parquet layout (two files, `id` column, small row groups), written here from the shared JSONL."""
    from tests.index.conftest import read_docs, write_jsonl_gz
    from tests.index.test_sources import write_parquet

    docs = read_docs(40)
    (tmp_path / "10BT").mkdir()
    write_parquet(tmp_path / "10BT" / "000_00000.parquet", docs[:23], row_group_size=7)
    write_parquet(tmp_path / "10BT" / "000_00001.parquet", docs[23:], row_group_size=7)
    jsonl = write_jsonl_gz(tmp_path / "docs.jsonl.gz", docs)
    from_parquet = build(str(tmp_path / "10BT" / "*.parquet"), tmp_path / "pq", "retriever=bm25", "index.num_shards=3",
                         "index.part_docs=5")
    from_jsonl = build(str(jsonl), tmp_path / "js", "retriever=bm25")
    assert from_parquet.name.split("__")[1].startswith("10BT-") and from_jsonl.name.split("__")[1].startswith("docs-")
    for name in ("passage_ids.json", "data.csc.index.npy", "indices.csc.index.npy", "vocab.index.json"):
        assert (from_parquet / name).read_bytes() == (from_jsonl / name).read_bytes(), name
    manifest = json.loads((from_parquet / "manifest.json").read_text())
    assert [f["documents"] for f in manifest["files"]] == [23, 17] and manifest["passages"] == len(
        json.loads((from_jsonl / "passage_ids.json").read_text()))


def test_records_kept_whole_index_under_the_key_the_dataset_uses(tmp_path):
    """`index.chunk_words=null` (as `dataset=trec`'s corpus keeps MS MARCO segments whole) builds one passage per
    record under the key `rag.main` looks up (`...-whole`); it used to end in a TypeError traceback."""
    from rag.index.main import run
    from tests.index.conftest import index_config, read_docs, write_jsonl_gz

    docs = [{"doc_id": d["doc_id"], "text": d["text"][:3000]} for d in read_docs(6)]
    corpus = write_jsonl_gz(tmp_path / "segments.jsonl.gz", docs)
    cache = tmp_path / "cache"
    run(index_config(str(corpus), cache, "retriever=bm25", "index.num_shards=2", "index.chunk_words=null"))
    key = JsonlCorpus(str(corpus), chunk_words=None, hash_cache_dir=str(cache / "file_hashes")).key
    assert key.endswith("-whole")
    folder = next((cache / "index").glob(f"*__{key}"))
    assert (folder / "COMPLETE").is_file()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["passages"] == len(docs)
