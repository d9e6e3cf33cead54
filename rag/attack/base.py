"""Corpus attacks: a target answer and planted passages for each target question, made once and kept in a file.

An attack (`attack=poisonedrag | prompt_injection`, conf/attack/) runs before indexing: `rag.attack.corpus`
adds its passages to the dataset's corpus, so retrieval, reranking and the strategies see them exactly as they
see real passages. What it plants is kept in an attack file in PoisonedRAG's format (their
`results/adv_targeted_results/<dataset>.json`: per question id `id`, `question`, `correct answer`,
`incorrect answer`, `adv_texts`), under `<paths.cache_dir>/attacks/`, named by the dataset and a hash of every
setting that changes its content (attacker model, prompts, seed, words, texts per question). A user can read it,
and can load one made elsewhere (TrustRAG's or PoisonedRAG's JSON) with `attack.attack_file`.

The texts of one question are drawn once, `texts_per_question` of them, and a run plants the first
`n_passages`: cells of a sweep over `attack.n_passages` plant nested sets from one file.
"""

from __future__ import annotations

import json
import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, ValidationError

from rag.core.errors import ConfigError, DataError
from rag.core.hashing import slug, stable_hash
from rag.core.io import atomic_write_json
from rag.llm.base import LLMEngine, LLMRequest, SamplingParams
from rag.prompts import PromptTemplate, load_prompt
from rag.records import Question

log = logging.getLogger(__name__)

#: the attack file's fields, as PoisonedRAG names them
QUESTION, CORRECT, INCORRECT, TEXTS = "question", "correct answer", "incorrect answer", "adv_texts"


@dataclass(frozen=True)
class Target:
    """One target question: the answer the attacker wants, and the passages planted for it (`n_passages` of
    them)."""

    question_id: str
    question: str
    correct: str
    target_answer: str
    texts: tuple[str, ...]


