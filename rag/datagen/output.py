"""The generated data folder: the LiveRAG dev-set layout, so `rag.main dataset=liverag_dev` reads it unchanged.

    <out>/liverag_dm/dev_qa.tsv            the exact TSV shape of the shared LiveRAG dev file
    <out>/liverag_dm/dev_qa.jsonl          the same rows as JSON lines (lists as JSON lists)
    <out>/liverag_dm/fineweb_docs.jsonl.gz the corpus the dataset config expects (a link to, or a copy of, ours)

TSV columns follow the shared file: qid, question, answer, context (a Python-literal list of the gold document
texts), document_ids (a Python-literal list, aligned with context), one column per categorization
(`question_<name>`, `user_<name>`, `question_multi-doc` always present), generation_timestamp and word counts.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

from rag.core.io import atomic_write_bytes, atomic_write_jsonl, iter_jsonl_numbered
from rag.datagen.categories import MULTI_DOC_CATEGORIZATION, CategorySet

QA_FILE = Path("liverag_dm") / "dev_qa.tsv"
QA_JSONL = Path("liverag_dm") / "dev_qa.jsonl"
CORPUS_FILE = Path("liverag_dm") / "fineweb_docs.jsonl.gz"


def qa_rows(kept: list[dict[str, Any]], categories: CategorySet) -> tuple[list[str], list[dict[str, Any]]]:
    """Header and rows (lists still as lists) for kept slot rows in slot order; qids are 1..N."""
    multi_column = f"question_{MULTI_DOC_CATEGORIZATION}"
    columns = ["qid", "question", "answer", "context", "document_ids", *categories.columns(),
               "generation_timestamp", "question_length", "answer_length", "context_length"]
    rows = []
    for qid, slot in enumerate(kept, start=1):
        pair = slot["pair"]
        cats = dict(slot["categories"])
        cats.setdefault(multi_column, "multi-doc" if len(pair["document_ids"]) > 1 else "single-doc")
        rows.append({"qid": str(qid), "question": pair["question"], "answer": pair["answer"],
                     "context": list(pair["context"]), "document_ids": list(pair["document_ids"]),
                     **{c: cats[c] for c in categories.columns()},
                     "generation_timestamp": pair["generation_timestamp"],
                     "question_length": len(pair["question"].split()),
                     "answer_length": len(pair["answer"].split()),
                     "context_length": sum(len(t.split()) for t in pair["context"])})
    return columns, rows


def write_qa(out: Path, columns: list[str], rows: list[dict[str, Any]]) -> None:
    """The TSV (csv's default quoting and CRLF rows, as the shared file) and its JSONL twin, each atomically."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=columns, delimiter="\t")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: (repr(v) if isinstance(v, list) else v) for k, v in row.items()})
    atomic_write_jsonl(out / QA_JSONL, rows)
    atomic_write_bytes(out / QA_FILE, buffer.getvalue().encode("utf-8"))


def place_corpus(source: Path, out: Path, mode: str, id_field: str, text_field: str) -> Path:
    """Put the corpus where the dataset config looks for it: a symlink or a copy, gzip `{doc_id, text}` lines.

    A corpus that is not gzipped or names its fields differently is rewritten (atomically) in that shape.
    """
    if mode not in ("symlink", "copy"):
        raise ValueError(f"corpus_placement must be symlink or copy, got {mode!r}")
    target = out / CORPUS_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    source = source.resolve()
    if target.exists() and target.resolve() == source:
        return target
    tmp = target.parent / f".{target.name}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        if source.suffix == ".gz" and (id_field, text_field) == ("doc_id", "text"):
            if mode == "symlink":
                os.symlink(source, tmp)
            else:
                shutil.copyfile(source, tmp)
        else:
            with gzip.open(tmp, "wt", encoding="utf-8") as handle:
                for _, row in iter_jsonl_numbered(source):
                    handle.write(json.dumps({"doc_id": str(row.get(id_field, "")), "text": row.get(text_field, "")},
                                            ensure_ascii=False) + "\n")
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return target

