"""Hybrid retriever: reciprocal rank fusion, its cache key, and a run over real BM25 + dense retrievers."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag.records import Passage, ScoredPassage
from rag.retrieve.base import Retriever
from rag.retrieve.hybrid import HybridRetriever, reciprocal_rank_fusion


class FixedRetriever(Retriever):
    """Answers every query with a fixed ranking of passage ids (records the depth it was asked for)."""

    def __init__(self, name: str, ids: list[str], remote: bool = False):
        super().__init__(k=10)
        self.name, self.ids, self.remote = name, ids, remote
        self.depths: list[int] = []
        self.prepared_with = None

    @property
    def key(self) -> str:
        return self.name

    @property
    def stores_text(self) -> bool:
        return self.remote or self.corpus is None

    def prepare(self, corpus, cache_dir) -> None:
        super().prepare(corpus, cache_dir)
        self.prepared_with = (corpus, cache_dir)

    def search(self, queries, k):
        self.depths.append(k)
        ranked = [ScoredPassage(Passage(pid, pid.split("#")[0], f"text of {pid}"), 1.0 / (i + 1), i + 1)
                  for i, pid in enumerate(self.ids[:k])]
        return [list(ranked) for _ in queries]


def test_rrf_scores_and_order():
    a = FixedRetriever("a", ["x", "y", "z"])
    b = FixedRetriever("b", ["z", "x", "w"])
    [fused] = HybridRetriever(a, b, k=4).search(["q"], k=4)
    expected = {"x": 1 / 61 + 1 / 62, "z": 1 / 63 + 1 / 61, "y": 1 / 62, "w": 1 / 63}
    assert [p.passage.passage_id for p in fused] == ["x", "z", "y", "w"]
    assert [p.score for p in fused] == pytest.approx([expected[p.passage.passage_id] for p in fused])
    assert [p.rank for p in fused] == [1, 2, 3, 4]


def test_rrf_k_weights_ties_and_cut():
    a = FixedRetriever("a", ["x", "y"])
    b = FixedRetriever("b", ["y", "x"])
    # equal fused scores: the first retriever's order wins the tie
    assert [p.passage.passage_id for p in HybridRetriever(a, b).search(["q"], 2)[0]] == ["x", "y"]
    # a heavier second list flips it; rrf_k changes the scores
    weighted = HybridRetriever(a, b, weights=[1.0, 2.0]).search(["q"], 2)[0]
    assert [p.passage.passage_id for p in weighted] == ["y", "x"]
    shallow = HybridRetriever(a, b, rrf_k=1).search(["q"], 1)[0]  # each list searched to depth 1 only
    assert len(shallow) == 1 and shallow[0].score == pytest.approx(1 / 2)
    deep = HybridRetriever(a, b, rrf_k=1, depth=2).search(["q"], 1)[0]
    assert len(deep) == 1 and deep[0].score == pytest.approx(1 / 2 + 1 / 3)


def test_depth_controls_sub_retrievers():
    a, b = FixedRetriever("a", list("abcdefgh")), FixedRetriever("b", list("hgfedcba"))
    HybridRetriever(a, b).search(["q"], 3)
    HybridRetriever(a, b, depth=8).search(["q"], 3)
    assert a.depths == [3, 8] and b.depths == [3, 8]
    # a passage found deep in both lists beats one found at the top of one list only
    fused = reciprocal_rank_fusion([a.search(["q"], 8)[0], b.search(["q"], 8)[0]])
    assert len(fused) == 8


def test_key_names_both_retrievers_and_stays_short():
    a, b = FixedRetriever("bm25-x", ["x"]), FixedRetriever("dense-y", ["x"])
    key = HybridRetriever(a, b).key
    assert "bm25-x" in key and "dense-y" in key and "rrf60" in key
    assert HybridRetriever(a, b, rrf_k=10).key != key
    assert HybridRetriever(b, a).key != key
    long_a = FixedRetriever("a" * 90, ["x"])
    long_b = FixedRetriever("a" * 90 + "b", ["x"])
    k1, k2 = HybridRetriever(long_a, b).key, HybridRetriever(long_b, b).key
    assert k1 != k2 and len(k1) <= 100 and len(k2) <= 100


def test_prepare_and_stores_text(tmp_path):
    local, remote = FixedRetriever("a", ["x"]), FixedRetriever("b", ["x"], remote=True)
    corpus = object()
    hybrid = HybridRetriever(local, FixedRetriever("c", ["x"]))
    hybrid.prepare(corpus, tmp_path)
    assert local.prepared_with == (corpus, tmp_path) and not hybrid.stores_text
    mixed = HybridRetriever(local, remote)
    mixed.prepare(corpus, tmp_path)
    assert mixed.stores_text  # a remote index's passages are not in the dataset corpus


@pytest.mark.slow
def test_real_bm25_and_dense_over_hotpotqa(data_dir: Path, shared_cache: Path, minilm_path: str):
    from rag.data.corpus import HotpotQACorpus
    from rag.data.questions import HotpotQAQuestions
    from rag.embed import Embedder
    from rag.retrieve.bm25 import BM25Retriever
    from rag.retrieve.dense import DenseRetriever

    corpus = HotpotQACorpus(path="hotpotqa_musique/hotpotqa_train_corpus.json", data_dir=str(data_dir))
    questions = HotpotQAQuestions(path="hotpotqa_musique/hotpotqa_train.json", data_dir=str(data_dir)).load()
    bm25 = BM25Retriever()
    dense = DenseRetriever(Embedder("all-MiniLM-L6-v2", model_path=minilm_path, max_seq_length=256))
    hybrid = HybridRetriever(bm25, dense, depth=20)
    hybrid.prepare(corpus, shared_cache)
    texts = [q.question for q in questions]

    fused = hybrid.search(texts, 10)
    sparse, semantic = bm25.search(texts, 20), dense.search(texts, 20)
    for ranked, a, b in zip(fused, sparse, semantic):
        assert len(ranked) == 10 and len({p.passage.passage_id for p in ranked}) == 10
        ranks_a = {p.passage.passage_id: p.rank for p in a}
        ranks_b = {p.passage.passage_id: p.rank for p in b}
        for p in ranked:  # every fused score is the RRF sum over the lists that found the passage
            expected = sum(1 / (60 + r[p.passage.passage_id]) for r in (ranks_a, ranks_b) if p.passage.passage_id in r)
            assert p.score == pytest.approx(expected)
        assert [p.score for p in ranked] == sorted((p.score for p in ranked), reverse=True)
        if a[0].passage.passage_id == b[0].passage.passage_id:
            assert ranked[0].passage.passage_id == a[0].passage.passage_id

    def recall(results):
        return sum(len(set(q.gold_doc_ids) & {p.passage.doc_id for p in r[:10]}) / len(q.gold_doc_ids)
                   for q, r in zip(questions, results)) / len(questions)

    # fusion must not do worse than the weaker of its inputs on this multi-hop set
    assert recall(fused) >= min(recall(sparse), recall(semantic))
    assert "bm25" in hybrid.key and "dense" in hybrid.key
