"""Errors that end a run with one clear line instead of a stack trace: bad data, missing files, and
services that refuse or cannot be reached (the message names the file, row, variable, host or setting).

Every one-line error of the project derives from one of these; `rag.main` prints them as one line, exit 2.
"""

from __future__ import annotations


class DataError(ValueError):
    """Bad input data: the message names the file and, where known, the line or row."""


class MissingDataError(FileNotFoundError):
    """A data or model file is not where the configuration says; the message says where we looked."""


class ServiceError(RuntimeError):
    """A remote service (Pinecone, OpenSearch, a hosted LLM) is misconfigured or failing."""


class ConfigError(ValueError):
    """A setting (or a combination of settings) that cannot work; the message names the setting."""


class BusyError(RuntimeError):
    """A folder another execution holds (a run folder while a requeue or a second job writes it); the message names
    the holder."""


class DiskFullError(OSError):
    """A write found no space (or no quota) left: the message names the file and the bytes it needed."""


#: errors whose message already says what is wrong and where: an entry point prints them as one line, exit 2
ONE_LINE_ERRORS = (DataError, MissingDataError, ServiceError, ConfigError, BusyError, DiskFullError,
                   FileNotFoundError, PermissionError)


#: errno values that mean "no space left": a full device, an exhausted quota
NO_SPACE_ERRNOS = (28, 122)  # ENOSPC, EDQUOT


def disk_full(err: OSError, path: object, needed: int) -> DiskFullError:
    """The one-line error of a write that ran out of space, with what is free where it wrote."""
    import os
    import shutil

    where = os.path.dirname(os.fspath(path)) or "."  # type: ignore[arg-type]
    try:
        free = f"{shutil.disk_usage(where).free:,} bytes free there"
    except OSError:
        free = "free space unknown"
    return DiskFullError(err.errno, f"no space left writing {path}: {needed:,} bytes needed, {free}; free space or "
                                    f"point paths.output_dir / paths.cache_dir elsewhere (the run resumes where it "
                                    f"stopped)")
