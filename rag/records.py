"""The records that flow one way through the pipeline: questions and passages in, answers out.

Questions and passages are plain dataclasses. The answer record (`AnswerRecord`, one `answers.jsonl` line) is a
typed pydantic model with one builder (`build_answer_record`), read by evaluation, export, loggers and
agreement; its JSON keeps the field names of earlier runs, so old `answers.jsonl` files load and can be re-judged.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rag.core.io import iter_jsonl_numbered, read_jsonl


@dataclass
class Question:
    """One question of a dataset, with whatever gold information the dataset has."""

    id: str
    question: str
    answer: str | None = None
    answer_aliases: list[str] = field(default_factory=list)
    gold_doc_ids: list[str] = field(default_factory=list)
    gold_docs: list[str] = field(default_factory=list)
    #: "single" or "multi": how many gold documents the question needs (DataMorgana's single-doc vs two-doc).
    hop: str = "single"
    #: DataMorgana question/user categories, or dataset-specific labels (HotpotQA type, MuSiQue hops).
    categories: dict[str, str] = field(default_factory=dict)
    #: graded judgments from a qrels file (id -> grade; 0 = judged not relevant); empty: the gold documents count,
    #: grade 1 (`relevance`)
    qrels: dict[str, int] = field(default_factory=dict)
    #: what an attack planted for this question (`rag.attack`): its target answer and the planted passages' ids;
    #: empty when the run's corpus is clean
    attack: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def relevance(self) -> dict[str, int]:
        """This question's judgments: its qrels, else its gold documents at grade 1 (binary qrels)."""
        return relevance(self.qrels, self.gold_doc_ids)


def relevance(qrels: Mapping[str, int], gold_doc_ids: list[str]) -> dict[str, int]:
    """Judgments of one question: graded qrels where the dataset has them, else binary ones from its gold
    documents (LiveRAG's DataMorgana documents, SQuAD's paragraph, HotpotQA's and MuSiQue's supporting ones)."""
    return {str(k): int(v) for k, v in qrels.items()} if qrels else {str(d): 1 for d in gold_doc_ids}


@dataclass
class Passage:
    """A retrievable unit: a chunk of one corpus document."""

    passage_id: str
    doc_id: str
    text: str
    title: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ScoredPassage:
    """A passage with the score and rank a stage gave it (rank starts at 1)."""

    passage: Passage
    score: float
    rank: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"passage_id": self.passage.passage_id, "doc_id": self.passage.doc_id,
                "score": self.score, "rank": self.rank}


def with_ranks(passages: list[ScoredPassage]) -> list[ScoredPassage]:
    """Number a ranked list 1..n in its current order."""
    return [ScoredPassage(p.passage, p.score, i + 1) for i, p in enumerate(passages)]


@dataclass
class GenerationResult:
    """What a generator returns for one question: the answer, the prompt that made it, and its steps."""

    answer: str
    final_prompt: str
    steps: dict[str, Any] = field(default_factory=dict)
    #: set when the strategy used passages other than its input (IterDRAG retrieves per sub-query)
    passages: list[ScoredPassage] | None = None
    #: the output could not be parsed in the method's format; `fallback` names the rule applied
    parse_failed: bool = False
    fallback: str | None = None
    #: cited strategies (Crucible, GINGER): [{text, citations: [doc_id], nugget, confidence}] in answer order
    sentences: list[dict[str, Any]] | None = None


class SubmittedPassage(BaseModel):
    """A passage as the LiveRAG submission format lists it (the text the generator saw)."""

    model_config = ConfigDict(extra="allow")

    doc_IDs: list[str] = Field(default_factory=list)  # noqa: N815 - the LiveRAG field name
    passage: str = ""


