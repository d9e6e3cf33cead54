"""The scale measurements of benchmarks/index_bench.py build what they say, at a size a test can afford: the
synthetic BM25 parts have exactly the projected vocabulary, and the IVF path trains, adds part by part and merges
with rag.index's own code."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from rag.index.bm25 import PART_TERMS, TF, Bm25Builder
from rag.retrieve.shards import VOCAB, StringTable

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("index_bench", ROOT / "benchmarks" / "index_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_synthetic_parts_have_the_projected_vocabulary_and_merge_exactly(bench, tmp_path):
    parts = bench.synthetic_parts(tmp_path / "parts", parts=5, part_terms=1000, vocab=3000, seed=3)
    assert [n for _, n in parts] == [1000] * 5
    out = tmp_path / "merged"
    out.mkdir()
    size, df, global_ids = Bm25Builder.global_vocabulary([(Path(f), n) for f, n in parts], out)
    assert size == 3000
    vocab = StringTable(out, VOCAB, size)
    terms = [vocab.raw(i) for i in range(size)]
    assert terms == sorted(terms) and len(set(terms)) == size
    expected = np.zeros(size, dtype=np.int64)
    for (folder, n), ids in zip(parts, global_ids):
        table = StringTable(Path(folder), PART_TERMS, n)
        assert np.all(np.diff(ids) > 0)  # a part's sorted terms keep their order in the vocabulary
        assert all(terms[ids[i]] == table.raw(i) for i in range(0, n, 97))
        np.add.at(expected, ids, np.diff(np.load(Path(folder) / TF[2])))
    assert np.array_equal(df, expected)  # document frequencies summed over the parts that hold the term


def test_encoded_terms_sort_as_their_ids(bench):
    ids = np.array([0, 9, 10, 255, 4096, 2**31 - 1])
    blob, offsets = bench.encode_terms(ids)
    strings = [blob[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
    assert strings[1] == b"00000009" and strings[3] == b"000000ff" and strings == sorted(strings)


def test_ivf_merge_trains_adds_per_part_and_merges_with_rag_index(bench, tmp_path):
    ann = {"type": "ivfpq", "nlist": 16, "pq_m": 4, "pq_nbits": 6, "train_size": 1000, "nprobe": 4}
    row = bench.ivf_merge(tmp_path, size=2500, dim=16, ann=ann, part_docs=1000, queries=5)
    assert row["factory"] == "IVF16,PQ4x6" and row["units"] == 3
    assert row["ids_in_range"] and row["same_as_units"] and row["merge_peak_rss_mb"] > 0
    assert row["ms_per_query_nprobe"][4] > 0
    assert not (tmp_path / "ivf-2500-16").exists()  # the synthetic index is removed after measuring


def test_vocab_fits_heaps_on_the_sample_and_times_parts_of_the_projected_sizes(bench, tmp_path, fineweb):
    result = bench.vocab(tmp_path, passages=200_000, part_docs=50_000, scale=1.0, parts=None)
    heaps, row = result["heaps"], result["row"]
    assert heaps["passages"] == 28_082 and 0.4 < heaps["beta"] < 0.9
    fitted = heaps["K"] * heaps["tokens"] ** heaps["beta"]
    assert fitted == pytest.approx(heaps["terms"], rel=0.05)  # the law describes the sample it was fitted on
    projected = int(heaps["K"] * (heaps["tokens_per_passage"] * 200_000) ** heaps["beta"])
    assert row["parts"] == 4 and row["vocab"] == pytest.approx(projected, abs=4)  # the core rounds down
    assert row["entries"] == 4 * row["part_terms"] and row["peak_rss_mb"] > 0
