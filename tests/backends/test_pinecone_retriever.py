"""Pinecone retriever: the exact data-plane request the real SDK sends, response parsing, retries and errors.

The SDK talks to a real HTTP server on 127.0.0.1 that answers like Pinecone's documented `POST /query`
(`{"matches": [{"id", "score", "values", "metadata"}], "namespace", "usage": {"readUnits"}}`).
"""

from __future__ import annotations

import os
import time

import numpy as np
import pinecone  # noqa: F401  (installed by `make setup`: missing fails, never skips)
import pytest

from rag.embed import Embedder
from rag.retrieve.pinecone import PineconeRetriever, PineconeServiceError
from tests.backends.conftest import Reply

KEY = "pcsk-test-never-log-me-4242"
QUERIES = ["who wrote the iliad", "capital of france", "largest planet", "speed of light", "boiling point"]


def _match(pid: str, score: float, doc_id: str, text: str) -> dict:
    return {"id": pid, "score": score, "values": [], "metadata": {"doc_id": doc_id, "text": text}}


@pytest.fixture(scope="module")
def embedder(minilm_path) -> Embedder:
    return Embedder("all-MiniLM-L6-v2", model_path=minilm_path)


def _retriever(embedder: Embedder, url: str, **kwargs) -> PineconeRetriever:
    defaults = dict(host=url, backoff_initial_s=0.01, backoff_max_s=0.02, timeout_s=5.0)
    return PineconeRetriever(embedder=embedder, **{**defaults, **kwargs})


def test_query_request_and_parsing(fake_service, embedder, monkeypatch):
    monkeypatch.setenv("PINECONE_API_KEY", KEY)
    expected = embedder.encode_queries(QUERIES)

    def respond(rec):
        # answer for whichever query this vector is: the retriever must keep results in query order
        q = int(np.argmax(expected @ np.asarray(rec.json()["vector"], dtype=np.float32)))
        return Reply(200, {"matches": [_match(f"<urn:uuid:{q}>::chunk-0", 0.91, f"<urn:uuid:{q}>", f"text {q}"),
                                       _match(f"<urn:uuid:9{q}>::chunk-3", 0.5, f"<urn:uuid:9{q}>", "other")],
                           "namespace": "default", "usage": {"readUnits": 6}})

    fake_service.responder = respond
    retriever = _retriever(embedder, fake_service.url, concurrency=3)
    retriever.prepare(None, "unused")
    results = retriever.search(QUERIES, k=2)

    assert len(fake_service.requests) == len(QUERIES)
    for rec in fake_service.requests:
        assert (rec.method, rec.path) == ("POST", "/query")
        assert rec.headers["api-key"] == KEY
        body = rec.json()
        assert {k: v for k, v in body.items() if k != "vector"} == {
            "topK": 2, "includeValues": False, "includeMetadata": True, "namespace": "default"}
        vector = np.asarray(body["vector"], dtype=np.float32)
        assert vector.shape == (384,) and abs(float(np.linalg.norm(vector)) - 1.0) < 1e-4
    sent = sorted((np.asarray(r.json()["vector"]) for r in fake_service.requests), key=lambda v: tuple(v[:4]))
    assert all(min(np.abs(s - e).max() for e in expected) < 1e-5 for s in sent)

    for q, ranked in enumerate(results):
        assert [p.rank for p in ranked] == [1, 2]
        top = ranked[0]
        assert top.passage.passage_id == f"<urn:uuid:{q}>::chunk-0"
        assert top.passage.doc_id == f"<urn:uuid:{q}>"
        assert top.passage.text == f"text {q}"
        assert top.score == pytest.approx(0.91)
    assert retriever.stores_text


def test_prefix_and_namespace_are_configurable(fake_service, embedder, monkeypatch):
    monkeypatch.setenv("PINECONE_API_KEY", KEY)
    fake_service.replies = [Reply(200, {"matches": [], "namespace": "ns2", "usage": {"readUnits": 1}})]
    prefixed = Embedder("all-MiniLM-L6-v2", model_path=embedder.location, query_prefix="query: ")
    retriever = _retriever(prefixed, fake_service.url, namespace="ns2")
    assert retriever.search(["capital of france"], k=7) == [[]]
    body = fake_service.requests[0].json()
    assert body["namespace"] == "ns2" and body["topK"] == 7
    with_prefix = prefixed.encode(["capital of france"], "query: ")[0]
    assert np.abs(np.asarray(body["vector"]) - with_prefix).max() < 1e-5
    assert np.abs(np.asarray(body["vector"]) - embedder.encode(["capital of france"])[0]).max() > 1e-3


def test_key_is_per_index_namespace_and_model(embedder):
    a = PineconeRetriever(embedder=embedder, host="http://127.0.0.1:1")
    b = PineconeRetriever(embedder=embedder, host="http://127.0.0.1:1", namespace="other")
    assert a.key != b.key and "fineweb10bt-512-0w-e5-base-v2" in a.key and "all-MiniLM-L6-v2" in a.key


def test_missing_key_names_the_variable(embedder, monkeypatch):
    monkeypatch.delenv("PINECONE_API_KEY", raising=False)
    retriever = PineconeRetriever(embedder=embedder, host="http://127.0.0.1:1")
    with pytest.raises(PineconeServiceError) as err:
        retriever.prepare(None, "unused")
    assert "PINECONE_API_KEY" in str(err.value) and "\n" not in str(err.value)


