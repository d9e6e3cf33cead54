"""File helpers shared by every stage: atomic writes, JSONL with line-numbered errors, resumable appends, and
index folders built exactly once (`build_once`, used by every index builder).

Every output is written to a temporary file in the same folder and renamed into place, so a crash or a
concurrent job never leaves a half-written file where a reader expects a complete one. Written files and
folders get the modes the process umask allows (0666 / 0777 less the umask, as `open` and `mkdir` would), so a
group-shared cache works with `umask 002`; temporary files alone would be private (0600 / 0700).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import os
import shutil
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from filelock import FileLock

from rag.core.errors import NO_SPACE_ERRNOS, DataError, disk_full

log = logging.getLogger(__name__)


@contextlib.contextmanager
def open_text(path: str | Path) -> Iterator[Any]:
    """Open a text file, transparently un-gzipping `.gz` files. A truncated or corrupt gzip file, or bytes that
    are not UTF-8, end in one DataError naming the file (not an EOFError deep in a loader)."""
    path = Path(path)
    # the handle is closed by the `with` below; opened first so that a missing file raises as before
    # utf-8-sig: a byte-order mark (Excel and some Windows tools write one) is read as nothing, not as a column name
    encoding = "utf-8-sig"
    handle = gzip.open(path, "rt", encoding=encoding) if path.suffix == ".gz" else open(path, encoding=encoding)  # noqa: SIM115
    try:
        with handle:
            yield handle
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:
        raise DataError(f"{path}: truncated or corrupt gzip file ({err or type(err).__name__}); "
                        f"copy or download it again") from None
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None


_UMASK: int | None = None
_UMASK_LOCK = threading.Lock()


def process_umask() -> int:
    """The process umask (read once: reading it means setting it, which is not thread-safe)."""
    global _UMASK
    with _UMASK_LOCK:
        if _UMASK is None:
            _UMASK = os.umask(0o022)
            os.umask(_UMASK)
    return _UMASK


def shared_mode(directory: bool = False) -> int:
    """The mode `open`/`mkdir` would give a new file/folder: 0666/0777 less the umask."""
    return (0o777 if directory else 0o666) & ~process_umask()


def make_temp_dir(parent: str | Path, prefix: str) -> Path:
    """`mkdtemp` (0700) widened to the umask's folder mode, so the renamed folder is shared like any other."""
    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=prefix))
    os.chmod(tmp, shared_mode(directory=True))
    return tmp


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write bytes so that readers see either the old file or the complete new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, shared_mode())  # mkstemp makes 0600: give the file the mode `open` would
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(err, OSError) and err.errno in NO_SPACE_ERRNOS:
            raise disk_full(err, path, len(data)) from None
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write text (UTF-8) so that readers see either the old file or the complete new one."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, default=_json_default) + "\n")


def atomic_write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False, default=_json_default) + "\n"
                                    for r in rows))


def json_object_line(line: str, path: str | Path, line_no: int) -> dict[str, Any]:
    """One JSONL line as an object; a malformed line or a non-object raises DataError naming the file and line."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{line_no}: malformed JSON line ({err.msg})") from None
    if not isinstance(row, dict):
        raise DataError(f"{path}:{line_no}: expected a JSON object, got {type(row).__name__}")
    return row


def iter_jsonl_numbered(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) from a (possibly gzipped) JSONL file; a bad line raises DataError naming it."""
    path = Path(path)
    with open_text(path) as handle:
        for line_no, line in enumerate(handle, start=1):
            if line.strip():
                yield line_no, json_object_line(line, path, line_no)


def iter_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield JSON objects from a (possibly gzipped) JSONL file; a bad line raises DataError naming it."""
    for _, row in iter_jsonl_numbered(path):
        yield row


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    return list(iter_jsonl(path))


def read_jsonl_tolerant(path: str | Path) -> list[dict[str, Any]]:
    """Read an append-only JSONL journal, dropping a torn last line left by a killed writer."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if line_no < len(lines) - 1:  # only the final, unterminated line may be torn
                raise DataError(f"{path}:{line_no}: malformed JSON line in journal") from None
    return rows


class JsonlJournal:
    """Append-only JSONL file flushed and fsynced per batch: the resume point of a killed run."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def read(self) -> list[dict[str, Any]]:
        return read_jsonl_tolerant(self.path)

    def append(self, rows: Iterable[dict[str, Any]]) -> None:
        data = "".join(json.dumps(r, ensure_ascii=False, default=_json_default) + "\n" for r in rows)
        if not data:
            return
        self._repair_torn_tail()
        try:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as err:  # a torn last line is dropped on the next read (`read_jsonl_tolerant`)
            if err.errno in NO_SPACE_ERRNOS:
                raise disk_full(err, self.path, len(data.encode("utf-8"))) from None
            raise

    def _repair_torn_tail(self) -> None:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb+") as handle:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) == b"\n":
                return
            content = handle.seek(0) or handle.read()
            cut = content.rfind(b"\n") + 1
            handle.truncate(cut)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    if isinstance(obj, (set, tuple)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


#: temporary build folders are `.<index name>.building-<random>` next to the index
BUILDING = ".building-"

def build_once(index_dir: Path, build: Callable[[Path], None]) -> Path:
    """Build an index folder exactly once, even with concurrent jobs: lock, build in a temp dir, rename.

    A complete index is used without the lock (it is only ever replaced whole), so a read-only shared cache
    works. Temporary folders left by a build that was killed are removed by the next build of that index.
    """
    if (index_dir / "COMPLETE").exists():
        return index_dir
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(index_dir) + ".lock"):
        if (index_dir / "COMPLETE").exists():
            return index_dir
        # a killed build's leftovers: under the lock no other build of this index is running
        for stale in index_dir.parent.glob(f".{index_dir.name}{BUILDING}*"):
            if stale.is_dir():
                log.warning("removing %s left by an index build that did not finish", stale)
                shutil.rmtree(stale, ignore_errors=True)
        tmp = make_temp_dir(index_dir.parent, prefix=f".{index_dir.name}{BUILDING}")
        try:
            build(tmp)
            (tmp / "COMPLETE").write_text("ok\n")
            if index_dir.exists():
                shutil.rmtree(index_dir)
            os.replace(tmp, index_dir)
        finally:
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(tmp)
    return index_dir
