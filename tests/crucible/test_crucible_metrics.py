"""Crucible's five metrics on hand-worked answers, sentence/citation extraction from records, and the export."""

from __future__ import annotations

import json

import pytest

from eval.crucible_metrics import (
    JudgedSentence,
    answer_sentences,
    best_label,
    crucible_scores,
    crucible_summary,
)
from rag.export.trec import export, to_neuclir, to_trec


def _s(nuggets: set[int], label: str | None, cites: tuple[str, ...] = ("d1",)) -> JudgedSentence:
    return JudgedSentence("x.", list(cites) if label is not None else [], nuggets, label)


def test_hand_worked_answer_of_four_sentences():
    # N = 5 nuggets. s1 covers {0, 1}, s2 covers {1} (nothing new), s3 covers nothing, s4 covers {3}.
    # covered = {0, 1, 3}: recall 3/5, density 3/4; novel sentences s1, s4: 2/4; relevant s1, s2, s4: 3/4;
    # citations: support (1) + partial (0.5) + none (0) + uncited (0) = 1.5 / 4.
    sentences = [_s({0, 1}, "support"), _s({1}, "partial"), _s(set(), "none"), _s({3}, None)]
    scores = crucible_scores(sentences, 5)
    assert scores == pytest.approx({"nugget_recall": 0.6, "nugget_density": 0.75, "sentence_novelty": 0.5,
                                    "relevant_sentences": 0.75, "citation_support": 0.375})


def test_hand_worked_single_sentence_and_empty_answer():
    assert crucible_scores([_s({2}, "support")], 4) == pytest.approx(
        {"nugget_recall": 0.25, "nugget_density": 1.0, "sentence_novelty": 1.0, "relevant_sentences": 1.0,
         "citation_support": 1.0})
    assert set(crucible_scores([], 3).values()) == {0.0}
    with pytest.raises(ValueError, match="at least one nugget"):
        crucible_scores([_s({0}, "support")], 0)


def test_novelty_counts_a_sentence_that_adds_any_new_nugget():
    # s1 {0}, s2 {0, 1} adds 1 -> novel, s3 {0, 1} adds nothing
    scores = crucible_scores([_s({0}, None), _s({0, 1}, None), _s({1, 0}, None)], 2)
    assert scores["sentence_novelty"] == pytest.approx(2 / 3)
    assert scores["nugget_density"] == pytest.approx(2 / 3)
    assert scores["citation_support"] == 0.0  # nothing cited


def test_best_label_over_cited_passages():
    assert best_label(["none", "partial"]) == "partial"
    assert best_label([None, "support", "partial"]) == "support"
    assert best_label([None]) == "none" and best_label([]) == "none"


def test_answer_sentences_for_cited_and_marker_and_uncited_records():
    passages = [{"doc_IDs": ["d1"], "passage": "Alpha text."}, {"doc_IDs": ["d2"], "passage": "Beta text."}]
    cited = {"answer": "ignored", "passages": passages, "context": ["d1#0", "d2#0"],
             "sentences": [{"text": "One.", "citations": ["d2"], "passage_id": "d2#0", "nugget": "q a",
                            "confidence": 0.5}]}
    assert answer_sentences(cited) == [{"text": "One.", "citations": ["d2"], "passages": ["Beta text."]}]
    marked = {"answer": "First [2]. Second [1, 2]. Third [9].", "passages": passages}
    assert answer_sentences(marked) == [
        {"text": "First.", "citations": ["d2"], "passages": ["Beta text."]},
        {"text": "Second.", "citations": ["d1", "d2"], "passages": ["Alpha text.", "Beta text."]},
        {"text": "Third.", "citations": [], "passages": []}]
    assert answer_sentences({"answer": "", "passages": passages}) == []


def test_summary_splits_by_hop_and_lists_uncited():
    base = {"nugget_density": 0.0, "sentence_novelty": 0.0, "relevant_sentences": 0.0, "citation_support": 0.0,
            "parse_failures": 1}
    records = [{"hop": "single", "crucible": {**base, "nugget_recall": 1.0, "uncited": True}},
               {"hop": "multi", "crucible": {**base, "nugget_recall": 0.5, "uncited": False}},
               {"hop": "multi", "crucible": {"skipped": True, "skip_reason": "no_passages"}}]
    out = crucible_summary(records)
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
