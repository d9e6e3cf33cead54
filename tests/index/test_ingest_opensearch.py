"""`python -m rag.index backend=opensearch`: the exact requests opensearch-py sends to create the index and bulk-index
our passages, per-item and whole-request retries, resume from the journal, and the final refresh and count.

The real client talks to an HTTP server on 127.0.0.1 that answers like OpenSearch's documented APIs: `HEAD /<index>`
(200 or 404), `PUT /<index>` (`{"acknowledged", "shards_acknowledged", "index"}`), `POST /_bulk` (`{"took",
"errors", "items": [{"index": {"_index", "_id", "_version", "result", "_shards", "status"}}]}`, failed items with
`"error": {"type", "reason"}` and their status), `POST /<index>/_refresh` and `/<index>/_count` (`{"count"}`).
"""

from __future__ import annotations

import json
import os
import threading

import pytest

from rag.index.main import run
from rag.retrieve.opensearch import OpenSearchServiceError
from tests.backends.conftest import FakeService, Recorded, Reply
from tests.index.conftest import index_config, read_docs, slice_corpus, write_jsonl_gz

INDEX = "my-fineweb-passages"
PASSWORD = "os-ingest-secret-never-log-me"


class Cluster:
    """An OpenSearch stand-in that keeps what it was sent: documents by id, the index's creation body."""

    def __init__(self, index: str = INDEX):
        self.index = index
        self.exists = False
        self.created: dict | None = None
        self.docs: dict[str, dict] = {}
        self.bulk_requests: list[list[dict]] = []
        #: per bulk request number (0-based): a function (action, source) -> error item or None
        self.item_errors: dict[int, object] = {}
        #: per bulk request number: an HTTP status for the whole request
        self.request_errors: dict[int, int] = {}
        self.lock = threading.Lock()

    def __call__(self, rec: Recorded) -> Reply:
        path = rec.path.split("?")[0]
        if rec.method == "HEAD" and path == f"/{self.index}":
            return Reply(200 if self.exists else 404, b"")
        if rec.method == "PUT" and path == f"/{self.index}":
            self.exists, self.created = True, rec.json()
            return Reply(200, {"acknowledged": True, "shards_acknowledged": True, "index": self.index})
        if path == "/_bulk":
            return self.bulk(rec)
        if path == f"/{self.index}/_refresh":
            return Reply(200, {"_shards": {"total": 2, "successful": 1, "failed": 0}})
        if path == f"/{self.index}/_count":
            return Reply(200, {"count": len(self.docs), "_shards": {"total": 1, "successful": 1, "skipped": 0,
                                                                    "failed": 0}})
        return Reply(404, {"error": f"unexpected {rec.method} {path}"})

    def bulk(self, rec: Recorded) -> Reply:
        lines = rec.ndjson()
        with self.lock:
            number = len(self.bulk_requests)
            self.bulk_requests.append(lines)
        if number in self.request_errors:
            status = self.request_errors[number]
            return Reply(status, {"error": {"type": "unavailable", "reason": "busy"}, "status": status})
        items, errors = [], False
        for action, source in zip(lines[0::2], lines[1::2]):
            meta = action["index"]
            failure = self.item_errors.get(number, lambda a, s: None)(meta, source)
            if failure:
                errors = True
                items.append({"index": {"_index": meta["_index"], "_id": meta["_id"], **failure}})
                continue
            self.docs[meta["_id"]] = source
            items.append({"index": {"_index": meta["_index"], "_id": meta["_id"], "_version": 1, "result": "created",
                                    "_shards": {"total": 2, "successful": 1, "failed": 0}, "_seq_no": 0,
                                    "_primary_term": 1, "status": 201}})
        return Reply(200, {"took": 3, "errors": errors, "items": items})


@pytest.fixture
def cluster(monkeypatch):
    service, state = FakeService(), Cluster()
    service.responder = state
    monkeypatch.setenv("OPENSEARCH_USER", "indexer")
    monkeypatch.setenv("OPENSEARCH_PASSWORD", PASSWORD)
    yield service, state
    service.close()


@pytest.fixture(scope="module")
def small_corpus(fineweb, tmp_path_factory):
    return write_jsonl_gz(tmp_path_factory.mktemp("os") / "small.jsonl.gz", read_docs(12))


def _config(corpus, cache, url, *extra):
    return index_config(str(corpus), cache, "backend=opensearch", f"backend.service.host={url}",
                        "backend.service.access=basic", f"backend.service.index_name={INDEX}",
                        "backend.batch_size=10", "backend.backoff_initial_s=0.01", "backend.backoff_max_s=0.02",
                        "backend.service.backoff_initial_s=0.01", "backend.service.backoff_max_s=0.02", *extra)


