"""The text filters, their counts and the tolerant parsers (no LLM)."""

from __future__ import annotations

import numpy as np
import pytest

from rag.core.errors import ConfigError
from rag.datagen.filters import Candidate, Filters, support_overlap, tally
from rag.datagen.replies import parse_pair, parse_yes_no

DOC = "The Vltava is the longest river in the Czech Republic. It flows through Prague, where Charles Bridge spans it."


def _cand(question: str, answer: str, number: int = 0) -> Candidate:
    return Candidate(slot=0, number=number, question=question, answer=answer, shown=[DOC])


def test_text_filters_reject_in_order_and_count_what_they_checked():
    filters = Filters({"length": {"question_words": [3, 20], "answer_words": [1, 20]},
                       "support": {"min_overlap": 0.6}})
    cands = [_cand("Which river flows through Prague?", "The Vltava."),
             _cand("According to the document, which river is longest?", "The Vltava."),
             _cand("River?", "The Vltava."),
             _cand("Which river flows through Prague?", "The Danube, near Vienna."),
             _cand("What spans the river in Prague?", "Charles Bridge spans the Vltava in Prague.")]
    filters.text_checks(cands)
    assert [c.rejected_by for c in cands] == [None, "phrasing", "length", "support", None]
    assert tally(cands) == {"phrasing": {"checked": 5, "rejected": 1}, "length": {"checked": 4, "rejected": 1},
                            "support": {"checked": 3, "rejected": 1}}
    assert cands[3].detail["support_overlap"] == 0.0


def test_near_duplicates_by_cosine_and_disabled_filters():
    filters = Filters({"near_duplicate": {"max_cosine": 0.9}, "phrasing": {"enabled": False}})
    assert "phrasing" not in filters.enabled
    cands = [_cand("a b c d", "x"), _cand("e f g h", "y")]
    vectors = np.array([[1.0, 0.0], [0.6, 0.8]], dtype=np.float32)
    kept = np.array([[0.0, 1.0]], dtype=np.float32)
    filters.near_duplicates(cands, vectors, kept)
    assert [c.rejected_by for c in cands] == [None, None]  # cosines 0.0 and 0.8
    filters.near_duplicates([_cand("q r s t", "z")], np.array([[0.0, 1.0]], dtype=np.float32), kept)
    assert filters.is_duplicate(np.array([0.0, 1.0]), [kept[0]])


def test_support_overlap_counts_content_words_only():
    assert support_overlap("The Vltava flows through Prague", [DOC]) == 1.0
    assert support_overlap("the and of", [DOC]) == 0.0
    assert support_overlap("Vltava Danube", [DOC]) == 0.5


def test_bad_filter_settings_are_config_errors():
    with pytest.raises(ConfigError, match="unknown filter"):
        Filters({"spelling": {}})
    with pytest.raises(ConfigError, match=r"length\.answer_words: need 0 <= min <= max"):
        Filters({"length": {"answer_words": [5, 2]}})


def test_tolerant_parsers():
    assert parse_pair('{"question": "Who?", "answer": "Her."}') == ("Who?", "Her.")
    assert parse_pair('Sure! ```json\n{"Question": "Who  wrote\\nit?", "Answer": "Me"}```') == ("Who wrote it?", "Me")
    assert parse_pair("Question: Where is it?\nAnswer: In Prague.") == ("Where is it?", "In Prague.")
    assert parse_pair('{"question": "Who?", "answer": ""}') is None
    assert parse_pair("{") is None and parse_pair("") is None
    assert parse_yes_no('{"answerable": "yes"}') is True
    assert parse_yes_no('{"answerable": "No."}') is False
    assert parse_yes_no("yes, it is") is True
    assert parse_yes_no('{"answerable": "maybe"}') is None
