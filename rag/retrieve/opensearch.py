"""Sparse (BM25) retrieval from a hosted OpenSearch index, as in the LiveRAG challenge.

LiveRAG served FineWeb-10BT on an AWS-managed OpenSearch cluster (index `fineweb10bt-512-0w-e5-base-v2`, region
us-east-1, requests signed with AWS SigV4); each hit's `_source` holds `doc_id` and `text`. Queries are plain
BM25 `match` queries on `text`, sent in batches through `_msearch`.

Host, port, index and access mode come from the config, the host also from `$OPENSEARCH_HOST`. `access` is `aws`
(SigV4 with boto3's credential chain: `aws_profile`, env keys, instance roles; boto3 imported only then),
`basic` (user and password from the environment variables named in the config, else from the netrc file named
by `netrc_file`: its `machine <host>` entry, the file `curl --netrc-file` and `requests` read) or `none`. A
secret never sits in the config itself: `rag.core.secrets` refuses a password or a URL with credentials there. (The option is not
called `auth` because the config dump masks every `auth*` value as a secret.) The client's own retries are
off: we retry rate limits (429), timeouts and server errors (5xx), whole requests or single failed items of a
batch, with exponential backoff, and end in one `OpenSearchServiceError` that names the host or the variable.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from rag.core.errors import ServiceError
from rag.core.hashing import slug
from rag.core.retry import AttemptCounter, call_with_retries
from rag.records import Passage, ScoredPassage
from rag.retrieve.base import RemoteRetriever

RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})


class _NoTraceback(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info, record.exc_text = None, None
        return True


def quiet_client_log() -> None:
    """opensearch-py logs each failed attempt at WARNING with its chained urllib3 traceback (81-163 lines before
    our one-line error). Our retries say the outcome in one line, so its logger keeps ERROR and above (unless
    configured otherwise), without tracebacks."""
    logger = logging.getLogger("opensearch")
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.ERROR)
    if not any(isinstance(f, _NoTraceback) for f in logger.filters):
        logger.addFilter(_NoTraceback())


class OpenSearchServiceError(ServiceError):
    """An OpenSearch failure explained in one line (missing variable, unreachable host, refused request)."""


class _RetryableItems(Exception):
    """Some queries of an `_msearch` batch came back with a retryable per-item status."""

    def __init__(self, statuses: list[int]):
        super().__init__(f"{len(statuses)} queries failed with HTTP {sorted(set(statuses))}")
        self.statuses = statuses


def _status(err: BaseException) -> int | None:
    value = getattr(err, "status_code", None)
    return value if isinstance(value, int) else None


def is_retryable(err: BaseException) -> bool:
    if isinstance(err, _RetryableItems):
        return True
    status = _status(err)
    if status is not None:
        return status in RETRYABLE_STATUS or status >= 500
    from opensearchpy.exceptions import ConnectionError as OSConnectionError

    return isinstance(err, OSConnectionError)  # includes timeouts


class OpenSearchRetriever(RemoteRetriever):
    kind = "opensearch"

    def __init__(self, k: int = 20, index_name: str = "fineweb10bt-512-0w-e5-base-v2", host: str | None = None,
                 host_env: str | None = "OPENSEARCH_HOST", port: int | None = None, use_ssl: bool | None = None,
                 verify_certs: bool = True, access: str = "aws", user_env: str = "OPENSEARCH_USER",
                 password_env: str = "OPENSEARCH_PASSWORD", netrc_file: str | None = None,
                 aws_region: str = "us-east-1",
                 aws_profile: str | None = None, aws_service: str = "es", field: str = "text",
                 doc_id_field: str = "doc_id", text_field: str = "text", title_field: str | None = None,
                 batch_size: int = 50, concurrency: int = 4, timeout_s: float = 30.0, max_retries: int = 3,
                 backoff_initial_s: float = 1.0, backoff_max_s: float = 30.0):
        super().__init__(k)
        if access not in ("aws", "basic", "none"):
            raise ValueError(f"retriever.access must be aws, basic or none, got {access!r}")
        self.index_name = index_name
        self.host_setting, self.host_env = host, host_env
        self.port, self.use_ssl, self.verify_certs = port, use_ssl, verify_certs
        self.access, self.user_env, self.password_env = access, user_env, password_env
        self.netrc_file = netrc_file
        self.aws_region, self.aws_profile, self.aws_service = aws_region, aws_profile, aws_service
        self.field, self.doc_id_field, self.text_field, self.title_field = field, doc_id_field, text_field, title_field
        self.batch_size, self.concurrency = max(1, batch_size), max(1, concurrency)
        self.timeout_s, self.max_retries = timeout_s, max_retries
        self.backoff_initial_s, self.backoff_max_s = backoff_initial_s, backoff_max_s
        self._client = None
        self.url = ""

    @staticmethod
    def required_env(node: dict) -> list[str]:
        """Environment variables a run needs (checked by `rag.preflight` before any cell is launched)."""
        names = [] if node.get("host") else [node.get("host_env") or "OPENSEARCH_HOST"]
        if node.get("access") == "basic" and not node.get("netrc_file"):
            names += [node.get("user_env") or "OPENSEARCH_USER", node.get("password_env") or "OPENSEARCH_PASSWORD"]
        return names

    def __repr__(self) -> str:
        return f"OpenSearchRetriever(index_name={self.index_name!r}, access={self.access!r})"

    @property
    def key(self) -> str:
        return slug(f"opensearch-{self.index_name}-match_{self.field}")

    # -- connection ---------------------------------------------------------------------------------------------
    def endpoint(self) -> tuple[str, int, bool]:
        raw = self.host_setting or (os.environ.get(self.host_env, "") if self.host_env else "")
        raw = (raw or "").strip()
        if not raw:
            where = f"set retriever.host or the environment variable {self.host_env}" if self.host_env \
                else "set retriever.host"
            raise OpenSearchServiceError(f"retriever=opensearch: no OpenSearch host configured; {where}")
        parts = urlsplit(raw if "://" in raw else f"//{raw}")
        scheme_ssl = None if not parts.scheme else parts.scheme == "https"
        use_ssl = self.use_ssl if self.use_ssl is not None else (scheme_ssl if scheme_ssl is not None else True)
        port = self.port or parts.port or (443 if use_ssl else 9200)
        return parts.hostname or raw, int(port), use_ssl

    def _http_auth(self) -> tuple[Any, Any]:
        """The client's auth object and connection class for the configured auth mode."""
        from opensearchpy import RequestsHttpConnection, Urllib3HttpConnection

        if self.access == "none":
            return None, Urllib3HttpConnection
        if self.access == "basic":
            missing = [v for v in (self.user_env, self.password_env) if not os.environ.get(v)]
            if not missing:
                return (os.environ[self.user_env], os.environ[self.password_env]), Urllib3HttpConnection
            if self.netrc_file:
                return self._netrc_credentials(), Urllib3HttpConnection
            raise OpenSearchServiceError(
                f"retriever=opensearch: access=basic needs the environment variable(s) {', '.join(missing)} "
                f"(or a netrc file: retriever.netrc_file)")
        try:
            import boto3
        except ImportError:
            raise OpenSearchServiceError("retriever=opensearch: access=aws needs boto3: pip install boto3 "
                                         "(or use access=basic / access=none)") from None
        from opensearchpy import AWSV4SignerAuth

        try:
            session = boto3.Session(profile_name=self.aws_profile, region_name=self.aws_region)
            credentials = session.get_credentials()
        except Exception as err:  # e.g. an unknown profile
            raise OpenSearchServiceError(f"retriever=opensearch: AWS credentials unavailable "
                                         f"({type(err).__name__}: {_one_line(err)})") from None
        if credentials is None:
            raise OpenSearchServiceError(
                "retriever=opensearch: access=aws found no AWS credentials; set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE / retriever.aws_profile (LiveRAG: sigir-participant)")
        return AWSV4SignerAuth(credentials, self.aws_region, self.aws_service), RequestsHttpConnection

    def _netrc_credentials(self) -> tuple[str, str]:
        """(login, password) of the host's `machine` entry in `netrc_file` (the stdlib's netrc parser)."""
        import netrc

        path = os.path.expanduser(str(self.netrc_file))
        host = self.endpoint()[0]
        try:
            entry = netrc.netrc(path).authenticators(host)
        except FileNotFoundError:
            raise OpenSearchServiceError(f"retriever.netrc_file={self.netrc_file}: no such file") from None
        except (netrc.NetrcParseError, OSError) as err:
            raise OpenSearchServiceError(f"retriever.netrc_file={self.netrc_file}: unreadable "
                                         f"({type(err).__name__}: {_one_line(err)})") from None
        if not entry or not entry[0] or not entry[2]:
            raise OpenSearchServiceError(f"retriever.netrc_file={self.netrc_file}: no `machine {host}` entry with "
                                         f"a login and a password")
        return entry[0], entry[2]

    def connect(self):
        if self._client is not None:
            return self._client
        try:
            from opensearchpy import OpenSearch
        except ImportError:
            raise OpenSearchServiceError("retriever=opensearch needs opensearch-py: pip install opensearch-py "
                                         "(or the project's `services` extra)") from None
        host, port, use_ssl = self.endpoint()
        http_auth, connection_class = self._http_auth()
        quiet_client_log()
        self.url = f"{'https' if use_ssl else 'http'}://{host}:{port}"
        self._client = OpenSearch(hosts=[{"host": host, "port": port}], http_auth=http_auth, use_ssl=use_ssl,
                                  verify_certs=self.verify_certs if use_ssl else False, ssl_show_warn=False,
                                  connection_class=connection_class, timeout=self.timeout_s, max_retries=0,
                                  retry_on_timeout=False, http_compress=False)
        return self._client

    # -- search -------------------------------------------------------------------------------------------------
    def request_body(self, queries: list[str], k: int) -> list[dict[str, Any]]:
        """The `_msearch` request lines: a header naming the index, then the BM25 match query, per query."""
        source = [f for f in (self.doc_id_field, self.text_field, self.title_field) if f]
        lines: list[dict[str, Any]] = []
        for query in queries:
            lines.append({"index": self.index_name})
            lines.append({"query": {"match": {self.field: query}}, "size": k, "_source": source})
        return lines

    def _parse_hits(self, item: dict[str, Any]) -> list[ScoredPassage]:
        out = []
        for rank, hit in enumerate(item.get("hits", {}).get("hits", []), start=1):
            source = hit.get("_source") or {}
            passage_id = str(hit.get("_id"))
            title = str(source.get(self.title_field, "")) if self.title_field else ""
            passage = Passage(passage_id=passage_id, doc_id=str(source.get(self.doc_id_field, passage_id)),
                              text=str(source.get(self.text_field, "")), title=title)
            out.append(ScoredPassage(passage, float(hit.get("_score") or 0.0), rank))
        return out

    def _search_batch(self, queries: list[str], k: int) -> list[list[ScoredPassage]]:
        """One batch through `_msearch`; items that fail with a retryable status are sent again."""
        client = self.connect()
        results: list[list[ScoredPassage] | None] = [None] * len(queries)
        pending = list(range(len(queries)))

        def attempt_once() -> None:
            nonlocal pending
            response = client.msearch(body=self.request_body([queries[i] for i in pending], k))
            items = response.get("responses", [])
            if len(items) != len(pending):
                raise OpenSearchServiceError(f"retriever=opensearch: {self.url} answered {len(items)} results "
                                             f"for {len(pending)} queries")
            failed, statuses = [], []
            for i, item in zip(pending, items):
                if "error" in item:
                    status = int(item.get("status") or 500)
                    if status in RETRYABLE_STATUS or status >= 500:
                        failed.append(i)
                        statuses.append(status)
                        continue
                    raise OpenSearchServiceError(
                        f"retriever=opensearch: query refused by {self.url} (HTTP {status}): "
                        f"{_error_reason(item['error'])}")
                results[i] = self._parse_hits(item)
            pending = failed
            if failed:
                raise _RetryableItems(statuses)

        sent = AttemptCounter()
        try:
            call_with_retries(attempt_once, self.max_retries, is_retryable, self.backoff_initial_s,
                              self.backoff_max_s, on_attempt=sent)
        except OpenSearchServiceError:
            raise
        except Exception as err:
            raise OpenSearchServiceError(self.explain(err, sent.said())) from None
        return [r if r is not None else [] for r in results]

    def explain(self, err: BaseException, attempts: str = "") -> str:
        """One line for a failed request: what the cluster said, after how many requests really sent."""
        status = _status(err)
        attempts = f"after {attempts}" if attempts else ""
        if isinstance(err, _RetryableItems):
            return f"retriever=opensearch: {err} at {self.url} {attempts}"
        if status in (401, 403):
            hint = {"aws": "AWS credentials / region", "basic": f"{self.user_env}/{self.password_env}",
                    "none": "access=none; the cluster wants credentials"}[self.access]
            return f"retriever=opensearch: {self.url} refused the credentials (HTTP {status}); check {hint}"
        if status == 404:
            return f"retriever=opensearch: index {self.index_name!r} not found at {self.url} (HTTP 404)"
        if status is not None:
            return f"retriever=opensearch: {self.url} answered HTTP {status} {attempts}: {_one_line(err)}"
        return f"retriever=opensearch: cannot reach {self.url} {attempts} ({type(err).__name__})"

    def search(self, queries: list[str], k: int) -> list[list[ScoredPassage]]:
        if not queries:
            return []
        self.connect()
        batches = [queries[i:i + self.batch_size] for i in range(0, len(queries), self.batch_size)]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(batches))) as pool:
            parts = list(pool.map(lambda b: self._search_batch(b, k), batches))
        return [ranked for part in parts for ranked in part]

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = None


def _error_reason(error: Any) -> str:
    if isinstance(error, dict):
        root = (error.get("root_cause") or [{}])[0]
        return _one_line(f"{error.get('type') or root.get('type', '')}: {error.get('reason') or root.get('reason', '')}")
    return _one_line(error)


def _one_line(err: Any) -> str:
    text = " ".join(str(err).split())
    return text[:300] if text else type(err).__name__
