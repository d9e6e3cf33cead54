"""Errors that end a run with one clear line instead of a stack trace: bad data, missing files, and
services that refuse or cannot be reached (the message names the variable, host or setting)."""

from __future__ import annotations


class ServiceError(RuntimeError):
    """A remote service (Pinecone, OpenSearch, a hosted LLM) is misconfigured or failing."""
