"""Crucible's five metrics on ARGUE's flow, on hand-worked answers, sentence/citation extraction from records, and the export."""

from __future__ import annotations

import json

import pytest

from eval.argue import JudgedSentence, answer_sentences, flow_summary
from eval.crucible_metrics import METRICS, crucible_scores
from rag.export.trec import export, to_neuclir, to_trec
from rag.records import AnswerRecord


def _cited(matched: set[int], *attested: bool | None) -> JudgedSentence:
    return JudgedSentence("x.", [f"d{k}" for k in range(len(attested))], list(attested), matched=matched)


def _uncited(matched: set[int], negative: bool) -> JudgedSentence:
    return JudgedSentence("x.", [], [], negative=negative, needs_citation=None if negative else False,
                          matched=matched)


def test_hand_worked_answer_of_five_sentences():
    # N = 5 nuggets.
    # s1 cites 1 passage that supports it, answers {0, 1}          -> credited {0, 1}
    # s2 cites 2 passages, one does not support it, answers {2}    -> penalised: no credit (ARGUE: any citation)
    # s3 cites 1 supporting passage, answers {1} (nothing new)     -> credited {1}
    # s4 cites nothing, no negative assertion, needs no citation   -> ignored, no credit
    # s5 cites 1 supporting passage, answers {3}                   -> credited {3}
    # credited = {0, 1, 3}: recall 3/5, density 3/5; novel s1, s5: 2/5; relevant s1, s3, s5: 3/5;
    # citation support: 4 of 5 citations support = 0.8
    sentences = [_cited({0, 1}, True), _cited({2}, True, False), _cited({1}, True), _uncited(set(), False),
                 _cited({3}, True)]
    scores = crucible_scores(sentences, 5)
    assert scores == pytest.approx({"nugget_recall": 0.6, "nugget_density": 0.6, "sentence_novelty": 0.4,
                                    "relevant_sentences": 0.6, "citation_support": 0.8})


def test_best_cited_passage_no_longer_earns_credit():
    """The earlier definition took the best cited passage and credited nuggets regardless of citations; ARGUE
    penalises a sentence when any cited passage fails to support it and credits only supported sentences."""
    mixed = _cited({0}, True, False)
    assert crucible_scores([mixed], 2) == pytest.approx(
        {"nugget_recall": 0.0, "nugget_density": 0.0, "sentence_novelty": 0.0, "relevant_sentences": 0.0,
         "citation_support": 0.5})
    uncited_match = _uncited({0}, False)  # answers a nugget but is an uncited, non-negative sentence
    assert crucible_scores([uncited_match], 2)["nugget_recall"] == 0.0


def test_hand_worked_single_sentence_and_empty_answer():
    assert crucible_scores([_cited({2}, True)], 4) == pytest.approx(
        {"nugget_recall": 0.25, "nugget_density": 1.0, "sentence_novelty": 1.0, "relevant_sentences": 1.0,
         "citation_support": 1.0})
    assert set(crucible_scores([], 3).values()) == {0.0}
    with pytest.raises(ValueError, match="at least one nugget"):
        crucible_scores([_cited({0}, True)], 0)


def test_novelty_counts_a_sentence_that_adds_any_new_nugget():
    # s1 {0}, s2 {0, 1} adds 1 -> novel, s3 {0, 1} adds nothing; a confirmed negative assertion counts too
    scores = crucible_scores([_cited({0}, True), _cited({0, 1}, True), _uncited({1, 0}, True)], 2)
    assert scores["sentence_novelty"] == pytest.approx(2 / 3)
    assert scores["nugget_density"] == pytest.approx(2 / 3)
    assert scores["citation_support"] == 1.0


def test_answer_sentences_for_cited_and_marker_and_uncited_records():
    passages = [{"doc_IDs": ["d1"], "passage": "Alpha text."}, {"doc_IDs": ["d2"], "passage": "Beta text."}]
    cited = {"answer": "ignored", "passages": passages, "context": ["d1#0", "d2#0"],
             "sentences": [{"text": "One.", "citations": ["d2"], "passage_id": "d2#0", "nugget": "q a",
                            "confidence": 0.5},
                           {"text": "Two.", "citations": ["d7"], "nugget": "q b", "confidence": 0.5}]}
    assert answer_sentences(cited) == [{"text": "One.", "citations": ["d2"], "passages": ["Beta text."]},
                                       {"text": "Two.", "citations": ["d7"], "passages": [""]}]
    marked = {"answer": "First [2]. Second [1, 2]. Third [9].", "passages": passages}
    assert answer_sentences(marked) == [
        {"text": "First.", "citations": ["d2"], "passages": ["Beta text."]},
        {"text": "Second.", "citations": ["d1", "d2"], "passages": ["Alpha text.", "Beta text."]},
        {"text": "Third.", "citations": ["invalid:[9]"], "passages": [""]}]  # [9] of 2: supports nothing
    assert answer_sentences({"answer": "", "passages": passages}) == []


def test_summary_splits_by_hop_and_lists_uncited():
    base = {"nugget_density": 0.0, "sentence_novelty": 0.0, "relevant_sentences": 0.0, "citation_support": 0.0,
            "parse_failures": 1}
    rows = [{"id": "a", "hop": "single", "crucible": {**base, "nugget_recall": 1.0, "uncited": True}},
            {"id": "b", "hop": "multi", "crucible": {**base, "nugget_recall": 0.5, "uncited": False}},
            {"id": "c", "hop": "multi", "crucible": {"skipped": True, "skip_reason": "no_passages"}}]
    records = [AnswerRecord.from_json(r) for r in rows]  # earlier files' top-level `crucible` loads into judges
    out = flow_summary(records, "crucible", METRICS)
    assert out["crucible/nugget_recall/all"] == 0.75
    assert out["crucible/nugget_recall/single"] == 1.0 and out["crucible/nugget_recall/multi"] == 0.5
    assert out["crucible/uncited_answers"] == 1 and out["crucible/skipped"] == 1
    assert out["crucible/n_scored"] == 2 and out["crucible/parse_failures"] == 2


def test_trec_and_neuclir_export_one_citation_per_sentence(tmp_path):
    record = {"id": 3, "question": "Q?", "answer": "A one. B two.",
              "passages": [{"doc_IDs": ["d1"], "passage": "x"}, {"doc_IDs": ["d2"], "passage": "y"}],
              "sentences": [{"text": "A one.", "citations": ["d2"], "nugget": "n", "confidence": 0.4},
                            {"text": "B two.", "citations": ["d9"], "nugget": "m", "confidence": 0.3}]}
    trec = to_trec(record, "r")
    assert trec["references"] == ["d1", "d2", "d9"]
    assert trec["answer"] == [{"text": "A one.", "citations": [1]}, {"text": "B two.", "citations": [2]}]
    assert to_neuclir(record, "r") == {"request_id": "3", "run_id": "r",
                                       "sentences": [{"text": "A one.", "citations": ["d2"]},
                                                     {"text": "B two.", "citations": ["d9"]}]}
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps(record) + "\n")
    assert export(answers, tmp_path / "out.jsonl", "r", "neuclir") == 1
    assert json.loads((tmp_path / "out.jsonl").read_text())["sentences"][1]["citations"] == ["d9"]
