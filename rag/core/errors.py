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
