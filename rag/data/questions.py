"""Question loaders, one class per published file format, all returning `Question` records.

Each loader reads lazily (on `load()`), names the file and line/row in any error, and maps the format's gold
information (answers, gold documents, categories) onto the one internal record.
"""

from __future__ import annotations

import ast
import csv
import json
import logging
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag.core.errors import DataError
from rag.core.io import iter_jsonl_numbered, open_text
from rag.data.ids import paragraph_doc_id
from rag.data.paths import resolve_data_file
from rag.records import Question

log = logging.getLogger(__name__)

#: DataMorgana category columns kept on each question (RAGtifier Fig. 3 and the LiveRAG dev set).
DATAMORGANA_CATEGORY_FIELDS = (
    "question_factuality", "question_premise", "question_phrasing", "question_linguistic_variation",
    "question_multi-doc", "user_expertise-categorization",
)


def normalised_question(text: str) -> str:
    return " ".join((text or "").split()).lower()


def shared_questions(split: Iterable[Question], evaluated: Iterable[Question]) -> list[str]:
    """Ids of the split's questions that are also evaluated: the same id, or the same text (case and spacing
    aside: a question copied into another file under another id is still the same question)."""
    evaluated = list(evaluated)
    ids = {q.id for q in evaluated}
    texts = {normalised_question(q.question) for q in evaluated}
    return [q.id for q in split if q.id in ids or normalised_question(q.question) in texts]


@dataclass
class DeclaredSplit:
    """Questions a component learns from (demonstrations, training data), declared by its class's
    `declared_splits(node, path)` so the preflight can refuse a split that overlaps the evaluated set
    (rag.preflight.cluster): `setting` is the dotted config path, `where` which questions of which file, `fix` what to
    change when they overlap."""

    setting: str
    what: str
    where: str
    questions: Sequence[Question]
    fix: str


class QuestionLoader(ABC):
    #: whether its questions come with gold answers (an attack's incorrect target answer needs a correct one:
    #: rag/preflight/attack.py refuses an attack on questions without them)
    has_answers: bool = True

    def __init__(self, path: str, data_dir: str | None = None, skip_invalid: bool = False):
        self.path = path
        self.data_dir = data_dir
        #: warn and skip bad rows instead of failing (live-day runs must not die on one row)
        self.skip_invalid = skip_invalid

    def file(self) -> Path:
        return resolve_data_file(self.path, self.data_dir, f"{type(self).__name__} questions")

    @abstractmethod
    def load(self) -> list[Question]:
        ...

    def where(self) -> str:
        """The file the questions are read from (resolved), else the configured path (`ir_datasets:<id>`)."""
        try:
            return str(self.file())
        except Exception:  # noqa: BLE001 - a path that does not resolve: load() has already said so
            return str(self.path)

    def load_some(self) -> list[Question]:
        """`load()`, and one line naming the file when it holds no question (a TSV with only its header, an empty
        JSONL, every row skipped as invalid), rather than a later setting failing over zero questions."""
        questions = self.load()
        if not questions:
            skipped = " valid" if self.skip_invalid else ""
            raise DataError(f"{self.where()}: holds no{skipped} questions (only a header, or nothing; "
                            f"dataset.questions.path)")
        return questions

    def _check(self, question: Question, where: str, out: list[Question]) -> None:
        problem = None
        if not question.question or not question.question.strip():
            problem = f"{where}: empty question (id={question.id!r})"
        elif not question.id:
            problem = f"{where}: missing question id"
        if problem is None:
            out.append(question)
        elif self.skip_invalid:
            log.warning("skipping %s", problem)
        else:
            raise DataError(problem + " (set dataset.questions.skip_invalid=true to skip such rows)")


def _literal_list(value: str, where: str, column: str) -> list[Any]:
    if value is None or value.strip() == "":
        return []
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        raise DataError(f"{where}: column {column!r} is not a Python-literal list") from None
    if not isinstance(parsed, list):
        raise DataError(f"{where}: column {column!r} should be a list, got {type(parsed).__name__}")
    return parsed