def is_number(value: Any) -> bool:
    """A finite int or float, not a bool: what counts as a score (metrics, judges' fields, sweep summaries)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class AnswerRecord(BaseModel):
    """One answer of a run: the LiveRAG submission fields, gold information, stage outputs and evaluations.

    `judges[<name>]` holds each judge's result (scores, or `parse_failed` / `skipped` markers), absent until
    evaluation; files of earlier runs, which kept the AutoNuggetizer's and Crucible's results in top-level
    `nuggets` and `crucible` fields, load into `judges` too. Unknown fields are kept (forward compatibility).
    """

    model_config = ConfigDict(extra="allow")

    id: str
    question: str = ""
    answer: str = ""
    passages: list[SubmittedPassage] = Field(default_factory=list)
    final_prompt: str | None = None
    generator: str | None = None
    gold_answer: str | None = None
    gold_answer_aliases: list[str] = Field(default_factory=list)
    gold_doc_ids: list[str] = Field(default_factory=list)
    gold_docs: list[str] = Field(default_factory=list)
    hop: str | None = "single"
    categories: dict[str, Any] = Field(default_factory=dict)
    retrieved: list[dict[str, Any]] = Field(default_factory=list)
    reranked: list[dict[str, Any]] = Field(default_factory=list)
    context: list[str] = Field(default_factory=list)
    steps: dict[str, Any] | None = Field(default_factory=dict)
    parse_failed: bool = False
    fallback: str | None = None
    #: the question's graded judgments (`Question.qrels`); empty when its gold documents are its judgments
    qrels: dict[str, int] = Field(default_factory=dict)
    #: per-answer string and retrieval scores (f1, em, recall_<stage>[_any|_all])
    scores: dict[str, float] = Field(default_factory=dict)
    #: judge name -> its result; `result_values` reads the per-answer evaluations out of one
    judges: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: cited strategies (Crucible, GINGER): [{text, citations: [doc_id], nugget, confidence}], one citation each
    sentences: list[dict[str, Any]] | None = None
    #: why this is not a real answer (`empty_answer`: an LLM generator answered nothing); scored as it is (F1 0),
    #: counted, and generated again when the run folder is resumed
    failure: str | None = None
    #: the attack on this question (`Question.attack`): target answer and planted passage ids; empty when clean
    attack: dict[str, Any] = Field(default_factory=dict)
    #: what the query stage searched with (`rag.query.base.QuerySet.to_json`); empty without a query stage
    queries: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _legacy_judges(cls, data: Any) -> Any:
        """Earlier runs wrote the nugget and Crucible judges' results as top-level fields: move them into
        `judges`, with the value declaration those judges now write themselves."""
        if not isinstance(data, Mapping) or not any(data.get(k) is not None for k in LEGACY_JUDGES):
            return data
        data = dict(data)
        judges = dict(data.get("judges") or {})
        for key, declared in LEGACY_JUDGES.items():
            result = data.pop(key, None)
            if isinstance(result, Mapping) and key not in judges:
                judges[key] = {**result, VALUES_KEY: declared}
        data["judges"] = judges
        return data

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> str:
        return str(value)

    @field_validator("answer", "question", mode="before")
    @classmethod
    def _none_as_empty(cls, value: Any) -> str:
        return "" if value is None else value

    @field_validator("scores", mode="before")
    @classmethod
    def _scores_as_floats(cls, value: Any) -> dict[str, float]:
        return {k: float(v) for k, v in (value or {}).items() if is_number(v) or isinstance(v, bool)}

    @classmethod
    def from_json(cls, row: Mapping[str, Any], where: str = "answers.jsonl") -> AnswerRecord:
        """A record from one JSONL row; a malformed row raises a DataError naming `where`."""
        from pydantic import ValidationError

        from rag.core.errors import DataError

        try:
            return cls.model_validate(dict(row))
        except ValidationError as err:
            first = err.errors()[0]
            raise DataError(f"{where}: not an answer record ({'.'.join(map(str, first['loc']))}: "
                            f"{first['msg']})") from None

    def to_json(self) -> dict[str, Any]:
        """The answers.jsonl line: evaluation fields only once evaluated (as earlier runs wrote them)."""
        out = self.model_dump(mode="json")
        if not out.get("judges"):
            out.pop("judges", None)
        if not out.get("qrels"):
            out.pop("qrels", None)
        for optional in ("attack", "queries"):
            if not out.get(optional):
                out.pop(optional, None)
        for optional in ("sentences", "failure"):
            if out.get(optional) is None:
                out.pop(optional, None)
        return out

    # -- what evaluation reads ---------------------------------------------------------------------------------
    @property
    def has_gold(self) -> bool:
        return isinstance(self.gold_answer, str) and bool(self.gold_answer.strip())

    def relevance(self) -> dict[str, int]:
        """The judgments of this answer's question: its qrels, else its gold documents at grade 1."""
        return relevance(self.qrels, self.gold_doc_ids)

    def passage_texts(self) -> list[str]:
        return [p.passage for p in self.passages]

    def ranked_passages(self) -> list[tuple[int, str, str]]:
        """(rank, passage id, text) of the passages the generator was given, best first: in the order of the ranked
        list after reranking and the cut (`reranked`), whatever order the prompt had them in (`passages` and
        `context` are in prompt order: `ordering=inverted` puts the best one last). Passages the ranked list does
        not hold (a strategy that retrieved its own: IterDRAG) follow in prompt order. The rank is the position in
        that order, from 1. Records without passage ids (older files) keep prompt order, with id ""."""
        texts = self.passage_texts()
        ids = [str(i) for i in self.context] if len(self.context) == len(texts) else [""] * len(texts)
        order: dict[str, int] = {}
        for entry in self.reranked:
            pid = entry.get("passage_id") if isinstance(entry, Mapping) else None
            if pid is not None:
                order.setdefault(str(pid), len(order))
        unranked = len(order)
        best_first = sorted(range(len(texts)), key=lambda j: (order.get(ids[j], unranked), j))
        return [(rank, ids[j], texts[j]) for rank, j in enumerate(best_first, start=1)]

    def gold_texts(self) -> list[str]:
        return [d for d in self.gold_docs if isinstance(d, str) and d.strip()]

    def judge_values(self) -> dict[str, float]:
        """Every judge's per-answer evaluations by name (`judge/<j>/<field>`, `nuggets/<m>`, `crucible/<m>`)."""
        out: dict[str, float] = {}
        for name, result in self.judges.items():
            out.update(result_values(name, result))
        return out

    def reference_evaluations(self) -> set[str]:
        """The evaluations that come from a reference judge (its values are what other judges are compared with:
        AutoNuggetizer's nugget scores)."""
        return {v for name, result in self.judges.items() if is_reference(result) for v in result_values(name, result)}

    def evaluation_values(self) -> dict[str, float]:
        """Every per-answer score by evaluation name: `scores/<name>` and each judge's values (`judge_values`)."""
        out = {f"scores/{k}": v for k, v in self.scores.items() if is_number(v)}
        out.update(self.judge_values())
        return out


