"""A run folder as one type: the files a run writes, read and written in one place.

Every reader of a run (the report, the sweep summary and status, re-judging, agreement, export, the live day)
goes through `RunFolder` instead of spelling out file names, so what a run folder holds is written down once:

    answers.jsonl          one `AnswerRecord` per question (the final answers, written last but one)
    answers.partial.jsonl  the journal of an unfinished run (what a resume keeps)
    metrics.json           the run metrics (names declared in `rag.metrics.registry`)
    config.json            the resolved config, secrets masked
    fingerprint.json       what a resume must match (`rag.fingerprint`)
    eval_report.md         the judges' report

Final outputs are written atomically; a folder with `metrics.json` is complete.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from rag.core.errors import DataError
from rag.core.io import JsonlJournal, atomic_write_json, atomic_write_jsonl, read_jsonl
from rag.records import AnswerRecord, load_answer_records


def read_json_file(path: Path) -> dict[str, Any]:
    """A JSON object from a file; a malformed file is one DataError naming it and the line."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{err.lineno}: malformed JSON ({err.msg})") from None


@dataclass(frozen=True)
class RunFolder:
    """One run's folder (a sweep cell, a standalone run, a live day's output)."""

    dir: Path

    ANSWERS = "answers.jsonl"
    JOURNAL = "answers.partial.jsonl"
    METRICS = "metrics.json"
    CONFIG = "config.json"
    FINGERPRINT = "fingerprint.json"
    EVAL_REPORT = "eval_report.md"
    #: what a run writes (a reused folder with any of these must match its fingerprint)
    OUTPUTS = (ANSWERS, JOURNAL, METRICS)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dir", Path(self.dir))

    # -- paths ------------------------------------------------------------------------------------------------
    @property
    def answers_path(self) -> Path:
        return self.dir / self.ANSWERS

    @property
    def journal_path(self) -> Path:
        return self.dir / self.JOURNAL

    @property
    def metrics_path(self) -> Path:
        return self.dir / self.METRICS

    @property
    def config_path(self) -> Path:
        return self.dir / self.CONFIG

    @property
    def fingerprint_path(self) -> Path:
        return self.dir / self.FINGERPRINT

    # -- state ------------------------------------------------------------------------------------------------
    @property
    def has_answers(self) -> bool:
        return self.answers_path.is_file()

    @property
    def complete(self) -> bool:
        """The run finished: its metrics are written (after its answers)."""
        return self.metrics_path.is_file()

    def journal(self) -> JsonlJournal:
        return JsonlJournal(self.journal_path)

    def journal_lines(self) -> int:
        """Answers journalled by an unfinished run (what a resume keeps)."""
        if not self.journal_path.is_file():
            return 0
        with open(self.journal_path, "rb") as handle:
            return sum(1 for line in handle if line.endswith(b"\n"))

    # -- reading ----------------------------------------------------------------------------------------------
    def records(self) -> list[AnswerRecord]:
        """Every answer of `answers.jsonl` (a malformed line names the file and line)."""
        return load_answer_records(self.answers_path)

    def rows(self) -> list[dict[str, Any]]:
        """`answers.jsonl` as plain JSON rows (what a W&B table or a submission file is made from)."""
        return read_jsonl(self.answers_path)

    def metrics(self) -> dict[str, Any]:
        """`metrics.json`, or {} when the run has not finished."""
        return read_json_file(self.metrics_path) if self.metrics_path.is_file() else {}

    def config(self) -> dict[str, Any]:
        """The resolved config the run saved (`config.json`), or {}."""
        return read_json_file(self.config_path) if self.config_path.is_file() else {}

    @cached_property
    def saved_config(self) -> dict[str, Any]:
        """`config()`, read once."""
        return self.config()

    def setting(self, key: str) -> Any:
        """A dotted value of the saved config (`retriever.k`), or None."""
        node: Any = self.saved_config
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return None
            node = node[part]
        return node

    def retrieval_depth(self) -> int | None:
        """How deep the retrieve stage ran (what its latency was paid for): the pipeline records it in
        `metrics.json`; for folders written before it did, the rule it used then (max of retriever.k and
        cache.retrieval_depth)."""
        value = self.metrics().get("retrieval_depth")
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        k = max(int(self.setting("retriever.k") or 0), int(self.setting("cache.retrieval_depth") or 0))
        return k or None

    # -- writing ----------------------------------------------------------------------------------------------
    def write_answers(self, records: Iterable[AnswerRecord | Mapping[str, Any]]) -> None:
        atomic_write_jsonl(self.answers_path, [r.to_json() if isinstance(r, AnswerRecord) else dict(r)
                                               for r in records])

    def write_metrics(self, metrics: Mapping[str, Any]) -> None:
        atomic_write_json(self.metrics_path, dict(metrics))

    def write_config(self, config: Mapping[str, Any]) -> None:
        atomic_write_json(self.config_path, dict(config))

    def finish(self, records: Iterable[AnswerRecord | Mapping[str, Any]], metrics: Mapping[str, Any] | None,
               config: Mapping[str, Any]) -> None:
        """Write a finished run: answers, then metrics (which mark the folder complete), then the config; the
        journal goes last, so a crash in between leaves a folder that resumes."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.write_answers(records)
        if metrics is not None:
            self.write_metrics(metrics)
        self.write_config(config)
        self.journal_path.unlink(missing_ok=True)
