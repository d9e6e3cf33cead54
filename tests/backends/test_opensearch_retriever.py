"""OpenSearch retriever: the exact `_msearch` request opensearch-py sends, parsing, auth, retries and errors.

The real client talks to an HTTP server on 127.0.0.1 that answers like OpenSearch's documented multi-search
API: `{"took", "responses": [{"took", "timed_out", "_shards", "hits": {"total", "max_score", "hits": [{"_index",
"_id", "_score", "_source"}]}, "status"}]}`, with per-item `{"error": {...}, "status": N}` for failed searches.
"""

from __future__ import annotations

import base64
import os
import time

import opensearchpy  # noqa: F401  (installed by `make setup`: missing fails, never skips)
import pytest

from rag.retrieve.opensearch import OpenSearchRetriever, OpenSearchServiceError
from tests.backends.conftest import Reply

INDEX = "fineweb10bt-512-0w-e5-base-v2"
PASSWORD = "os-pass-never-log-me-77"


def _hits(query: str, n: int = 2) -> dict:
    hits = [{"_index": INDEX, "_id": f"<urn:uuid:{query}>::chunk-{i}", "_score": 10.0 - i,
             "_source": {"doc_id": f"<urn:uuid:{query}>", "text": f"{query} passage {i}"}} for i in range(n)]
    return {"took": 4, "timed_out": False, "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
            "hits": {"total": {"value": n, "relation": "eq"}, "max_score": 10.0 if n else None, "hits": hits},
            "status": 200}


def _echo(rec) -> Reply:
    """Answer each query of an `_msearch` body with hits named after the query text."""
    lines = rec.ndjson()
    queries = [body["query"]["match"]["text"] for body in lines[1::2]]
    return Reply(200, {"took": 5, "responses": [_hits(q) for q in queries]})


def _retriever(url: str, **kwargs) -> OpenSearchRetriever:
    defaults = dict(host=url, access="basic", backoff_initial_s=0.01, backoff_max_s=0.02, timeout_s=5.0)
    return OpenSearchRetriever(**{**defaults, **kwargs})


@pytest.fixture
def basic_env(monkeypatch):
    monkeypatch.setenv("OPENSEARCH_USER", "reader")
    monkeypatch.setenv("OPENSEARCH_PASSWORD", PASSWORD)


def test_msearch_request_and_parsing(fake_service, basic_env):
    fake_service.responder = _echo
    retriever = _retriever(fake_service.url)
    retriever.prepare(None, "unused")
    results = retriever.search(["capital of france", "largest planet"], k=2)

    [rec] = fake_service.requests
    assert (rec.method, rec.path) == ("POST", "/_msearch")
    assert rec.headers["authorization"] == "Basic " + base64.b64encode(f"reader:{PASSWORD}".encode()).decode()
    assert rec.ndjson() == [
        {"index": INDEX}, {"query": {"match": {"text": "capital of france"}}, "size": 2, "_source": ["doc_id", "text"]},
        {"index": INDEX}, {"query": {"match": {"text": "largest planet"}}, "size": 2, "_source": ["doc_id", "text"]},
    ]
    assert rec.body.endswith(b"\n")  # NDJSON needs the final newline
    for query, ranked in zip(["capital of france", "largest planet"], results):
        assert [p.rank for p in ranked] == [1, 2]
        assert [p.score for p in ranked] == [10.0, 9.0]
        assert ranked[0].passage.passage_id == f"<urn:uuid:{query}>::chunk-0"
        assert ranked[0].passage.doc_id == f"<urn:uuid:{query}>"
        assert ranked[0].passage.text == f"{query} passage 0"
    assert retriever.stores_text


