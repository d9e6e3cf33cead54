"""Compose the real datagen config (as `python -m rag.datagen` would) and build small real corpora."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

import rag.datagen.config  # noqa: F401  (the resolver conf/datagen.yaml uses)
from rag.core.io import iter_jsonl
from tests.conftest import CONF_DIR, DATA_DIR

FINEWEB = DATA_DIR / "liverag_dm" / "fineweb_docs.jsonl.gz"


def compose_datagen(overrides: list[str], tmp_path: Path | None = None) -> DictConfig:
    base = [f"paths.data_dir={DATA_DIR}"]
    if tmp_path is not None:
        base += [f"paths.cache_dir={tmp_path / 'cache'}", f"out={tmp_path / 'out'}"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="datagen", overrides=base + overrides)


def write_corpus(path: Path, docs: list[dict]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for doc in docs:
            handle.write(json.dumps(doc) + "\n")
    return path


def fineweb_sample(path: Path, n: int) -> Path:
    """The first `n` real FineWeb documents of the shared corpus, as a small corpus file."""
    docs = []
    for row in iter_jsonl(FINEWEB):
        docs.append({"doc_id": row["doc_id"], "text": row["text"]})
        if len(docs) == n:
            break
    return write_corpus(path, docs)