class CorpusAttack(ABC):
    """Plans the targets of an attack. Subclasses say how a question's planted texts are made (`_texts`)."""

    #: the attack's name in planted passage ids and file names
    name: str = "attack"
    #: its option of conf/attack/ (how a message names the setting)
    option: str = "attack"
    #: whether the planted texts come from the attacker LLM (an attack file made elsewhere needs them)
    texts_from_llm: bool = False

    def __init__(self, n_passages: int = 5, texts_per_question: int = 5, targets: int | None = None, seed: int = 0,
                 attack_file: str | None = None, answer_prompt: str = "poisonedrag_answer",
                 answer_max_tokens: int = 24, temperature: float = 0.1, prompt_dir: str | None = None,
                 llm: Any = None, metrics: Sequence[str] = ()):
        if n_passages < 0:
            raise ConfigError(f"attack.n_passages must be 0 or more, got {n_passages}")
        if texts_per_question < n_passages:
            raise ConfigError(f"attack.texts_per_question ({texts_per_question}) must be at least attack.n_passages "
                              f"({n_passages}): a run plants the first n_passages of a question's texts")
        if targets is not None and targets < 1:
            raise ConfigError(f"attack.targets must be a positive number of questions or null (all), got {targets}")
        self.n_passages, self.texts_per_question, self.targets = n_passages, texts_per_question, targets
        self.seed, self.attack_file, self.temperature = seed, attack_file, temperature
        self.answer_prompt, self.answer_max_tokens, self.prompt_dir = answer_prompt, answer_max_tokens, prompt_dir
        #: the attacker's engine config (read by the pipeline, which builds the engine)
        self.llm = llm
        #: the metric options (conf/metrics/) a run with this attack adds to its own: it measures its attack
        #: (`rag.preflight.attack.add_attack_metrics` reads them from the config; kept here for the record)
        self.metrics = tuple(metrics)

    # -- what a subclass provides ------------------------------------------------------------------------------
    @abstractmethod
    def _texts(self, rows: list[dict[str, Any]], engine: LLMEngine | None) -> list[list[str]]:
        """`texts_per_question` planted texts for each attack-file row (question and incorrect answer set)."""

    def settings(self) -> dict[str, Any]:
        """Every setting that changes the attack file's content (not `n_passages`, which only cuts it)."""
        return {"attack": self.name, "seed": self.seed, "texts_per_question": self.texts_per_question,
                "temperature": self.temperature, "answer_prompt": self._prompt_text(self.answer_prompt),
                "answer_max_tokens": self.answer_max_tokens}

    # -- planning ----------------------------------------------------------------------------------------------
    def select(self, questions: Sequence[Question]) -> list[Question]:
        """The target questions: the first `targets` of the run's questions that have a gold answer (an incorrect
        answer needs a correct one to differ from); all of them by default."""
        answerable = [q for q in questions if (q.answer or "").strip()]
        if len(answerable) < len(questions):
            log.warning("attack %s: %d of %d questions have no gold answer and are not targets", self.name,
                        len(questions) - len(answerable), len(questions))
        return answerable[: self.targets] if self.targets else answerable

    def plan(self, questions: Sequence[Question], engine: Callable[[], LLMEngine | None], cache_dir: str | Path,
             dataset: str) -> list[Target]:
        """The targets of `questions`: read from `attack_file`, or from this attack's file in the cache, and what
        the cache lacks made with the attacker's engine (then written back, atomically)."""
        chosen = self.select(questions)
        if self.attack_file:
            rows = self._read_external(chosen)
        else:
            rows = self._made(chosen, engine, cache_dir, dataset)
        return [Target(q.id, q.question, str(q.answer), str(row[INCORRECT]).strip(),
                       tuple(self.passage(q.question, text) for text in row[TEXTS][: self.n_passages]))
                for q, row in zip(chosen, rows)]

    def passage(self, question: str, text: str) -> str:
        """The planted passage: the question, then the attack's text, joined with "." as PoisonedRAG's
        `src/attack.py` joins them (the question makes the passage retrievable, the text does the harm). Attack
        files hold the texts alone, as PoisonedRAG's `adv_texts` do."""
        return f"{question}.{text}"

    def cache_file(self, cache_dir: str | Path, dataset: str, engine: LLMEngine | None) -> Path:
        ident = {**self.settings(), "model": engine.identity() if engine is not None else None}
        return Path(cache_dir) / "attacks" / f"{slug(dataset)}-{self.name}-{stable_hash(ident, length=12)}.json"

    def _made(self, chosen: list[Question], engine_fn: Callable[[], LLMEngine | None], cache_dir: str | Path,
              dataset: str) -> list[dict[str, Any]]:
        engine = engine_fn()
        path = self.cache_file(cache_dir, dataset, engine)
        stored = _load(path) if path.is_file() else {}
        rows: list[dict[str, Any]] = []
        for q in chosen:
            row = stored.get(q.id)
            if not (isinstance(row, dict) and row.get(QUESTION) == q.question and row.get(CORRECT) == q.answer):
                row = {"id": q.id, QUESTION: q.question, CORRECT: q.answer}
            rows.append(row)
        missing_answer = [r for r in rows if not str(r.get(INCORRECT) or "").strip()]
        if missing_answer:
            self._need(engine, "incorrect answers")
            for row, answer in zip(missing_answer, self._incorrect_answers(missing_answer, engine)):
                row[INCORRECT] = answer
        missing_texts = [r for r in rows if len(r.get(TEXTS) or []) < self.texts_per_question]
        if missing_texts:
            if self.texts_from_llm:
                self._need(engine, "poison texts")
            for row, texts in zip(missing_texts, self._texts(missing_texts, engine)):
                row[TEXTS] = texts
        if missing_answer or missing_texts:
            stored.update({r["id"]: r for r in rows})
            stored["_settings"] = {**self.settings(), "model": engine.identity() if engine is not None else None}
            atomic_write_json(path, stored)
            log.info("attack %s: %d target answers and %d text sets made, kept in %s", self.name,
                     len(missing_answer), len(missing_texts), path)
        return rows

    def _need(self, engine: LLMEngine | None, what: str) -> None:
        if engine is None:
            raise ConfigError(f"attack {self.name}: {what} must be generated, but attack.llm is null "
                              "(set attack.llm, or attack.attack_file to a file that holds them)")

    def _incorrect_answers(self, rows: list[dict[str, Any]], engine: LLMEngine) -> list[str]:
        """One incorrect answer per question; an empty one, one longer than `MAX_ANSWER_WORDS` words (a model that
        talks instead of answering) or one that contains the correct answer is asked again with the next seed, and
        after three tries kept with a warning."""
        template = self.prompt(self.answer_prompt)
        answers = [""] * len(rows)
        todo = list(range(len(rows)))
        for attempt in range(3):
            requests = [self._request(template, self.answer_max_tokens, self.seed + attempt, question=rows[i][QUESTION],
                                      correct=rows[i][CORRECT]) for i in todo]
            for i, completion in zip(todo, engine.generate(requests, desc=f"attack {self.name}: target answers")):
                answers[i] = _first_line(completion.text)
            todo = [i for i in todo if not _usable_answer(answers[i], rows[i][CORRECT])]
            if not todo:
                break
        for i in todo:
            log.warning("attack %s: question %s: no short target answer apart from the correct one after 3 tries (%r)",
                        self.name, rows[i]["id"], answers[i])
            answers[i] = answers[i] or "unknown"
        return answers

    def _request(self, template: PromptTemplate, max_tokens: int, seed: int, temperature: float | None = None,
                 **variables: Any) -> LLMRequest:
        params = SamplingParams(temperature=self.temperature if temperature is None else temperature,
                                max_tokens=max_tokens, seed=seed)
        return LLMRequest(messages=template.messages(**variables), params=params, stop_plain=template.stop_plain)

    def prompt(self, name: str) -> PromptTemplate:
        return load_prompt(name, self.prompt_dir)

    def _prompt_text(self, name: str) -> dict[str, str]:
        template = self.prompt(name)
        return {"system": template.system, "user": template.user}

    def _read_external(self, chosen: list[Question]) -> list[dict[str, Any]]:
        path = Path(self.attack_file).expanduser()
        if not path.is_file():
            raise ConfigError(f"attack.attack_file: no such file {path}")
        data = _load(path)
        by_text = {str(r.get(QUESTION, "")).strip(): key for key, r in data.items() if isinstance(r, dict)}
        rows, missing = [], []
        for q in chosen:
            key = q.id if isinstance(data.get(q.id), dict) else by_text.get(q.question.strip())
            if key is None:
                missing.append(q.id)
                continue
            row = _typed_entry(path, key, data[key])
            if not str(row.get(INCORRECT) or "").strip():
                raise DataError(f"{path}: entry {q.id!r} has no {INCORRECT!r}")
            if self.texts_from_llm and len(row.get(TEXTS) or []) < self.n_passages:
                raise DataError(f"{path}: entry {q.id!r} has {len(row.get(TEXTS) or [])} {TEXTS!r}, fewer than "
                                f"attack.n_passages={self.n_passages}")
            if not self.texts_from_llm:
                row = {**row, TEXTS: self._texts([row], None)[0]}
            rows.append(row)
        if missing:
            raise DataError(f"{path}: no entry for {len(missing)} target question(s) (matched by id, then by "
                            f"question text), e.g. {', '.join(missing[:3])}")
        return rows