def test_batches_keep_query_order(fake_service, basic_env):
    fake_service.responder = _echo
    queries = [f"question {i}" for i in range(7)]
    results = _retriever(fake_service.url, batch_size=3, concurrency=2).search(queries, k=2)
    assert sorted(len(r.ndjson()) // 2 for r in fake_service.requests) == [1, 3, 3]
    assert [ranked[0].passage.doc_id for ranked in results] == [f"<urn:uuid:{q}>" for q in queries]


def test_host_port_and_scheme_from_env(fake_service, basic_env, monkeypatch):
    fake_service.responder = _echo
    monkeypatch.setenv("OPENSEARCH_HOST", fake_service.url)
    retriever = OpenSearchRetriever(access="basic", host=None, max_retries=0)
    assert retriever.search(["x"], k=2)[0][0].passage.text == "x passage 0"
    assert len(fake_service.requests) == 1


def test_sigv4_signing(fake_service, monkeypatch):
    import boto3  # noqa: F401  (installed by `make setup`: missing fails, never skips)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLETEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-never-log-me")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    fake_service.responder = _echo
    _retriever(fake_service.url, access="aws", aws_region="us-east-1").search(["capital of france"], k=2)
    [rec] = fake_service.requests
    auth = rec.headers["authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLETEST/")
    assert "/us-east-1/es/aws4_request" in auth and "SignedHeaders=" in auth and "host" in auth
    assert "x-amz-date" in rec.headers and "x-amz-content-sha256" in rec.headers
    assert "secret-never-log-me" not in str(rec.headers)


def test_aws_without_credentials_says_so(monkeypatch, tmp_path):
    import boto3  # noqa: F401  (installed by `make setup`: missing fails, never skips)
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(OpenSearchServiceError) as err:
        _retriever("http://127.0.0.1:1", access="aws").prepare(None, "unused")
    assert "AWS_ACCESS_KEY_ID" in str(err.value) and "\n" not in str(err.value)


def test_missing_host_and_password_name_the_variables(monkeypatch):
    monkeypatch.delenv("OPENSEARCH_HOST", raising=False)
    with pytest.raises(OpenSearchServiceError, match="OPENSEARCH_HOST"):
        OpenSearchRetriever(access="none").prepare(None, "unused")
    monkeypatch.setenv("OPENSEARCH_USER", "reader")
    monkeypatch.delenv("OPENSEARCH_PASSWORD", raising=False)
    with pytest.raises(OpenSearchServiceError, match="OPENSEARCH_PASSWORD"):
        OpenSearchRetriever(access="basic", host="http://127.0.0.1:1").prepare(None, "unused")


def test_failed_items_are_retried_alone(fake_service, basic_env):
    """A 429 on one query of a batch re-sends only that query; the others keep their first answer."""
    def respond(rec):
        queries = [body["query"]["match"]["text"] for body in rec.ndjson()[1::2]]
        if len(fake_service.requests) == 1:
            limited = {"error": {"type": "es_rejected_execution_exception", "reason": "rejected"}, "status": 429}
            return Reply(200, {"took": 1, "responses": [_hits(queries[0]), limited, _hits(queries[2])]})
        return Reply(200, {"took": 1, "responses": [_hits(q) for q in queries]})

    fake_service.responder = respond
    results = _retriever(fake_service.url, max_retries=2).search(["a", "b", "c"], k=2)
    assert len(fake_service.requests) == 2
    assert [b["query"]["match"]["text"] for b in fake_service.requests[1].ndjson()[1::2]] == ["b"]
    assert [r[0].passage.doc_id for r in results] == ["<urn:uuid:a>", "<urn:uuid:b>", "<urn:uuid:c>"]


def test_server_errors_are_bounded(fake_service, basic_env):
    fake_service.replies = [Reply(503, {"error": {"type": "unavailable", "reason": "busy"}, "status": 503})]
    with pytest.raises(OpenSearchServiceError) as err:
        _retriever(fake_service.url, max_retries=2).search(["a"], k=2)
    assert len(fake_service.requests) == 3  # client retries off: exactly our 1 + 2
    message = str(err.value)
    assert "503" in message and fake_service.url in message and "\n" not in message


def test_rate_limited_request_is_retried(fake_service, basic_env):
    fake_service.replies = [Reply(429, {"error": {"type": "too_many_requests"}, "status": 429}),
                            Reply(200, {"took": 1, "responses": [_hits("a")]})]
    assert _retriever(fake_service.url, max_retries=1).search(["a"], k=2)[0][0].passage.doc_id == "<urn:uuid:a>"
    assert len(fake_service.requests) == 2


def test_missing_index_is_not_retried(fake_service, basic_env):
    missing = {"error": {"root_cause": [{"type": "index_not_found_exception", "reason": "no such index [x]"}],
                         "type": "index_not_found_exception", "reason": "no such index [x]"}, "status": 404}
    fake_service.replies = [Reply(200, {"took": 1, "responses": [missing]})]
    with pytest.raises(OpenSearchServiceError, match="index_not_found_exception"):
        _retriever(fake_service.url, max_retries=3).search(["a"], k=2)
    assert len(fake_service.requests) == 1


def test_refused_credentials(fake_service, basic_env):
    fake_service.replies = [Reply(401, {"error": "Unauthorized"}, {"WWW-Authenticate": "Basic"})]
    with pytest.raises(OpenSearchServiceError) as err:
        _retriever(fake_service.url, max_retries=3).search(["a"], k=2)
    assert len(fake_service.requests) == 1
    assert "OPENSEARCH_USER" in str(err.value) and PASSWORD not in str(err.value)


def test_unreachable_and_slow_hosts_are_named(closed_port_url, fake_service, basic_env):
    with pytest.raises(OpenSearchServiceError) as err:
        _retriever(closed_port_url, max_retries=1).search(["a"], k=2)
    assert "cannot reach" in str(err.value) and closed_port_url in str(err.value)

    def slow(rec):
        time.sleep(1.0)
        return _echo(rec)

    fake_service.responder = slow
    with pytest.raises(OpenSearchServiceError, match="cannot reach"):
        _retriever(fake_service.url, max_retries=0, timeout_s=0.2).search(["a"], k=2)


def test_repr_and_logs_never_show_the_password(fake_service, basic_env, caplog):
    caplog.set_level("DEBUG")
    fake_service.responder = _echo
    retriever = _retriever(fake_service.url)
    retriever.search(["a"], k=2)
    assert PASSWORD not in repr(retriever) and PASSWORD not in caplog.text


@pytest.mark.live
@pytest.mark.skipif(not os.environ.get("OPENSEARCH_HOST"), reason="OPENSEARCH_HOST not set")
def test_live_index():
    """Against the real cluster (access mode from $OPENSEARCH_ACCESS: aws with AWS credentials, or basic)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from tests.conftest import CONF_DIR

    retriever = instantiate(OmegaConf.load(CONF_DIR / "retriever" / "opensearch.yaml"))
    retriever.prepare(None, "unused")
    [ranked] = retriever.search(["What is the capital of France?"], k=5)
    assert len(ranked) == 5 and all(p.passage.text and p.passage.doc_id for p in ranked)