# -- judge results -------------------------------------------------------------------------------------------
#: the key of a judge result that declares its values when the default rule does not fit (`Judge.declaration`)
VALUES_KEY = "_values"
#: result fields that are bookkeeping, never an evaluation
BOOKKEEPING = frozenset({"attempts"})

#: top-level fields of earlier answer files -> the judge key and declaration they load as
LEGACY_JUDGES: dict[str, dict[str, Any]] = {
    "nuggets": {"prefix": "nuggets/", "fields": ["vital_strict", "all_strict", "vital", "all"], "reference": True},
    "crucible": {"prefix": "crucible/", "fields": ["nugget_recall", "nugget_density", "sentence_novelty",
                                                    "relevant_sentences", "citation_support"]},
}


def result_values(name: str, result: Any) -> dict[str, float]:
    """The per-answer evaluations in one judge result, by evaluation name.

    A result that declares its values (`_values: {prefix, fields}`) is read by that declaration; any other by the
    default rule, every finite number except bookkeeping as `judge/<name>/<field>`. A failed (`parse_failed`) or
    skipped (`skipped: true`) result has none.
    """
    if not isinstance(result, Mapping) or result.get("parse_failed") or result.get("skipped") is True:
        return {}
    declared = result.get(VALUES_KEY)
    if isinstance(declared, Mapping):
        prefix, fields = str(declared.get("prefix", f"judge/{name}/")), declared.get("fields")
        names = list(fields) if fields is not None else [k for k in result if k not in BOOKKEEPING]
        return {f"{prefix}{k}": float(result[k]) for k in names if is_number(result.get(k))}
    return {f"judge/{name}/{k}": float(v) for k, v in result.items() if k not in BOOKKEEPING and is_number(v)}


