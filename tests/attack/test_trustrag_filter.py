"""TrustRAG's n-gram step as its `group_n_gram_filtering` orders it (rag.generate.defense.ngram_duplicates)."""

from __future__ import annotations

from rag.generate.defense import ngram_duplicates, rouge_l


def test_ngram_duplicates_follow_trustrags_order_not_every_pair():
    """A~B and B~C overlap, A and C do not; D is close to A only. TrustRAG drops A and B (the first pair), keeps C
    (B was already dropped, and C is far from the first dropped passage, A) and drops D (close to A). Dropping
    every member of every pair would drop C too."""
    a, b, c, d = ["a", "b", "c", "d"], ["c", "d", "e", "f"], ["e", "f", "g", "h"], ["a", "b", "c", "z"]
    assert rouge_l(a, b) == 0.5 and rouge_l(b, c) == 0.5 and rouge_l(a, c) == 0.0
    assert rouge_l(a, d) == 0.75 and rouge_l(b, d) == 0.25 and rouge_l(c, d) == 0.0
    assert ngram_duplicates([a, b, c, d], [0, 1, 2, 3], 0.25) == {0, 1, 3}
    assert ngram_duplicates([a, c], [0, 1], 0.25) == set()
