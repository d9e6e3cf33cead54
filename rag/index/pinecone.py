"""`python -m rag.index backend=pinecone`: upsert passage vectors into your own Pinecone index.

Vectors are made by the retriever's own embedder (LiveRAG's `intfloat/e5-base-v2` with its `passage: ` prefix,
normalised, in conf/retriever/pinecone.yaml; set `E5_BASE_V2_PATH` or its `model_path`, and
`backend.service.embedder.device=cuda` on GPU tasks), so the queries `retriever=pinecone` embeds (`query: `)
meet them in the same space. Each vector is `{id: passage id, values, metadata: {doc_id, text (, title)}}`
under the field names the retriever reads. Upserts are batched (`batch_size` vectors per request, under
Pinecone's 2 MB / 1000-vector caps), retried with tenacity on rate limits, timeouts and server errors (the
retriever's rules: `rag.retrieve.pinecone.is_retryable`), and journaled per batch (`rag.index.ingest`), so a
rerun resumes where the last one stopped. Before any encoding the index is looked up on the control plane and,
when missing, created (`backend.create`: a managed index of the embedder's dimension, 768 for e5-base-v2, metric
cosine: the vectors are unit length; the call waits until it is ready); an existing index of another dimension is
refused in one line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rag.core.errors import DataError
from rag.core.retry import AttemptCounter, call_with_retries
from rag.index.ingest import ingest_part
from rag.index.plan import BuildFolder, Part
from rag.index.sources import SourcePassage, where
from rag.retrieve.pinecone import PineconeRetriever, PineconeServiceError, _get, is_retryable

log = logging.getLogger(__name__)


class PineconeIngest:
    kind = "pinecone"

    def __init__(self, retriever: PineconeRetriever, cfg: Any):
        self.retriever = retriever
        self.batch_passages = max(1, int(cfg.batch_size))
        self.encode_batch = max(1, int(cfg.encode_batch))
        self.max_retries = int(cfg.max_retries)
        self.backoff_initial_s, self.backoff_max_s = float(cfg.backoff_initial_s), float(cfg.backoff_max_s)
        self.max_metadata_bytes = int(cfg.max_metadata_bytes)
        self.create = cfg.create
        self._folder: BuildFolder | None = None

    @property
    def name(self) -> str:
        return self.retriever.key

    def settings(self) -> dict[str, Any]:
        r = self.retriever
        return {"key": r.key, "host": r.host, "vectors": r.embedder.vector_key,
                "fields": [r.doc_id_field, r.text_field, r.title_field]}

    def prepare(self, folder: BuildFolder, plan: Any) -> None:
        """Find (or create) and open the index, once per build (under the plan's lock): a missing key, host or
        index, or an index whose dimension is not the embedder's, ends here in one line, before any encoding."""
        self.ensure_index()
        self.retriever.connect()

    def ensure_index(self) -> None:
        """The index exists with the embedder's dimension: created here when missing and `create.if_missing`."""
        r, create = self.retriever, self.create
        client = r.control()
        dimension = r.embedder.dimension
        if not r.with_retries(lambda: client.indexes.exists(r.index_name), "look up the index"):
            if not create.if_missing:
                raise PineconeServiceError(f"backend=pinecone: index {r.index_name!r} does not exist on "
                                           f"{r.control_host or 'api.pinecone.io'}; create it or set "
                                           f"backend.create.if_missing=true")
            deployment = {"deployment_type": "managed", "cloud": create.cloud, "region": create.region}
            log.info("creating Pinecone index %s (%d dimensions, %s, %s %s)", r.index_name, dimension,
                     create.metric, create.cloud, create.region)
            try:  # once: a retried create could meet its own first attempt (409)
                client.indexes.create(name=r.index_name, dimension=dimension, metric=create.metric,
                                      deployment=deployment, deletion_protection=create.deletion_protection,
                                      timeout=int(create.ready_timeout_s))
            except Exception as err:  # noqa: BLE001 - one line naming the index and the call
                raise PineconeServiceError(r.explain(err, f"create index {r.index_name!r}")) from None
        model = r.with_retries(lambda: client.indexes.describe(r.index_name), "describe the index")
        if model.dimension != dimension:
            raise PineconeServiceError(
                f"backend=pinecone: index {r.index_name!r} holds {model.dimension}-dimensional vectors; the embedder "
                f"{r.embedder.name} makes {dimension} (another index_name, or the index's own embedder)")
        if not model.status.ready:
            log.warning("Pinecone index %s is not ready yet (state %s): upserts are retried", r.index_name,
                        getattr(model.status, "state", "?"))
        log.info("Pinecone index %s: %d dimensions, metric %s", r.index_name, dimension, model.metric)

    # -- one part -------------------------------------------------------------------------------------------------
    def records(self, batch: list[SourcePassage]) -> list[dict[str, Any]]:
        """The upsert records of a batch: id, the passage vector, the metadata the retriever reads."""
        r = self.retriever
        vectors = r.embedder.encode_passages([item.passage.text for item in batch])
        out = []
        for item, vector in zip(batch, vectors):
            p = item.passage
            metadata = {r.doc_id_field: p.doc_id, r.text_field: p.text}
            if r.title_field:
                metadata[r.title_field] = p.title
            size = len(json.dumps(metadata, ensure_ascii=False).encode("utf-8"))
            if size > self.max_metadata_bytes:
                files, kinds = self._folder.files(), self._folder.corpus.kinds
                raise DataError(f"{where(files[item.file_index], kinds[item.file_index], item.row)}: passage "
                                f"{p.passage_id!r} has {size} bytes of metadata, over Pinecone's "
                                f"{self.max_metadata_bytes} (backend.max_metadata_bytes); lower index.chunk_words")
            out.append({"id": p.passage_id, "values": [float(x) for x in vector], "metadata": metadata})
        return out

    def send(self, batch: list[SourcePassage]) -> None:
        r = self.retriever
        index = r.connect()
        records = self.records(batch)
        sent = AttemptCounter()
        try:
            response = call_with_retries(lambda: index.upsert(vectors=records, namespace=r.namespace),
                                         self.max_retries, is_retryable, self.backoff_initial_s, self.backoff_max_s,
                                         on_attempt=sent)
        except Exception as err:  # noqa: BLE001 - one line naming the host, as the retriever's errors do
            raise PineconeServiceError(r.explain(err, f"upsert of {len(records)} vectors", sent.said())) from None
        upserted = _get(response, "upserted_count")
        if upserted is not None and int(upserted) != len(records):
            raise PineconeServiceError(f"backend=pinecone: {r._where()} upserted {upserted} of {len(records)} "
                                       f"vectors ({records[0]['id']!r}..{records[-1]['id']!r})")

    def build_part(self, folder: BuildFolder, part: Part, tmp: Path,
                   batches: Iterator[list[SourcePassage]]) -> dict[str, Any]:
        self._folder = folder
        self.retriever.connect()
        return ingest_part(folder, part, tmp, batches, self.send)

    # -- registration -----------------------------------------------------------------------------------------------
    def merge(self, folder: BuildFolder, parts: list[tuple[Part, Path, dict[str, Any]]], out: Path,
              single: bool) -> dict[str, Any]:
        """Record what was upserted; the index's own count is logged (Pinecone counts lag writes)."""
        r = self.retriever
        index = r.connect()
        passages = sum(int(m["passages"]) for _, _, m in parts)
        count = None
        try:
            stats = index.describe_index_stats()
            namespaces = _get(stats, "namespaces") or {}
            summary = namespaces.get(r.namespace) if isinstance(namespaces, dict) else None
            count = _get(summary, "vector_count") if summary is not None else None
        except Exception as err:  # noqa: BLE001 - the upserts are acknowledged; the count is informative only
            log.warning("could not read the index's stats: %s", r.explain(err, "describe_index_stats"))
        log.info("pinecone %s namespace %s: %s vectors counted, %d passages upserted", r.index_name, r.namespace,
                 count, passages)
        return {"units": [], "service": {"kind": "pinecone", "index": r.index_name, "namespace": r.namespace,
                                         "host": r.host, "vectors": r.embedder.vector_key, "count": count,
                                         "fields": [r.doc_id_field, r.text_field, r.title_field]}}
