"""Citation quality against gold documents: our own gold-document variant of citation precision and recall.

ALCE (Gao et al., EMNLP 2023) judges citations with an NLI model; here a citation is right when it names a gold
document of the question (HotpotQA's supporting paragraphs, MuSiQue's supporting ones, LiveRAG's DataMorgana
documents), which needs no model and no human label. Per answer, over its cited sentences (`record.sentences`:
a cited strategy's own or the attribution stage's; else the answer's `[n]` markers read as the prompt's passages,
as the TREC export reads them):

- `citation_gold_precision`: share of citations (sentence, document) that name a gold document (no citation:
  unscored);
- `citation_gold_recall`: share of sentences with at least one gold citation;
- `citation_coverage`: share of sentences citing anything (no gold needed: TREC RAG 2026 wants every sentence
  cited).

Read from the stored record, so it scores resumed answers too and a folder's fingerprint leaves it out.
"""

from __future__ import annotations

from rag.core.text import marked_sentences
from rag.metrics.base import RecordMetric, RunShape
from rag.metrics.registry import BUILTIN, MetricSpec
from rag.records import AnswerRecord

NAMES = ("gold_precision", "gold_recall", "coverage")


def record_citations(record: AnswerRecord) -> list[list[str]]:
    """Each non-blank sentence's cited document ids (the order the TREC export uses)."""
    if record.sentences is not None:
        return [[str(d) for d in s.get("citations") or []] for s in record.sentences
                if str(s.get("text") or "").strip()]
    label_doc = {n: (p.doc_IDs or [""])[0] for n, p in enumerate(record.passages, start=1)}
    return [[label_doc[n] for n in labels if n in label_doc] for _, labels in marked_sentences(record.answer)]


class CitationGold(RecordMetric):
    """Gold-document citation precision and recall, and the share of sentences cited."""

    key_prefix = "citation_"

    def __init__(self, name: str = "citation"):
        super().__init__(name)

    def score_record(self, record: AnswerRecord, qrels_level: str) -> dict[str, float]:
        cited = record_citations(record)
        if not cited:
            return {}
        out = {"citation_coverage": sum(bool(c) for c in cited) / len(cited)}
        gold = set(map(str, record.gold_doc_ids))
        if not gold:
            return out
        out["citation_gold_recall"] = sum(any(d in gold for d in c) for c in cited) / len(cited)
        citations = [d for c in cited for d in c]
        if citations:
            out["citation_gold_precision"] = sum(d in gold for d in citations) / len(citations)
        return out

    def run_metrics(self, shape: RunShape) -> dict[str, str]:
        return {f"citation_{n}": f"citation/{n}" for n in NAMES}

    def metric_specs(self) -> list[MetricSpec]:
        return [s for s in BUILTIN if s.pattern == "citation/{metric}/{split}"]