def is_reference(result: Any) -> bool:
    declared = result.get(VALUES_KEY) if isinstance(result, Mapping) else None
    return isinstance(declared, Mapping) and bool(declared.get("reference"))


def build_answer_record(question: Question, retrieved: list[ScoredPassage], context: list[ScoredPassage],
                        used: list[ScoredPassage], result: GenerationResult, generator: str,
                        scores: Mapping[str, float]) -> AnswerRecord:
    """The one way an answer record is made: from the question, the stages' passages and the generation."""
    return AnswerRecord(
        id=question.id, question=question.question, answer=result.answer,
        passages=[SubmittedPassage(doc_IDs=[p.passage.doc_id], passage=p.passage.text) for p in used],
        final_prompt=result.final_prompt, generator=generator,
        gold_answer=question.answer, gold_answer_aliases=list(question.answer_aliases),
        gold_doc_ids=list(question.gold_doc_ids), gold_docs=list(question.gold_docs),
        hop=question.hop, categories=dict(question.categories), qrels=dict(question.qrels),
        retrieved=[p.to_dict() for p in retrieved], reranked=[p.to_dict() for p in context],
        context=[p.passage.passage_id for p in used], steps=result.steps, parse_failed=result.parse_failed,
        fallback=result.fallback, scores=dict(scores), sentences=result.sentences, attack=dict(question.attack))


#: a stage -> the record field holding its stored list
RANKED_LISTS = {"retrieval": "retrieved", "rerank": "reranked"}


def _hit(hit: ScoredPassage | Mapping[str, Any]) -> tuple[str, str, Any]:
    if isinstance(hit, ScoredPassage):
        return hit.passage.passage_id, hit.passage.doc_id, hit.score
    return str(hit.get("passage_id")), str(hit.get("doc_id")), hit.get("score")


def stage_ranking(hits: Sequence[ScoredPassage | Mapping[str, Any]],
                  level: str = "document") -> list[tuple[str, float]]:
    """(id, score) pairs of one stored list in its order, at a judgments level (`rag.data.qrels`): passage ids,
    or document ids at the rank and score of each document's best passage.

    Scores strictly decrease as trec_eval reads them: it orders a run by score, not by its rank column, and holds
    scores in single precision (pytrec_eval too). Where a stage's scores tie or rise along its list (a tie the stage
    broke, a reranker that orders by other means), or differ only beyond single precision, a later item's score is
    the largest single-precision value below the one before it, so every reader sees the order the pipeline used."""
    import numpy as np

    out: list[tuple[str, float]] = []
    seen: set[str] = set()
    previous = np.float32(np.inf)
    for hit in hits:
        passage_id, doc_id, score = _hit(hit)
        item = doc_id if level == "document" else passage_id
        if item in seen:
            continue
        seen.add(item)
        value = float(score) if isinstance(score, (int, float)) and math.isfinite(score) else math.inf
        if not np.float32(value) < previous:
            value = float(np.nextafter(previous, np.float32(-np.inf)))
        out.append((item, value))
        previous = np.float32(value)
    return out


def load_answer_records(path: Any) -> list[AnswerRecord]:
    """Every record of an answers.jsonl file (a malformed line names the file and line)."""
    return [AnswerRecord.from_json(row, where=f"{path} line {i}") for i, row in iter_jsonl_numbered(path)]


def read_nugget_file(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Nugget records by qid from a create file (ours or castorini/nuggetizer's: `{qid, query, nuggets:
    [{text, importance}]}`, ours with `source`: where the nuggets came from); assign files work too."""
    out: dict[str, dict[str, Any]] = {}
    for row in read_jsonl(path):
        qid = str(row.get("qid", ""))
        nuggets = [{"text": n["text"], "importance": n.get("importance", "vital")} for n in row.get("nuggets", [])]
        out[qid] = {"qid": qid, "query": row.get("query", ""), "nuggets": nuggets,
                    "source": str(row.get("source") or "nugget_file")}
    return out