class AttackEntry(BaseModel):
    """One entry of an attack file (PoisonedRAG's format), with the types its fields must have: `adv_texts` given
    as one string would be planted one passage per character, `null` or a number as "None" or "42", a list-valued
    incorrect answer as the target "['a', 'b']". A missing or empty answer, and too few texts, are said by
    `_read_external` (what the run needs depends on the attack)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    id: StrictStr | StrictInt | None = None
    question: StrictStr | None = None
    correct: StrictStr | StrictInt | StrictFloat | list[StrictStr] | None = Field(None, alias=CORRECT)
    incorrect: StrictStr | None = Field(None, alias=INCORRECT)
    texts: list[StrictStr] | None = Field(None, alias=TEXTS)


def _typed_entry(path: Path, key: str, row: dict[str, Any]) -> dict[str, Any]:
    """`row` when its fields have their types, else one `DataError` line naming the file, the line where the
    entry starts, the entry's id and the field."""
    try:
        AttackEntry.model_validate(row)
    except ValidationError as err:
        first = err.errors()[0]
        loc = first["loc"]
        field = str(loc[0]) + "".join(f"[{part}]" for part in loc[1:] if isinstance(part, int))
        if len(loc) > 1 and not isinstance(loc[1], int):  # a union's branch (`str`, `list[str]`): not a place
            field = str(loc[0])
        item = len(loc) > 1 and isinstance(loc[1], int)
        got = row[loc[0]][loc[1]] if item else row.get(loc[0])
        expected = "a string (one passage)" if item else _EXPECTED.get(str(loc[0]), "a string")
        raise DataError(f"{path}:{_line_of(path, key)}: entry {key!r}: field {field!r} must be {expected}, not "
                        f"{_shape(got)}") from None
    return row


#: what each field of an attack file holds, as a message says it
_EXPECTED = {TEXTS: "a list of strings (one passage each)", INCORRECT: "a string (the target answer)",
             QUESTION: "a string", CORRECT: "a string", "id": "a string"}


def _shape(value: Any) -> str:
    if value is None:
        return "null"
    kind = {str: "a string", bool: "a boolean", int: "a number", float: "a number", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)
    bad = [v for v in value if not isinstance(v, str)] if isinstance(value, list) else []
    return f"a list holding {_shape(bad[0])}" if bad else kind


def _line_of(path: Path, key: str) -> int:
    """The line of `path` where entry `key` starts (1 when it cannot be found)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return 1
    match = re.search(re.escape(json.dumps(key)) + r"\s*:", text)
    return text.count("\n", 0, match.start()) + 1 if match else 1


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: not a readable attack file ({err})") from None
    if not isinstance(data, dict):
        raise DataError(f"{path}: an attack file maps question ids to entries (PoisonedRAG's format)")
    return data


#: a target answer longer than this is a model talking, not answering (asked again)
MAX_ANSWER_WORDS = 8


def _usable_answer(answer: str, correct: str) -> bool:
    from rag.metrics.attack import clean_str

    return bool(answer) and len(answer.split()) <= MAX_ANSWER_WORDS and clean_str(correct) not in clean_str(answer)


def _first_line(text: str) -> str:
    line = next((part.strip() for part in (text or "").splitlines() if part.strip()), "")
    return line.strip().strip('"').strip()
