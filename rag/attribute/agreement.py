"""How far two attributions of the same answers agree: a check that a citation method is not arbitrary.

Both sides are answer records of the same answers (e.g. one run's records attributed by `embedding` and again by
`llm_support`). For every sentence the two split alike (same text at the same position), it counts the sentences
whose citation sets share a document (`overlap`) and those both leave uncited (`both_uncited`), and Cohen's kappa
of cite / no-cite over every (sentence, prompt document) pair: agreement beyond what each side's citing rate
alone gives by chance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rag.records import AnswerRecord


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float:
    """Cohen's kappa of two binary labelings of the same items; NaN without items, 1 when both are constant and
    equal (no disagreement possible to measure beyond chance, none found)."""
    n = len(a)
    if n == 0 or n != len(b):
        return math.nan
    observed = sum(x == y for x, y in zip(a, b)) / n
    pa, pb = sum(a) / n, sum(b) / n
    chance = pa * pb + (1 - pa) * (1 - pb)
    if chance >= 1.0:
        return 1.0 if observed == 1.0 else math.nan
    return (observed - chance) / (1 - chance)


def citation_agreement(first: Sequence[AnswerRecord], second: Sequence[AnswerRecord]) -> dict[str, Any]:
    """Agreement of two attributions of the same answers (records matched by id): `sentences` compared,
    `overlap` (share citing a common document), `both_uncited`, `kappa` over `pairs` (sentence, document of the
    prompt) cite / no-cite, and `answers_skipped` (absent on one side, no sentences, or split differently)."""
    others = {r.id: r for r in second}
    cites_a: list[bool] = []
    cites_b: list[bool] = []
    sentences = overlap = both_uncited = skipped = 0
    for record in first:
        other = others.get(record.id)
        mine, theirs = record.sentences or [], (other.sentences or []) if other is not None else []
        if not mine or [s.get("text") for s in mine] != [s.get("text") for s in theirs]:
            skipped += 1
            continue
        docs = list(dict.fromkeys((p.doc_IDs or [""])[0] for p in record.passages))
        for a, b in zip(mine, theirs):
            set_a, set_b = set(map(str, a.get("citations") or [])), set(map(str, b.get("citations") or []))
            sentences += 1
            overlap += bool(set_a & set_b)
            both_uncited += not set_a and not set_b
            for doc in docs:
                cites_a.append(doc in set_a)
                cites_b.append(doc in set_b)
    return {"sentences": sentences, "overlap": overlap / sentences if sentences else math.nan,
            "both_uncited": both_uncited / sentences if sentences else math.nan,
            "kappa": cohen_kappa(cites_a, cites_b), "pairs": len(cites_a), "answers_skipped": skipped}