def test_index_creation_bulk_requests_and_registration(cluster, small_corpus, tmp_path, caplog):
    service, state = cluster
    caplog.set_level("DEBUG")
    folder = run(_config(small_corpus, tmp_path, service.url, "index.num_shards=2"))
    passages = slice_corpus(small_corpus, tmp_path).passages
    head, put = service.requests[0], service.requests[1]
    assert (head.method, head.path) == ("HEAD", f"/{INDEX}") and (put.method, put.path) == ("PUT", f"/{INDEX}")
    assert put.json() == {
        "settings": {"index": {"number_of_shards": 1, "number_of_replicas": 1,
                               "similarity": {"default": {"type": "BM25", "k1": 1.5, "b": 0.75}}}},
        "mappings": {"properties": {"doc_id": {"type": "keyword"}, "text": {"type": "text", "analyzer": "english"}}}}
    bulks = [r for r in service.requests if r.path.startswith("/_bulk")]
    assert all(r.method == "POST" and r.body.endswith(b"\n") for r in bulks)
    assert bulks[0].headers["authorization"].startswith("Basic ")
    sent = [line for r in bulks for line in r.ndjson()]
    assert sent[0::2] == [{"index": {"_index": INDEX, "_id": p.passage_id}} for p in passages]
    assert sent[1::2] == [{"doc_id": p.doc_id, "text": p.text} for p in passages]
    assert all(len(r.ndjson()) // 2 <= 10 for r in bulks)
    assert [r.path.split("?")[0] for r in service.requests[-2:]] == [f"/{INDEX}/_refresh", f"/{INDEX}/_count"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["kind"] == "opensearch" and manifest["passages"] == len(passages)
    assert manifest["service"]["count"] == len(passages) and manifest["service"]["index"] == INDEX
    assert folder.name.startswith(f"opensearch-{INDEX}-match_text__small-")
    assert PASSWORD not in (folder / "manifest.json").read_text() and PASSWORD not in caplog.text


def test_rate_limited_items_are_resent_alone(cluster, small_corpus, tmp_path):
    service, state = cluster
    state.exists = True
    limited = {"status": 429, "error": {"type": "es_rejected_execution_exception", "reason": "queue full"}}
    state.item_errors[0] = lambda meta, source: limited if meta["_id"].endswith("#p1") else None
    run(_config(small_corpus, tmp_path, service.url, "backend.max_retries=2"))
    first, second = state.bulk_requests[0], state.bulk_requests[1]
    resent = [a["index"]["_id"] for a in second[0::2]]
    assert resent == [a["index"]["_id"] for a in first[0::2] if a["index"]["_id"].endswith("#p1")] and resent
    assert len(state.docs) == len(slice_corpus(small_corpus, tmp_path).passages)
    assert not any(r.method == "PUT" for r in service.requests)  # the index existed


def test_refused_item_is_one_line_and_the_rerun_resumes_after_the_journal(cluster, small_corpus, tmp_path):
    service, state = cluster
    refused = {"status": 400, "error": {"type": "mapper_parsing_exception", "reason": "failed to parse [text]"}}
    state.item_errors[2] = lambda meta, source: refused if meta["_id"].endswith("#p0") else None
    with pytest.raises(OpenSearchServiceError) as err:
        run(_config(small_corpus, tmp_path, service.url))
    message = str(err.value)
    assert "\n" not in message and "mapper_parsing_exception: failed to parse [text]" in message
    assert "HTTP 400" in message and "#p0'" in message
    assert len(state.bulk_requests) == 3
    state.item_errors.clear()
    before = len(state.bulk_requests)
    run(_config(small_corpus, tmp_path, service.url))
    resumed = state.bulk_requests[before:]
    first_resent = resumed[0][0]["index"]["_id"]
    assert first_resent == state.bulk_requests[2][0]["index"]["_id"]  # batches 0 and 1 were not sent again
    assert len(state.docs) == len(slice_corpus(small_corpus, tmp_path).passages)


def test_server_errors_resend_the_whole_batch_then_give_up_in_one_line(cluster, small_corpus, tmp_path):
    service, state = cluster
    state.exists = True
    state.request_errors[1] = 503
    run(_config(small_corpus, tmp_path / "a", service.url, "backend.max_retries=1"))
    assert state.bulk_requests[1] == state.bulk_requests[2]  # the failed request sent again, whole
    state.request_errors.update({i: 503 for i in range(len(state.bulk_requests), len(state.bulk_requests) + 10)})
    with pytest.raises(OpenSearchServiceError) as err:
        run(_config(small_corpus, tmp_path / "b", service.url, "backend.max_retries=1"))
    assert "503" in str(err.value) and service.url.split("//")[1] in str(err.value) and "\n" not in str(err.value)


def test_missing_host_names_the_variable(small_corpus, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENSEARCH_HOST", raising=False)
    cfg = index_config(str(small_corpus), tmp_path, "backend=opensearch", "backend.service.access=none")
    with pytest.raises(OpenSearchServiceError, match="OPENSEARCH_HOST"):
        run(cfg)


@pytest.mark.live
@pytest.mark.skipif(not (os.environ.get("OPENSEARCH_HOST") and os.environ.get("RAG_TEST_OPENSEARCH_INDEX")),
                    reason="OPENSEARCH_HOST or RAG_TEST_OPENSEARCH_INDEX not set")
def test_live_ingest_then_retrieve(small_corpus, tmp_path):
    """Into your cluster, an index you name for it in RAG_TEST_OPENSEARCH_INDEX (never LiveRAG's): 12 FineWeb
    documents bulk-indexed, then found by retriever=opensearch with our passage ids."""
    from hydra.utils import instantiate

    name = os.environ["RAG_TEST_OPENSEARCH_INDEX"]
    cfg = index_config(str(small_corpus), tmp_path, "backend=opensearch", f"backend.service.index_name={name}")
    run(cfg)
    retriever = instantiate(cfg.backend.service)
    retriever.prepare(None, tmp_path)
    passages = slice_corpus(small_corpus, tmp_path).passages
    [ranked] = retriever.search([passages[0].text[:200]], k=3)
    assert ranked[0].passage.passage_id == passages[0].passage_id and ranked[0].passage.text == passages[0].text
