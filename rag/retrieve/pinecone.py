"""Dense retrieval from a hosted Pinecone index, as in the LiveRAG challenge.

LiveRAG served FineWeb-10BT as the Pinecone index `fineweb10bt-512-0w-e5-base-v2` (namespace `default`): passages
of at most 512 words, embedded with `intfloat/e5-base-v2` (`passage: ` prefix, mean pooling, L2-normalised), each
vector carrying `doc_id` and `text` in its metadata. Queries must be embedded the same way (`query: ` prefix),
which our `Embedder` does locally; every name here is configurable for other indexes.

The API key comes only from the environment variable named by `api_key_env`. A batch of queries is sent as
concurrent requests (thread pool, `concurrency`); rate limits (429), timeouts and server errors (5xx) are
retried with exponential backoff up to `max_retries` times. Note that the Pinecone SDK (v10) itself retries
408/429/5xx a few times inside each of our attempts, honouring `Retry-After`. Failures end in one
`PineconeServiceError` whose message names the variable or the host at fault.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rag.core.errors import ServiceError
from rag.core.hashing import slug
from rag.core.retry import AttemptCounter, call_with_retries
from rag.embed import Embedder
from rag.records import Passage, ScoredPassage
from rag.retrieve.base import RemoteRetriever

log = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504, 529})


class PineconeServiceError(ServiceError):
    """A Pinecone failure explained in one line (missing key, unreachable host, refused request)."""


def status_of(err: BaseException) -> int | None:
    """HTTP status of an SDK error: `status_code` (SDK v10) or `status` (older SDKs)."""
    for name in ("status_code", "status"):
        value = getattr(err, name, None)
        if isinstance(value, int):
            return value
    return None


def _is_transport_error(err: BaseException) -> bool:
    """Timeouts and connection failures, recognised by class name so any SDK version works."""
    names = {cls.__name__ for cls in type(err).__mro__}
    return bool(names & {"PineconeTimeoutError", "PineconeConnectionError", "TimeoutError", "ConnectionError",
                         "TimeoutException", "ConnectError", "ProtocolError"})


def is_retryable(err: BaseException) -> bool:
    status = status_of(err)
    if status is not None:
        return status in RETRYABLE_STATUS or status >= 500
    return _is_transport_error(err)


class PineconeRetriever(RemoteRetriever):
    kind = "pinecone"

    def __init__(self, embedder: Embedder, k: int = 20, index_name: str = "fineweb10bt-512-0w-e5-base-v2",
                 namespace: str = "default", host: str | None = None, host_env: str | None = "PINECONE_HOST",
                 api_key_env: str = "PINECONE_API_KEY", control_host: str | None = None,
                 doc_id_field: str = "doc_id", text_field: str = "text", title_field: str | None = None,
                 concurrency: int = 8, timeout_s: float = 30.0, max_retries: int = 3,
                 backoff_initial_s: float = 1.0, backoff_max_s: float = 30.0):
        super().__init__(k)
        self.embedder = embedder
        embedder.setting = "retriever.embedder"  # rag.index names it backend.service.embedder when it is that
        self.index_name, self.namespace = index_name, namespace
        #: the index's data-plane host; without it the SDK looks it up by name on the control plane
        self.host = host or (os.environ.get(host_env) if host_env else None) or None
        self.api_key_env = api_key_env
        self.control_host = control_host
        self.doc_id_field, self.text_field, self.title_field = doc_id_field, text_field, title_field
        self.concurrency = max(1, concurrency)
        self.timeout_s, self.max_retries = timeout_s, max_retries
        self.backoff_initial_s, self.backoff_max_s = backoff_initial_s, backoff_max_s
        self._index = None
        self._warned_doc_id = False

    @staticmethod
    def required_env(node: dict) -> list[str]:
        """Environment variables a run needs (checked by `rag.preflight` before any cell is launched)."""
        return [node.get("api_key_env") or "PINECONE_API_KEY"]

    def __repr__(self) -> str:
        return (f"PineconeRetriever(index_name={self.index_name!r}, namespace={self.namespace!r}, "
                f"embedder={self.embedder.name!r})")

    @property
    def key(self) -> str:
        return slug(f"pinecone-{self.index_name}-{self.namespace}-{self.embedder.name}")

    # -- connection ---------------------------------------------------------------------------------------------
    def _where(self) -> str:
        return self.host or f"index {self.index_name!r} (host looked up on {self.control_host or 'api.pinecone.io'})"

    def control(self):
        """The SDK's client on the control plane (`control_host`, else api.pinecone.io): indexes, their hosts."""
        key = os.environ.get(self.api_key_env, "").strip()
        if not key:
            raise PineconeServiceError(
                f"retriever=pinecone: environment variable {self.api_key_env} is not set; export your Pinecone "
                f"API key there (keys are never read from configs)")
        try:
            from pinecone import Pinecone
        except ImportError:
            raise PineconeServiceError("retriever=pinecone needs the Pinecone SDK: pip install 'pinecone>=10' "
                                       "(or the project's `services` extra)") from None
        kwargs: dict[str, Any] = {"api_key": key, "timeout": self.timeout_s}
        if self.control_host:
            kwargs["host"] = self.control_host
        try:
            return Pinecone(**kwargs)
        except Exception as err:  # SDK validation errors, e.g. a malformed key or host
            raise PineconeServiceError(f"retriever=pinecone: cannot open {self._where()}: {_one_line(err)}") from None

    def connect(self):
        if self._index is not None:
            return self._index
        client = self.control()
        try:
            self._index = self.with_retries(
                lambda: client.Index(name=self.index_name, host=self.host or ""), "open")
        except PineconeServiceError:
            raise
        except Exception as err:  # SDK validation errors, e.g. a malformed key or host
            raise PineconeServiceError(f"retriever=pinecone: cannot open {self._where()}: {_one_line(err)}") from None
        return self._index

    def with_retries(self, call, what: str):
        """`call()` retried on rate limits, timeouts and server errors; a last failure explained in one line."""
        sent = AttemptCounter()
        try:
            return call_with_retries(call, self.max_retries, is_retryable, self.backoff_initial_s,
                                     self.backoff_max_s, on_attempt=sent)
        except Exception as err:
            raise PineconeServiceError(self.explain(err, what, sent.said())) from None

    def explain(self, err: BaseException, what: str, attempts: str = "1 attempt") -> str:
        """One line for a failed call `what`: the status, after how many requests really sent (`attempts`)."""
        status = status_of(err)
        where = self._where()
        if status in (401, 403):
            return (f"retriever=pinecone: {where} refused the API key from {self.api_key_env} "
                    f"(HTTP {status} on {what})")
        if status == 404:
            return f"retriever=pinecone: {where} not found (HTTP 404 on {what}); check index_name/host"
        if status is not None:
            return f"retriever=pinecone: {what} failed at {where} with HTTP {status} after {attempts}: {_one_line(err)}"
        if _is_transport_error(err):
            return f"retriever=pinecone: cannot reach {where} ({type(err).__name__}: {_one_line(err)})"
        return f"retriever=pinecone: {what} at {where} failed ({type(err).__name__}: {_one_line(err)})"

    # -- search -------------------------------------------------------------------------------------------------
    def _query(self, vector: Sequence[float], k: int):
        index = self.connect()
        values = [float(x) for x in vector]  # numpy floats are not JSON-serialisable
        return self.with_retries(
            lambda: index.query(vector=values, top_k=k, namespace=self.namespace, include_metadata=True,
                                include_values=False), "query")

    def _to_passages(self, response: Any) -> list[ScoredPassage]:
        out = []
        for rank, match in enumerate(_get(response, "matches") or [], start=1):
            meta = _get(match, "metadata") or {}
            passage_id = str(_get(match, "id"))
            doc_id = meta.get(self.doc_id_field)
            if doc_id is None:
                if not self._warned_doc_id:
                    log.warning("pinecone matches lack metadata field %r; using the match id as doc_id",
                                self.doc_id_field)
                    self._warned_doc_id = True
                doc_id = passage_id
            title = str(meta.get(self.title_field, "")) if self.title_field else ""
            passage = Passage(passage_id=passage_id, doc_id=str(doc_id), text=str(meta.get(self.text_field, "")),
                              title=title)
            out.append(ScoredPassage(passage, float(_get(match, "score") or 0.0), rank))
        return out

    def search(self, queries: list[str], k: int) -> list[list[ScoredPassage]]:
        if not queries:
            return []
        self.connect()
        vectors = self.embedder.encode_queries(queries)
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(queries))) as pool:
            responses = list(pool.map(lambda v: self._query(v, k), vectors))
        return [self._to_passages(r) for r in responses]

    def close(self) -> None:
        if self._index is not None and hasattr(self._index, "close"):
            self._index.close()
        self._index = None


def _get(obj: Any, name: str) -> Any:
    """Read a field from an SDK model object or a plain dict."""
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text[:300] if text else type(err).__name__