def _hop(multi_doc_label: str | None, n_gold: int) -> str:
    if multi_doc_label:
        return "single" if multi_doc_label.strip() == "single-doc" else "multi"
    return "multi" if n_gold > 1 else "single"


class DataMorganaQA(QuestionLoader):
    """DataMorgana / LiveRAG QA pairs as TSV (GRAG-LiveRAG's dev_qa.tsv) or JSONL with the same fields."""

    REQUIRED = ("qid", "question", "answer")

    def load(self) -> list[Question]:
        file = self.file()
        rows = self._rows_tsv(file) if ".tsv" in file.suffixes else self._rows_jsonl(file)
        out: list[Question] = []
        seen: dict[str, int] = {}
        for where, row in rows:
            missing = [c for c in self.REQUIRED if c not in row and not (c == "qid" and "id" in row)]
            if missing:
                raise DataError(f"{where}: missing column(s) {', '.join(missing)}")
            doc_ids = row.get("document_ids", [])
            docs = row.get("context", [])
            if isinstance(doc_ids, str):
                doc_ids = _literal_list(doc_ids, where, "document_ids")
            if isinstance(docs, str):
                docs = _literal_list(docs, where, "context")
            if docs and len(docs) != len(doc_ids):
                raise DataError(f"{where}: {len(doc_ids)} document_ids but {len(docs)} context documents")
            categories = {c: str(row[c]) for c in DATAMORGANA_CATEGORY_FIELDS if row.get(c) not in (None, "")}
            qid = str(row.get("qid", row.get("id", ""))).strip()
            # the GRAG-LiveRAG dev file restarts qid numbering per generation batch: keep ids unique and stable
            seen[qid] = seen.get(qid, 0) + 1
            if seen[qid] > 1:
                qid = f"{qid}#{seen[qid]}"
            question = Question(id=qid,
                                question=str(row.get("question") or "").strip(),
                                answer=str(row["answer"]).strip() if row.get("answer") is not None else None,
                                gold_doc_ids=[str(d) for d in doc_ids], gold_docs=[str(d) for d in docs],
                                hop=_hop(row.get("question_multi-doc"), len(doc_ids)), categories=categories)
            self._check(question, where, out)
        return out

    @staticmethod
    def _rows_tsv(file: Path):
        csv.field_size_limit(sys.maxsize)
        with open_text(file) as handle:
            reader = csv.DictReader(handle, delimiter="\t")
            if reader.fieldnames is None:
                raise DataError(f"{file}: empty file, expected a TSV header")
            for row in reader:
                where = f"{file}:{reader.line_num}"
                if None in row:
                    raise DataError(f"{where}: row has more fields than the header")
                if any(v is None for v in row.values()):
                    raise DataError(f"{where}: row has fewer fields than the header ({len(reader.fieldnames)})")
                yield where, row

    @staticmethod
    def _rows_jsonl(file: Path):
        for line_no, row in iter_jsonl_numbered(file):
            yield f"{file}:{line_no}", row


class LiveRagQuestions(QuestionLoader):
    """The organisers' live-day question file: one `{"id", "question"}` per line, no answers."""

    has_answers = False

    def load(self) -> list[Question]:
        file = self.file()
        out: list[Question] = []
        first_line: dict[str, int] = {}
        for line_no, row in iter_jsonl_numbered(file):
            if "question" not in row or "id" not in row:
                raise DataError(f"{file}:{line_no}: record lacks 'id' or 'question'")
            qid = str(row["id"])
            if qid in first_line:  # the submission names answers by id: two questions cannot share one
                raise DataError(f"{file}:{line_no}: duplicate question id {row['id']!r} (first at line "
                                f"{first_line[qid]})")
            first_line[qid] = line_no
            self._check(Question(id=qid, question=str(row["question"]).strip()), f"{file}:{line_no}", out)
        return out


