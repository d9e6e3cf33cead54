"""Issue 34, item 4: the IVF / IVF-PQ training sample is drawn uniformly over passages, in one seeded pass
(rag.index.dense.reservoir_sample, Li's Algorithm L), not from the passages of the first of some random documents
(which took about the first half of a corpus)."""

from __future__ import annotations

import numpy as np
from scipy.stats import chisquare

from rag.index.dense import reservoir_sample


def _stream(n_docs: int):
    """Passages of documents of 1-5 passages each, in corpus order: (document, passage number)."""
    for doc in range(n_docs):
        for part in range(1 + doc % 5):
            yield doc, part


def test_every_passage_is_equally_likely_wherever_it_sits():
    passages = list(_stream(200))  # 600 passages
    counts = np.zeros(len(passages))
    position = {p: i for i, p in enumerate(passages)}
    for seed in range(600):
        sample, seen = reservoir_sample(iter(passages), 60, seed)
        assert seen == len(passages) and len(set(sample)) == 60
        counts[[position[p] for p in sample]] += 1
    assert counts.sum() == 600 * 60
    assert chisquare(counts).pvalue > 0.001  # each passage drawn 60 times in expectation
    half = len(passages) // 2
    assert 0.45 < counts[half:].sum() / counts.sum() < 0.55  # the end of the corpus as much as its start
    by_doc = {}
    for (doc, _), c in zip(passages, counts):
        by_doc[doc] = by_doc.get(doc, 0) + c
    # a document weighs by its passages: 5-passage documents are drawn about 5 times as often as 1-passage ones
    five = np.mean([c for d, c in by_doc.items() if d % 5 == 4])
    one = np.mean([c for d, c in by_doc.items() if d % 5 == 0])
    assert 4.0 < five / one < 6.0


def test_the_sample_is_seeded_and_a_short_stream_is_taken_whole():
    stream = list(_stream(100))
    assert reservoir_sample(iter(stream), 30, 7) == reservoir_sample(iter(stream), 30, 7)
    assert reservoir_sample(iter(stream), 30, 7)[0] != reservoir_sample(iter(stream), 30, 8)[0]
    assert reservoir_sample(iter(stream[:10]), 30, 0) == (stream[:10], 10)
