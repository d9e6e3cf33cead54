"""Streaming corpus input for index builds: `{doc_id, text}` JSONL (gzip allowed) and FineWeb parquet shards.

`rag.data.corpus.Corpus` holds every passage of one file in memory; an index of FineWeb-10BT (15M documents in
many parquet files) must stream its files with bounded memory and start in the middle of a file (a shard task's
range of documents). Documents are read here; passages are made by `Corpus.passages` itself, one small batch of
documents at a time (`DocumentBatch`), so chunking and passage ids are exactly rag.main's: an index built from
the dataset's corpus file is the index rag.main builds and finds.

Rows are named in errors as `file:line` (JSONL, 1-based lines) or `file: row N` (parquet, 0-based rows).
"""

from __future__ import annotations

import glob
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rag.core.errors import ConfigError, DataError, MissingDataError
from rag.core.io import json_object_line, open_text
from rag.data.corpus import Corpus
from rag.records import Passage

log = logging.getLogger(__name__)

GLOB_CHARS = set("*?[")
#: document fields tried, in order, when `id_field` is not set: our JSONL files name it doc_id, FineWeb's parquet id
DEFAULT_ID_FIELDS = ("doc_id", "id")


def file_kind(path: Path) -> str:
    name = path.name.lower()
    if name.endswith((".jsonl", ".jsonl.gz", ".json.gz", ".ndjson", ".ndjson.gz")):
        return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    raise ConfigError(f"corpus: {path}: unknown format (expected .jsonl, .jsonl.gz or .parquet)")


def expand_corpus(spec: str | Sequence[str], data_dir: str | Path | None) -> list[Path]:
    """The corpus files a `corpus=` setting names: paths or globs (relative ones under `paths.data_dir`), in the
    order given, each glob's matches sorted; a pattern that matches nothing ends in one line naming it."""
    patterns = [spec] if isinstance(spec, str) else [str(p) for p in spec]
    if not patterns or not all(str(p).strip() for p in patterns):
        raise ConfigError("corpus: give a file, a glob or a list of them, e.g. corpus=liverag_dm/fineweb_docs.jsonl.gz")
    files: list[Path] = []
    for pattern in patterns:
        path = Path(str(pattern).strip()).expanduser()
        if not path.is_absolute() and data_dir is not None:
            path = Path(data_dir).expanduser() / path
        if GLOB_CHARS & set(str(path)):
            matches = sorted(Path(m) for m in glob.glob(str(path), recursive=True) if Path(m).is_file())
            if not matches:
                raise MissingDataError(f"corpus: no file matches {path} (paths.data_dir={data_dir})")
            files += matches
        elif path.is_file():
            files.append(path)
        else:
            raise MissingDataError(f"corpus: file not found: {path} (paths.data_dir={data_dir})")
    unique = list(dict.fromkeys(p.resolve() for p in files))
    for path in unique:
        file_kind(path)
    return unique


@dataclass(frozen=True)
class Fields:
    """Which record fields hold the document id, text and title (title: none by default, as JsonlCorpus)."""

    id_field: str | None = None
    text_field: str = "text"
    title_field: str | None = None


@dataclass(frozen=True)
class Document:
    doc_id: str
    title: str
    text: str
    #: position of the file in the plan, and the record's row there (JSONL: 1-based line, parquet: 0-based row)
    file_index: int
    row: int


def where(path: str | Path, kind: str, row: int) -> str:
    return f"{path}:{row}" if kind == "jsonl" else f"{path}: row {row}"


def count_documents(path: Path) -> int:
    """Records in a file: non-blank JSONL lines (no parsing), or the parquet footer's row count."""
    if file_kind(path) == "parquet":
        return _parquet(path).metadata.num_rows
    with open_text(path) as handle:
        return sum(1 for line in handle if line.strip())


def _parquet(path: Path):
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(str(path))
    except Exception as err:  # noqa: BLE001 - pyarrow raises several types for a damaged footer
        raise DataError(f"{path}: not a readable parquet file ({type(err).__name__}: {err})") from None


def _record_document(row: dict, fields: Fields, id_field: str, path: Path, kind: str, line: int,
                     file_index: int) -> Document:
    """A record as JsonlCorpus reads one: id and text must exist; a null text is empty; a title only if asked."""
    try:
        doc_id, text = row[id_field], row[fields.text_field]
    except KeyError:
        raise DataError(f"{where(path, kind, line)}: record lacks {id_field!r} or {fields.text_field!r}") from None
    if doc_id is None or str(doc_id) == "":
        raise DataError(f"{where(path, kind, line)}: record has an empty {id_field!r}")
    if text is not None and not isinstance(text, str):
        raise DataError(f"{where(path, kind, line)}: {fields.text_field!r} is {type(text).__name__}, not text")
    title = str(row.get(fields.title_field) or "") if fields.title_field else ""
    return Document(str(doc_id), title, text or "", file_index, line)