def _read_json(file: Path) -> Any:
    try:
        with open_text(file) as handle:
            return json.load(handle)
    except json.JSONDecodeError as err:
        raise DataError(f"{file}:{err.lineno}: malformed JSON ({err.msg})") from None


class SquadQuestions(QuestionLoader):
    """SQuAD v1.1 / v2.0 dev JSON; unanswerable v2.0 questions get answer "" and `answerable=false`."""

    def load(self) -> list[Question]:
        file = self.file()
        data = _read_json(file)
        out: list[Question] = []
        for article in data.get("data", []):
            title = article.get("title", "")
            for p_index, paragraph in enumerate(article.get("paragraphs", [])):
                doc_id = f"{title}#{p_index}"
                for qa in paragraph.get("qas", []):
                    answers = list(dict.fromkeys(a["text"] for a in qa.get("answers", [])))
                    impossible = bool(qa.get("is_impossible", False))
                    question = Question(
                        id=str(qa.get("id", "")), question=str(qa.get("question", "")).strip(),
                        answer="" if impossible else (answers[0] if answers else None),
                        answer_aliases=answers, gold_doc_ids=[doc_id], gold_docs=[paragraph.get("context", "")],
                        hop="single", categories={"answerable": "false" if impossible else "true",
                                                  "title": title})
                    self._check(question, f"{file}: question {qa.get('id')!r}", out)
        return out


class JsonListQuestions(QuestionLoader):
    """A JSON file holding a list of records, one question each; subclasses map a record to a Question."""

    #: the format's name in error messages
    format_name = "JSON"

    def load(self) -> list[Question]:
        file = self.file()
        out: list[Question] = []
        for index, row in enumerate(_read_json(file)):
            where = f"{file}: item {index}"
            try:
                question = self.parse(row)
            except (KeyError, TypeError, ValueError) as err:
                raise DataError(f"{where}: malformed {self.format_name} record ({err!r})") from None
            self._check(question, where, out)
        return out

    @abstractmethod
    def parse(self, row: dict[str, Any]) -> Question:
        ...


class HotpotQAQuestions(JsonListQuestions):
    """HotpotQA (distractor format): the gold documents are the paragraphs named in `supporting_facts`."""

    format_name = "HotpotQA"

    def parse(self, row: dict[str, Any]) -> Question:
        context = {title: "".join(sentences) for title, sentences in row["context"]}
        gold_titles = list(dict.fromkeys(title for title, _ in row["supporting_facts"]))
        return Question(id=str(row["_id"]), question=str(row["question"]).strip(), answer=str(row["answer"]),
                        gold_doc_ids=gold_titles, gold_docs=[context.get(t, "") for t in gold_titles],
                        hop="multi" if len(gold_titles) > 1 else "single",
                        categories={"type": str(row.get("type", "")), "level": str(row.get("level", ""))})


class MuSiQueQuestions(JsonListQuestions):
    """MuSiQue: 2-4 hop questions; gold documents are the paragraphs marked `is_supporting`."""

    format_name = "MuSiQue"

    def parse(self, row: dict[str, Any]) -> Question:
        gold = [p for p in row["paragraphs"] if p.get("is_supporting")]
        return Question(id=str(row["id"]), question=str(row["question"]).strip(), answer=str(row["answer"]),
                        answer_aliases=[str(a) for a in row.get("answer_aliases", [])],
                        gold_doc_ids=[paragraph_doc_id(p["title"], p["paragraph_text"]) for p in gold],
                        gold_docs=[p["paragraph_text"] for p in gold],
                        hop="multi" if len(gold) > 1 else "single",
                        categories={"hops": str(row["id"])[:4], "type": str(row["id"]).split("__")[0],
                                    "answerable": str(row.get("answerable", True)).lower()})
