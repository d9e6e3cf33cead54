"""Plain-text helpers several stages share, one copy each: cutting to a word count, and reading an answer's
sentences with their `[n]` passage markers (the TREC export and ARGUE read citations the same way)."""

from __future__ import annotations

import re

#: a sentence ends at . ! or ? followed by white space and a capital, digit, quote, parenthesis or `[`
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
#: a passage marker `[n]` or `[n, m]` (with the white space before it, removed with it)
_MARKER = re.compile(r"\s*\[(\d+(?:\s*,\s*\d+)*)\]")


def first_words(text: str | None, n: int | None) -> str:
    """The first `n` whitespace-separated words of `text`, joined by single spaces (every word for None)."""
    words = (text or "").split()
    return " ".join(words if n is None else words[:n])


def cut_words(text: str, max_words: int | None) -> str:
    """`text` stripped, cut to at most `max_words` whitespace tokens (an answer: LiveRAG allowed 200 tokens; a
    passage or query in a prompt); None or 0: no cut."""
    if not max_words:
        return text.strip()
    words = text.split()
    return text.strip() if len(words) <= max_words else " ".join(words[:max_words])


def split_sentences(text: str) -> list[str]:
    """An answer's sentences, stripped, empty ones left out."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def marked_sentences(text: str) -> list[tuple[str, list[int]]]:
    """(sentence without its markers, the passage labels it cites, each once in the order cited) of an answer
    whose sentences cite the prompt's passages as `[n]` (1-based); sentences left empty without markers are
    dropped."""
    out = []
    for sentence in split_sentences(text):
        labels = [int(n) for m in _MARKER.findall(sentence) for n in m.split(",")]
        stripped = _MARKER.sub("", sentence).strip()
        if stripped:
            out.append((stripped, list(dict.fromkeys(labels))))
    return out
