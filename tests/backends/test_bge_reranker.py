"""BGE reranker through the real FlagEmbedding code, on a tiny randomly initialised XLM-RoBERTa saved to disk."""

from __future__ import annotations

import sys

import pytest

from rag.records import Passage, ScoredPassage
from rag.rerank.bge import BGEReranker
from tests.backends.tiny_models import build_tiny_xlmr

QUERIES = ["what is the capital of france", "who wrote the iliad", "largest planet of the solar system"]
PASSAGES = [
    ["paris is the capital and largest city of france", "the eiffel tower is in paris",
     "berlin is the capital of germany"],
    ["homer is the author of the iliad and the odyssey", "the iliad is an ancient greek epic poem"],
    [],
    # (the third question has no candidates: it must still get an empty score list)
]


def _candidates() -> list[list[ScoredPassage]]:
    return [[ScoredPassage(Passage(f"q{qi}p{i}", f"d{qi}{i}", text, title=f"T{qi}{i}"), 0.0, i + 1)
             for i, text in enumerate(texts)] for qi, texts in enumerate(PASSAGES)]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> str:
    import FlagEmbedding  # noqa: F401  (installed by `make setup`: missing fails, never skips)
    texts = QUERIES + [t for texts in PASSAGES for t in texts]
    return str(build_tiny_xlmr(tmp_path_factory.mktemp("tiny-xlmr"), texts))


def _reference_scores(path: str, pairs: list[tuple[str, str]]) -> list[float]:
    """Score pairs directly with transformers, independently of FlagEmbedding and of our batching."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    out = []
    with torch.no_grad():
        for query, passage in pairs:
            enc = tokenizer(query, passage, truncation="only_second", max_length=512, return_tensors="pt")
            out.append(float(model(**enc).logits.view(-1)[0]))
    return out


def test_cross_encoder_scores_match_the_model(tiny_model):
    reranker = BGEReranker(model="tiny-xlmr", model_path=tiny_model, batch_size=2, use_fp16=True, k=1)
    candidates = _candidates()
    scores = reranker.score(QUERIES, candidates)

    assert [len(s) for s in scores] == [3, 2, 0]
    pairs = [(q, p.passage.text) for q, cands in zip(QUERIES, candidates) for p in cands]
    flat = [s for row in scores for s in row]
    assert flat == pytest.approx(_reference_scores(tiny_model, pairs), rel=1e-4, abs=1e-5)
    assert len(set(flat)) == len(flat)  # random weights: every pair scores differently
    assert reranker.stats["pairs"] == 5 and reranker.stats["questions"] == 3
    assert reranker.stats["seconds_per_question"] > 0

    reranked = reranker.rerank(QUERIES, candidates)
    for row, ranked in zip(scores, reranked):
        assert [p.score for p in ranked] == sorted(row, reverse=True)
        assert [p.rank for p in ranked] == list(range(1, len(row) + 1))
    assert len(reranker.cut(reranked[0])) == 1


def test_titles_change_the_input(tiny_model):
    plain = BGEReranker(model="tiny-xlmr", model_path=tiny_model).score(QUERIES[:1], _candidates()[:1])
    titled_reranker = BGEReranker(model="tiny-xlmr", model_path=tiny_model, with_title=True)
    titled = titled_reranker.score(QUERIES[:1], _candidates()[:1])
    assert plain != titled
    assert titled_reranker.key != BGEReranker(model="tiny-xlmr").key


def test_m3_mode_runs_flagembedding_m3(tiny_model):
    m3 = BGEReranker(model="tiny-xlmr", model_path=tiny_model, mode="m3", batch_size=2)
    scores = m3.score(QUERIES, _candidates())
    assert [len(s) for s in scores] == [3, 2, 0]
    assert all(-10 < s < 10 for row in scores for s in row)
    cross = BGEReranker(model="tiny-xlmr", model_path=tiny_model).score(QUERIES, _candidates())
    assert scores != cross
    assert m3.key != BGEReranker(model="tiny-xlmr").key


def test_missing_flagembedding_is_explained(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "FlagEmbedding", None)  # makes `import FlagEmbedding` fail
    reranker = BGEReranker(model_path=str(tmp_path))
    with pytest.raises(ImportError, match=r"pip install 'FlagEmbedding==1\.4\.2'"):
        reranker.score(["q"], [[ScoredPassage(Passage("p", "d", "t"), 0.0, 1)]])


def test_config_checks():
    with pytest.raises(ValueError, match="mode"):
        BGEReranker(mode="listwise")
    assert BGEReranker(max_length=256).key != BGEReranker().key
