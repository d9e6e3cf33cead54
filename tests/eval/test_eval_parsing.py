"""Tolerant parsing: what free-text judges really write, and what must count as a failure."""

from __future__ import annotations

import pytest

from rag.core.parsing import extract_json_object, parse_fields, parse_label_list, parse_string_list

LIVERAG = {"correctness": (2, 1, 0, -1), "faithfulness": (1, 0, -1)}
ASSIGN = ("support", "partial_support", "not_support")


@pytest.mark.parametrize("text,expected", [
    ('{"correctness": 2, "faithfulness": 1}', {"correctness": 2, "faithfulness": 1}),
    ('Sure! ```json\n{"correctness": -1, "faithfulness": 0}\n``` done', {"correctness": -1, "faithfulness": 0}),
    ("{\u201dcorrectness\u201d: 1, \u201dfaithfulness\u201d: -1}", {"correctness": 1, "faithfulness": -1}),
    ('{"Correctness": "2", "Faithfulness": 1.0}', {"correctness": 2, "faithfulness": 1}),
    ("Correctness: 2\n**Faithfulness:** -1", {"correctness": 2, "faithfulness": -1}),
    ('{"correctness": 1,\n "faithfulness": 1,}', {"correctness": 1, "faithfulness": 1}),  # trailing comma
    ("correctness score: 2\nfaithfulness score: 0", {"correctness": 2, "faithfulness": 0}),
    ("**Correctness Score**: -1, Faithfulness = 1", {"correctness": -1, "faithfulness": 1}),
    ("correctness: 2. faithfulness: 1.", {"correctness": 2, "faithfulness": 1}),  # full stops, not decimals
])
def test_parse_fields_accepts(text, expected):
    assert parse_fields(text, LIVERAG) == expected


@pytest.mark.parametrize("text", [
    "", "The answer is good.", '{"correctness": 3, "faithfulness": 1}', '{"correctness": 2}',
    "correctness: high, faithfulness: 1", '{"correctness": true, "faithfulness": 1}',
    # integers only: never truncated to 1 or 0
    '{"correctness": 1.5, "faithfulness": 1}', "correctness: 0.9\nfaithfulness: 1",
    '{"correctness": "1.5", "faithfulness": 1}', "Correctness: 1.5 Faithfulness: 1",
])
def test_parse_fields_rejects(text):
    assert parse_fields(text, LIVERAG) is None


def test_parse_fields_labels_and_explanation():
    out = parse_fields('{"explanation": "B misses the date.", "verdict": "Better"}',
                       {"verdict": ("better", "tie", "worse")}, free_text=("explanation",))
    assert out == {"verdict": "better", "explanation": "B misses the date."}
    assert parse_fields("Both are fine.\nVerdict: tie", {"verdict": ("better", "tie", "worse")}) == {"verdict": "tie"}


def test_extract_first_object_with_raw_newlines():
    assert extract_json_object('x {"a": "line\nbreak"} {"b": 1}') == {"a": "line\nbreak"}


def test_string_and_label_lists():
    assert parse_string_list("['Paris is the capital', \"it is in France\"]") == ["Paris is the capital",
                                                                                  "it is in France"]
    assert parse_string_list('{"nuggets": ["a", "b"]}') == ["a", "b"]
    assert parse_string_list("no list here") is None
    assert parse_label_list('{"labels": ["support", "Partial Support", "not_support"]}', 3, ASSIGN) == list(ASSIGN)
    assert parse_label_list("support\nnot support\npartial_support", 3, ASSIGN) == ["support", "not_support",
                                                                                    "partial_support"]
    assert parse_label_list('["support", "support", "support", "support"]', 3, ASSIGN) == ["support"] * 3
    assert parse_label_list('["support", "support"]', 3, ASSIGN) is None  # too few labels: never zip-truncate
    assert parse_label_list('["support", "maybe", "support"]', 3, ASSIGN) is None
