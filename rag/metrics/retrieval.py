"""Gold-document recall@k: a gold document counts as found when any of its passages is in the top k.

For questions with several gold documents (DataMorgana two-doc, HotpotQA, MuSiQue) we report "any" (at least
one gold document found) and "all" (every gold document found), as RAGtifier's Fig. 4 does for multi-hop.
"""

from __future__ import annotations

from rag.records import ScoredPassage


def gold_found(gold_doc_ids: list[str], ranked: list[ScoredPassage], k: int) -> tuple[float, float, float]:
    """(fraction of gold docs found, any found, all found) in the top k; (nan-free) zeros for no gold."""
    if not gold_doc_ids:
        return 0.0, 0.0, 0.0
    top_docs = {p.passage.doc_id for p in ranked[:k]}
    found = [d in top_docs for d in gold_doc_ids]
    return sum(found) / len(found), float(any(found)), float(all(found))