def iter_documents(path: Path, fields: Fields, start: int, stop: int, file_index: int) -> Iterator[Document]:
    """Records `start` to `stop` (0-based, counting records) of one file, streamed."""
    if stop <= start:
        return
    if file_kind(path) == "parquet":
        yield from _iter_parquet(path, fields, start, stop, file_index)
        return
    id_field = fields.id_field or DEFAULT_ID_FIELDS[0]
    index = -1
    with open_text(path) as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            index += 1
            if index < start:
                continue
            if index >= stop:
                return
            row = json_object_line(line, path, line_no)
            yield _record_document(row, fields, id_field, path, "jsonl", line_no, file_index)
    if index + 1 < stop:
        raise DataError(f"{path}: has {index + 1} records, the plan counted at least {stop}; the file changed "
                        f"while the index was built")


def _iter_parquet(path: Path, fields: Fields, start: int, stop: int, file_index: int) -> Iterator[Document]:
    """Only the row groups that hold rows `start`..`stop`, only the needed columns."""
    pf = _parquet(path)
    names = set(pf.schema_arrow.names)
    id_field = fields.id_field or next((f for f in DEFAULT_ID_FIELDS if f in names), DEFAULT_ID_FIELDS[0])
    wanted = [id_field, fields.text_field] + ([fields.title_field] if fields.title_field else [])
    missing = [c for c in wanted if c not in names]
    if missing:
        raise DataError(f"{path}: parquet file has no column {', '.join(map(repr, missing))} (columns: "
                        f"{', '.join(sorted(names))}); set index.id_field / index.text_field")
    first = 0
    try:
        for group in range(pf.metadata.num_row_groups):
            rows = pf.metadata.row_group(group).num_rows
            if first + rows <= start or first >= stop:
                first += rows
                continue
            table = pf.read_row_group(group, columns=wanted)
            columns = {name: table.column(name).to_pylist() for name in wanted}
            for offset in range(max(0, start - first), min(rows, stop - first)):
                record = {name: values[offset] for name, values in columns.items()}
                yield _record_document(record, fields, id_field, path, "parquet", first + offset, file_index)
            first += rows
    except DataError:
        raise
    except Exception as err:  # noqa: BLE001 - a damaged page or column chunk
        raise DataError(f"{path}: unreadable parquet data near row {first} ({type(err).__name__}: {err})") from None


class DocumentBatch(Corpus):
    """A few streamed documents as a Corpus, so that `Corpus.passages` chunks them and names their passages."""

    def __init__(self, documents: list[Document], file: Path, chunk_words: int | None, overlap_words: int):
        super().__init__(path=str(file), chunk_words=chunk_words, overlap_words=overlap_words, name="stream")
        self._documents = documents
        self._file = file

    def file(self) -> Path:
        return self._file

    def documents(self) -> Iterator[tuple[str, str, str]]:
        for doc in self._documents:
            yield doc.doc_id, doc.title, doc.text


@dataclass(frozen=True)
class SourcePassage:
    passage: Passage
    file_index: int
    row: int


def passages_of(documents: list[Document], files: Sequence[Path], kinds: Sequence[str], chunk_words: int | None,
                overlap_words: int, empty_text: str) -> tuple[list[SourcePassage], int]:
    """Passages of a batch of documents (in order) with the file and row each came from, and how many documents
    had no text. `empty_text=error` refuses such a document naming its row; `skip` drops it as Corpus does."""
    empty = [d for d in documents if not d.text.split()]
    if empty and empty_text == "error":
        d = empty[0]
        raise DataError(f"{where(files[d.file_index], kinds[d.file_index], d.row)}: document {d.doc_id!r} has no "
                        f"text (null or empty); fix the file or set index.empty_text=skip (skips it, as "
                        f"rag.data.corpus does)")
    by_id: dict[str, Document] = {}
    for d in documents:
        other = by_id.setdefault(d.doc_id, d)
        if other is not d:
            raise DataError(f"duplicate doc_id {d.doc_id!r}: {where(files[other.file_index], kinds[other.file_index], other.row)} "
                            f"and {where(files[d.file_index], kinds[d.file_index], d.row)}")
    kept = [d for d in documents if d.text.split()]
    if not kept:
        return [], len(empty)
    batch = DocumentBatch(kept, files[kept[0].file_index], chunk_words, overlap_words)
    out = [SourcePassage(p, by_id[p.doc_id].file_index, by_id[p.doc_id].row) for p in batch.passages]
    return out, len(empty)
