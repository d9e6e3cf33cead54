"""The logger interface: one call at the end of a run with its config, metrics and answer records."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rag.records import AnswerRecord


class RunLogger:
    """Logs nothing (`logger=none`); the base of real loggers."""

    def log_run(self, config: dict[str, Any], metrics: dict[str, Any], records: list[AnswerRecord] | list[Mapping[str, Any]],
                run_dir: Path, name: str, group: str | None = None, tags: list[str] | None = None) -> None:
        """Report one finished run (records as `AnswerRecord`s, or answers.jsonl rows, which are read as such)."""
