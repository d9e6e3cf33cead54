"""The attribution interface: answers in, every sentence with the passages that support it out.

Data flows ... -> generate -> attribute -> metrics. An `Attribution` scores each (answer sentence, prompt passage)
pair with a support strength; a sentence cites the passages at or above the method's `threshold`, strongest first
(ties: the better-ranked passage), at most `max_citations` documents (TREC RAG 2026 allows three). The result goes
where the cited strategies (Crucible, GINGER) put theirs, the record's `sentences` (`{text, citations: [doc id],
support: [strength]}`), so the TREC exports write cited sentences for every strategy; `steps["attribution"]` says
which method attributed and keeps every pair's strength. Records that already have `sentences` (a strategy that
cites by itself) and empty answers are left untouched; `[n]` markers a model wrote are read as sentence boundaries
only (the method's citations replace them).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rag.core.text import marked_sentences
from rag.records import AnswerRecord

if TYPE_CHECKING:
    from rag.llm.base import LLMEngine

#: TREC RAG 2026's limit of citations per sentence (rag/export/trec.py RAG26_CITATIONS)
MAX_CITATIONS = 3


@dataclass(frozen=True)
class Candidate:
    """One passage of the prompt an answer sentence may cite: its ids, text and rank (1 = best ranked)."""

    passage_id: str
    doc_id: str
    text: str
    rank: int


@dataclass
class AttributionItem:
    """One answer to attribute: its sentences (markers removed) and the passages its prompt held, best first."""

    sentences: list[str]
    candidates: list[Candidate]


@dataclass
class Support:
    """A method's verdict on one answer: `strength[s][c]` for sentence s and candidate c (higher: more support),
    and whatever the method wants kept beside it in the record's steps (LLM labels, unreadable replies)."""

    strength: list[list[float]]
    details: dict[str, Any]


def prompt_candidates(record: AnswerRecord) -> list[Candidate]:
    """The passages the generator saw, best-ranked first (`AnswerRecord.ranked_passages`), with their doc ids."""
    docs = [(p.doc_IDs or [""])[0] for p in record.passages]
    ids = [str(i) for i in record.context]
    by_id = dict(zip(ids, docs)) if len(ids) == len(docs) and len(set(ids)) == len(ids) else {}
    by_text = dict(zip(record.passage_texts(), docs))  # records without (distinct) passage ids
    return [Candidate(passage_id, str(by_id.get(passage_id) or by_text.get(text) or passage_id), text, rank)
            for rank, passage_id, text in record.ranked_passages()]


def answer_sentences(answer: str) -> list[str]:
    """The answer's sentences as the TREC export splits them (`rag.core.text.marked_sentences`), markers removed."""
    return [text for text, _ in marked_sentences(answer)]


def cite(strengths: Sequence[float], candidates: Sequence[Candidate], threshold: float,
         max_citations: int = MAX_CITATIONS, min_citations: int = 0) -> tuple[list[str], list[float]]:
    """(doc ids, their strengths) a sentence cites: candidates at or above `threshold`, strongest first (ties: the
    better rank), each document once (at its best passage's strength), at most `max_citations`; the strongest
    `min_citations` documents are cited whatever their strength (ALCE's post-hoc citation cites the best one)."""
    order = sorted(range(len(candidates)), key=lambda c: (-strengths[c], candidates[c].rank))
    docs: list[str] = []
    kept: list[float] = []
    for c in order:
        if len(docs) >= max_citations or (strengths[c] < threshold and len(docs) >= min_citations):
            break
        if candidates[c].doc_id not in docs:
            docs.append(candidates[c].doc_id)
            kept.append(round(float(strengths[c]), 4))
    return docs, kept


class Attribution(ABC):
    """One attribution method. Subclasses implement `support` and set `name` and `threshold`."""

    name: str = "attribution"
    #: a pair is cited when its strength is at least this
    threshold: float = 0.0
    #: whether `support` needs an engine (the pipeline hands it the run's, or `attribution.llm`)
    uses_llm: bool = False

    def __init__(self, max_citations: int = MAX_CITATIONS, min_citations: int = 0):
        if max_citations < 1:
            raise ValueError(f"attribution.max_citations must be >= 1, got {max_citations}")
        if not 0 <= min_citations <= max_citations:
            raise ValueError(f"attribution.min_citations must be in 0..max_citations ({max_citations}), "
                             f"got {min_citations}")
        self.max_citations = max_citations
        #: documents every sentence cites whatever their strength (its strongest; 1: ALCE's post-hoc citation)
        self.min_citations = min_citations

    @property
    def active(self) -> bool:
        """False for `attribution=none`: the pipeline skips the stage (and its timer) altogether."""
        return True

    @abstractmethod
    def support(self, items: list[AttributionItem], engine: LLMEngine | None) -> list[Support]:
        """One `Support` per item, for a whole batch of answers (one embedding pass, one batched LLM request)."""

    def settings(self) -> dict[str, Any]:
        """What the record's steps say about the method besides its name and threshold (model, prompt)."""
        return {}

    def attribute(self, records: list[AnswerRecord], engine_of: Callable[[], LLMEngine] | None = None) -> int:
        """Fill `sentences` of every record that has an answer and no sentences of its own; returns how many.
        `engine_of` is called only when the method uses an LLM and there is something to attribute."""
        todo = [r for r in records if r.sentences is None and r.answer.strip() and r.failure is None]
        items = [AttributionItem(answer_sentences(r.answer), prompt_candidates(r)) for r in todo]
        todo = [r for r, item in zip(todo, items) if item.sentences]
        items = [item for item in items if item.sentences]
        if not items:
            return 0
        engine = engine_of() if self.uses_llm and engine_of is not None else None
        for record, item, verdict in zip(todo, items, self.support(items, engine)):
            sentences = []
            for text, strengths in zip(item.sentences, verdict.strength):
                docs, kept = cite(strengths, item.candidates, self.threshold, self.max_citations, self.min_citations)
                sentences.append({"text": text, "citations": docs, "support": kept})
            record.sentences = sentences
            record.steps = {**(record.steps or {}), "attribution": {
                "method": self.name, "threshold": self.threshold, "min_citations": self.min_citations,
                **self.settings(),
                "passages": [c.passage_id for c in item.candidates],
                "strength": [[round(float(s), 4) for s in row] for row in verdict.strength], **verdict.details}}
        return len(items)


class NoAttribution(Attribution):
    """`attribution=none`: sentences stay as the strategy wrote them (cited strategies' own, else none)."""

    name = "none"

    @property
    def active(self) -> bool:
        return False

    def support(self, items: list[AttributionItem], engine: LLMEngine | None) -> list[Support]:
        return [Support([[0.0] * len(i.candidates) for _ in i.sentences], {}) for i in items]

    def attribute(self, records: list[AnswerRecord], engine_of: Callable[[], LLMEngine] | None = None) -> int:
        return 0


def build_attribution(node: Any) -> Attribution:
    """The configured method (`cfg.attribution`; None: `attribution=none`). Its `llm` node is not built here: the
    pipeline resolves it to an engine it shares (the generator's when the configs are equal)."""
    if node is None:
        return NoAttribution()
    from hydra.utils import instantiate

    method = instantiate(node, llm=None) if "llm" in node else instantiate(node)
    if not isinstance(method, Attribution):
        raise TypeError(f"attribution._target_ must name an Attribution, got {type(method).__name__}")
    return method
