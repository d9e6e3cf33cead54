"""Answer extraction from free-form output: formats found, fallbacks named, never an exception."""

from __future__ import annotations

import pytest

from rag.generate.parsing import (
    ParsedAnswer,
    before_marker,
    clean_output,
    extract_answer,
    find_marker,
    first_paragraph,
    says_unknown,
    tag_content,
)


def test_clean_output_strips_echoed_labels_only_at_the_start():
    assert clean_output("  Answer: Final answer: Paris is the capital.\n") == "Paris is the capital."
    assert clean_output("The answer: Paris") == "The answer: Paris"
    assert clean_output(None) == ""


def test_tag_content_takes_last_complete_tag_or_an_open_one():
    assert tag_content("group A <ANSWER> x </ANSWER> then <answer>y</answer>", "ANSWER") == "y"
    assert tag_content("reasoning... <ANSWER> Paris", "ANSWER") == "Paris"  # closed by the stop sequence
    assert tag_content("no tags here", "ANSWER") is None


def test_extract_answer_marker_and_fallbacks():
    assert extract_answer("Doc 1 says so.\nFinal answer: Paris\n\nExample 3", marker="Final answer:") == \
        ParsedAnswer("Paris")
    assert extract_answer("Just a rationale.", marker="Final answer:") == \
        ParsedAnswer("Just a rationale.", parse_failed=True, fallback="whole_output")
    assert extract_answer("  ", marker="Final answer:") == ParsedAnswer("", parse_failed=True, fallback="empty_output")
    assert extract_answer("Final answer:", marker="Final answer:").fallback == "empty_output"


def test_extract_answer_tag_fallback_removes_tag_markup():
    parsed = extract_answer("Group 1 is reliable. <ANSWER>", tag="ANSWER")
    assert parsed == ParsedAnswer("Group 1 is reliable.", parse_failed=True, fallback="whole_output")
    assert extract_answer("<ANSWER>Rome</ANSWER>", tag="ANSWER") == ParsedAnswer("Rome")


def test_markers_unknown_and_paragraphs():
    assert find_marker("x So the final answer is: y Follow up: z", ["Follow up:", "So the final answer is:"]) == \
        ("So the final answer is:", len("x So the final answer is:"))
    assert find_marker("nothing", ["Follow up:"]) is None
    assert before_marker("a Final answer: b final answer: c", "Final answer:") == "a Final answer: b "
    assert before_marker("a Final answer: b", "Final answer:", last=False) == "a "
    assert says_unknown("Sorry, I don't know.") and says_unknown("I do not know")
    assert not says_unknown("I know this")
    assert first_paragraph("one\ntwo\n\nthree") == "one\ntwo"


@pytest.mark.parametrize("text", ["", "<ANSWER></ANSWER>", "\n\n\n", "Final answer:\n", "<ANSWER"])
def test_extract_answer_never_raises(text):
    parsed = extract_answer(text, marker="Final answer:", tag="ANSWER")
    assert parsed.parse_failed is (parsed.fallback is not None)
