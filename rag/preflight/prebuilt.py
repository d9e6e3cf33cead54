"""A retriever that searches an index built beforehand, crossed with the dataset whose corpus it should hold.

`retriever=sharded` (rag/retrieve/sharded.py) searches shards `python -m rag.index` built from corpus files
(`{doc_id, text}` .jsonl, .jsonl.gz, FineWeb .parquet: rag/index/). A dataset whose corpus comes from another shape
(HotpotQA's and MuSiQue's paragraph lists, SQuAD's articles, an ir_datasets collection) can never have such an
index: the run's own hint ("build it: python -m rag.index corpus=...") would name a command that refuses the file.
The preflight refuses the combination in one line instead, before anything is loaded, and names what runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rag.core.components import component_class
from rag.preflight.attack import retriever_classes


def unbuildable_index(data: Mapping[str, Any]) -> str | None:
    """The problem of a prebuilt-index retriever over a corpus `python -m rag.index` cannot read; None otherwise."""
    needing = [(path, cls) for path, cls in retriever_classes(data.get("retriever"), "retriever")
               if getattr(cls, "needs_prebuilt_index", False)]
    dataset = data.get("dataset")
    corpus = dataset.get("corpus") if isinstance(dataset, Mapping) else None
    if not needing or not isinstance(corpus, Mapping) or not corpus.get("_target_"):
        return None
    corpus_cls = component_class(str(corpus["_target_"]))
    if getattr(corpus_cls, "indexable_files", False):
        return None
    path, cls = needing[0]
    name = dataset.get("name") or "?"
    where = f" ({corpus.get('path')})" if corpus.get("path") else ""
    return (f"retriever={cls.kind} searches an index python -m rag.index builds from corpus files (.jsonl, "
            f".jsonl.gz, .parquet), but dataset={name}'s corpus is a {corpus_cls.__name__}{where}, which it cannot "
            f"index: use retriever=bm25 or retriever=dense (the same index, built by the run itself)")