def test_rate_limits_are_retried_by_our_layer(fake_service, embedder, monkeypatch):
    """Four 429s exhaust the SDK's own attempts (at most 4 per call); our retries must carry on."""
    monkeypatch.setenv("PINECONE_API_KEY", KEY)
    limited = Reply(429, {"code": 8, "message": "Too many requests"}, {"Retry-After": "0"})
    ok = Reply(200, {"matches": [_match("a::0", 0.8, "a", "alpha")], "namespace": "default"})
    fake_service.replies = [limited] * 4 + [ok]
    retriever = _retriever(embedder, fake_service.url, max_retries=5)
    [[hit]] = retriever.search(["capital of france"], k=1)
    assert hit.passage.text == "alpha"
    assert len(fake_service.requests) == 5


def test_rate_limit_without_our_retries_fails_with_one_line(fake_service, embedder, monkeypatch):
    monkeypatch.setenv("PINECONE_API_KEY", KEY)
    limited = Reply(429, {"code": 8, "message": "Too many requests"}, {"Retry-After": "0"})
    ok = Reply(200, {"matches": [], "namespace": "default"})
    fake_service.replies = [limited] * 4 + [ok]
    retriever = _retriever(embedder, fake_service.url, max_retries=0)
    with pytest.raises(PineconeServiceError) as err:
        retriever.search(["capital of france"], k=1)
    message = str(err.value)
    assert "429" in message and "\n" not in message and KEY not in message


def test_server_errors_are_bounded(fake_service, embedder, monkeypatch):
    monkeypatch.setenv("PINECONE_API_KEY", KEY)
    fake_service.replies = [Reply(503, {"code": 14, "message": "unavailable"}, {"Retry-After": "0"})]
    retriever = _retriever(embedder, fake_service.url, max_retries=1)
    with pytest.raises(PineconeServiceError) as err:
        retriever.search(["capital of france"], k=1)
    assert 2 <= len(fake_service.requests) <= 8  # our 2 attempts, each with at most 4 SDK tries
    assert "503" in str(err.value) and fake_service.url in str(err.value)


def test_refused_key_is_not_retried(fake_service, embedder, monkeypatch):
    monkeypatch.setenv("PINECONE_API_KEY", KEY)
    fake_service.replies = [Reply(401, {"error": {"code": "UNAUTHENTICATED", "message": "Invalid API Key"},
                                        "status": 401})]
    retriever = _retriever(embedder, fake_service.url, max_retries=3)
    with pytest.raises(PineconeServiceError) as err:
        retriever.search(["capital of france"], k=1)
    assert len(fake_service.requests) == 1
    assert "PINECONE_API_KEY" in str(err.value) and "401" in str(err.value) and KEY not in str(err.value)


def test_unreachable_host_is_named(closed_port_url, embedder, monkeypatch):
    monkeypatch.setenv("PINECONE_API_KEY", KEY)
    retriever = _retriever(embedder, closed_port_url, max_retries=0)
    start = time.perf_counter()
    with pytest.raises(PineconeServiceError) as err:
        retriever.search(["capital of france"], k=1)
    assert time.perf_counter() - start < 30
    assert "cannot reach" in str(err.value) and closed_port_url in str(err.value)


def test_timeout_is_applied(fake_service, embedder, monkeypatch):
    monkeypatch.setenv("PINECONE_API_KEY", KEY)

    def slow(rec):
        time.sleep(1.5)
        return Reply(200, {"matches": [], "namespace": "default"})

    fake_service.responder = slow
    retriever = _retriever(embedder, fake_service.url, max_retries=0, timeout_s=0.3)
    with pytest.raises(PineconeServiceError) as err:
        retriever.search(["capital of france"], k=1)
    assert fake_service.url in str(err.value)


def test_repr_and_errors_never_show_the_key(fake_service, embedder, monkeypatch, caplog):
    monkeypatch.setenv("PINECONE_API_KEY", KEY)
    fake_service.replies = [Reply(200, {"matches": [_match("a::0", 0.8, "a", "alpha")], "namespace": "default"})]
    caplog.set_level("DEBUG")
    retriever = _retriever(embedder, fake_service.url)
    retriever.search(["capital of france"], k=1)
    assert KEY not in repr(retriever) and KEY not in caplog.text
    assert KEY not in repr(vars(retriever))


@pytest.mark.live
@pytest.mark.skipif(not os.environ.get("PINECONE_API_KEY"), reason="PINECONE_API_KEY not set")
def test_live_liverag_index():
    """Against the real index (LiveRAG defaults; set E5_BASE_V2_PATH or allow Hub access for the embedder)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from tests.conftest import CONF_DIR

    retriever = instantiate(OmegaConf.load(CONF_DIR / "retriever" / "pinecone.yaml"))
    retriever.prepare(None, "unused")
    [ranked] = retriever.search(["What is the capital of France?"], k=5)
    assert len(ranked) == 5 and all(p.passage.text and p.passage.doc_id for p in ranked)
    assert [p.score for p in ranked] == sorted((p.score for p in ranked), reverse=True)
