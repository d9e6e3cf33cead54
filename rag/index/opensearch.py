"""`python -m rag.index backend=opensearch`: bulk-index passages into your own OpenSearch cluster.

Each passage becomes one document with `_id` = our passage id and `_source` = {doc_id, text (, title)} under the
field names `retriever=opensearch` reads (`doc_id_field`, `text_field`, `title_field`), so that retriever returns
the passages, ids and doc ids the embedded retrievers return. Batches go through opensearch-py's
`helpers.streaming_bulk` (which re-sends items the cluster rate-limits with 429, with backoff); a batch whose
request fails (connection, timeout, 5xx) is sent again whole by our retry policy (documents are written by id,
so a repeat overwrites); an item refused for good (a mapping error) ends the run in one line naming the passage.
The connection (host, access mode, SigV4 / basic credentials) is the retriever's own client.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rag.core.retry import AttemptCounter, call_with_retries
from rag.index.ingest import ingest_part
from rag.index.plan import BuildFolder, Part
from rag.index.sources import SourcePassage
from rag.retrieve.opensearch import OpenSearchRetriever, OpenSearchServiceError, _error_reason, is_retryable

log = logging.getLogger(__name__)


class OpenSearchIngest:
    kind = "opensearch"

    def __init__(self, retriever: OpenSearchRetriever, cfg: Any):
        self.retriever = retriever
        self.batch_passages = max(1, int(cfg.batch_size))
        self.max_retries = int(cfg.max_retries)
        self.backoff_initial_s, self.backoff_max_s = float(cfg.backoff_initial_s), float(cfg.backoff_max_s)
        self.create_index, self.verify = bool(cfg.create_index), bool(cfg.verify)
        self.shards, self.replicas = int(cfg.number_of_shards), int(cfg.number_of_replicas)
        self.analyzer, self.k1, self.b = str(cfg.analyzer), float(cfg.k1), float(cfg.b)

    @property
    def name(self) -> str:
        return self.retriever.key

    def settings(self) -> dict[str, Any]:
        host, port, ssl = self.retriever.endpoint()
        return {"key": self.retriever.key, "host": f"{host}:{port}", "fields": self._fields()}

    def _fields(self) -> list[str | None]:
        r = self.retriever
        return [r.doc_id_field, r.text_field, r.title_field]

    # -- the index ------------------------------------------------------------------------------------------------
    def index_body(self) -> dict[str, Any]:
        """Settings and mappings of a new index: BM25 with our k1/b, the text analysed like retriever=bm25."""
        r = self.retriever
        properties: dict[str, Any] = {r.doc_id_field: {"type": "keyword"},
                                      r.text_field: {"type": "text", "analyzer": self.analyzer}}
        if r.title_field:
            properties[r.title_field] = {"type": "text", "analyzer": self.analyzer}
        return {"settings": {"index": {"number_of_shards": self.shards, "number_of_replicas": self.replicas,
                                       "similarity": {"default": {"type": "BM25", "k1": self.k1, "b": self.b}}}},
                "mappings": {"properties": properties}}

    def _call(self, call: Any, what: str) -> Any:
        sent = AttemptCounter()
        try:
            return call_with_retries(call, self.max_retries, is_retryable, self.backoff_initial_s,
                                     self.backoff_max_s, on_attempt=sent)
        except OpenSearchServiceError:
            raise
        except Exception as err:  # noqa: BLE001 - explained in one line, as the retriever does
            raise OpenSearchServiceError(f"backend=opensearch: {what}: "
                                         f"{self.retriever.explain(err, sent.said())}") from None

    def prepare(self, folder: BuildFolder, plan: Any) -> None:
        """Connect once and create the index if it does not exist (under the plan's lock: once per build)."""
        client = self.retriever.connect()
        name = self.retriever.index_name
        if self._call(lambda: client.indices.exists(index=name), f"checking index {name!r}"):
            return
        if not self.create_index:
            raise OpenSearchServiceError(f"backend=opensearch: index {name!r} does not exist at {self.retriever.url} "
                                         f"(backend.create_index=false)")
        self._call(lambda: client.indices.create(index=name, body=self.index_body()), f"creating index {name!r}")
        log.info("created OpenSearch index %s at %s", name, self.retriever.url)

    # -- one part -------------------------------------------------------------------------------------------------
    def actions(self, batch: list[SourcePassage]) -> Iterator[dict[str, Any]]:
        r = self.retriever
        for item in batch:
            p = item.passage
            source = {r.doc_id_field: p.doc_id, r.text_field: p.text}
            if r.title_field:
                source[r.title_field] = p.title
            yield {"_op_type": "index", "_index": r.index_name, "_id": p.passage_id, "_source": source}

    def send(self, batch: list[SourcePassage]) -> None:
        from opensearchpy import helpers

        client = self.retriever.connect()
        failures: list[dict[str, Any]] = []

        def attempt() -> None:
            failures.clear()
            for ok, item in helpers.streaming_bulk(client, self.actions(batch), chunk_size=len(batch),
                                                   raise_on_error=False, raise_on_exception=True,
                                                   max_retries=self.max_retries,
                                                   initial_backoff=self.backoff_initial_s,
                                                   max_backoff=self.backoff_max_s, yield_ok=False):
                if not ok:
                    failures.append(item)

        self._call(attempt, f"bulk request of {len(batch)} passages")
        if failures:
            info = next(iter(failures[0].values()))
            raise OpenSearchServiceError(
                f"backend=opensearch: passage {info.get('_id')!r} refused by {self.retriever.url} (HTTP "
                f"{info.get('status')}): {_error_reason(info.get('error'))}; {len(failures)} of {len(batch)} "
                f"in this batch failed")

    def build_part(self, folder: BuildFolder, part: Part, tmp: Path,
                   batches: Iterator[list[SourcePassage]]) -> dict[str, Any]:
        self.retriever.connect()
        return ingest_part(folder, part, tmp, batches, self.send)

    # -- registration -----------------------------------------------------------------------------------------------
    def merge(self, folder: BuildFolder, parts: list[tuple[Part, Path, dict[str, Any]]], out: Path,
              single: bool) -> dict[str, Any]:
        """Refresh, then check the index holds every passage (fewer: refused; more: other documents, logged)."""
        client = self.retriever.connect()
        name = self.retriever.index_name
        passages = sum(int(m["passages"]) for _, _, m in parts)
        count = None
        if self.verify:
            self._call(lambda: client.indices.refresh(index=name), f"refreshing {name!r}")
            count = int(self._call(lambda: client.count(index=name), f"counting {name!r}")["count"])
            if count < passages:
                raise OpenSearchServiceError(f"backend=opensearch: index {name!r} at {self.retriever.url} holds "
                                             f"{count} documents, the corpus has {passages} passages")
            if count > passages:
                log.warning("index %s holds %d documents, %d more than this corpus's passages", name, count,
                            count - passages)
        return {"units": [], "service": {"kind": "opensearch", "url": self.retriever.url, "index": name,
                                         "fields": self._fields(), "count": count}}
