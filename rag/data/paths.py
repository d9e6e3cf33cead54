"""Resolve data files against `paths.data_dir`, failing with one message that says where we looked."""

from __future__ import annotations

from pathlib import Path

from rag.core.errors import MissingDataError


def resolve_data_file(path: str | Path, data_dir: str | Path | None, what: str) -> Path:
    candidate = Path(path).expanduser()
    if not candidate.is_absolute() and data_dir is not None:
        candidate = Path(data_dir).expanduser() / candidate
    if candidate.is_file():
        return candidate
    raise MissingDataError(
        f"{what}: file not found: {candidate}\n"
        f"  looked in paths.data_dir={data_dir!s}. Point it at your data folder with the environment variable "
        f"RAG_DATA_DIR=/path/to/data or the override paths.data_dir=/path/to/data; the expected layout is that "
        f"of the project's shared data (e.g. liverag_dm/dev_qa.tsv). Nothing is downloaded automatically.")
