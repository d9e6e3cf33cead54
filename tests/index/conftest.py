"""Fixtures of the index-build tests: slices of the real FineWeb corpus, indexes built once per session through
`rag.index.main.run` on the composed conf/index.yaml (as `python -m rag.index` runs it), and the real queries of
the LiveRAG dev set."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from rag.data.corpus import JsonlCorpus
from tests.conftest import CONF_DIR, DATA_DIR

FINEWEB = DATA_DIR / "liverag_dm" / "fineweb_docs.jsonl.gz"
#: the BM25 slice: 120 documents (about 330 passages); the dense slice: 32 documents (about 80 passages)
BM25_DOCS, DENSE_DOCS = 120, 32


def read_docs(n: int, skip: int = 0) -> list[dict]:
    out = []
    with gzip.open(FINEWEB, "rt", encoding="utf-8") as handle:
        for i, line in enumerate(handle):
            if i >= skip + n:
                break
            if i >= skip:
                out.append(json.loads(line))
    return out


def write_jsonl_gz(path: Path, docs: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for doc in docs:
            handle.write(json.dumps(doc, ensure_ascii=False) + "\n")
    return path


def index_config(corpus: str | list[str], cache: Path, *overrides: str) -> DictConfig:
    """conf/index.yaml composed as `python -m rag.index corpus=... <overrides>` composes it."""
    value = corpus if isinstance(corpus, str) else "[" + ",".join(corpus) + "]"
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="index", overrides=[f"corpus={value}", f"paths.data_dir={DATA_DIR}",
                                                       f"paths.cache_dir={cache}", "index.progress=false",
                                                       *overrides])


def retriever_config(*overrides: str) -> DictConfig:
    """The pipeline's own retriever node (conf/config.yaml composed), as rag.main builds it."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=[f"paths.data_dir={DATA_DIR}", *overrides]).retriever


def slice_corpus(path: Path, cache: Path) -> JsonlCorpus:
    """The slice as the dataset config names it: rag.main's corpus object for this file."""
    return JsonlCorpus(str(path), name=path.name.split(".")[0], hash_cache_dir=str(cache / "file_hashes"))


@pytest.fixture(scope="session")
def fineweb() -> Path:
    if not FINEWEB.is_file():
        pytest.fail(f"the shared FineWeb corpus is not at {FINEWEB}; set RAG_DATA_DIR")
    return FINEWEB


@pytest.fixture(scope="session")
def bm25_slice(fineweb, tmp_path_factory) -> Path:
    return write_jsonl_gz(tmp_path_factory.mktemp("slices") / "fineweb_slice.jsonl.gz", read_docs(BM25_DOCS))


@pytest.fixture(scope="session")
def dense_slice(fineweb, tmp_path_factory) -> Path:
    return write_jsonl_gz(tmp_path_factory.mktemp("slices") / "fineweb_dense.jsonl.gz", read_docs(DENSE_DOCS))


@pytest.fixture(scope="session")
def queries(data_dir) -> list[str]:
    """40 LiveRAG dev questions, a stopwords-only query and one whose terms the corpus lacks."""
    with open(data_dir / "liverag_dm" / "dev_qa.tsv", encoding="utf-8") as handle:
        rows = [row["question"] for _, row in zip(range(40), csv.DictReader(handle, delimiter="\t"))]
    return rows + ["what is the of and", "zzqxjv blorptangle"]


@pytest.fixture(scope="session")
def index_cache(tmp_path_factory) -> Path:
    """One cache for the session's shared builds (each test that needs a fresh one makes its own)."""
    return tmp_path_factory.mktemp("index-cache")


def build(corpus: str | list[str], cache: Path, *overrides: str) -> Path:
    from rag.index.main import run

    return run(index_config(corpus, cache, *overrides))


@pytest.fixture(scope="session")
def bm25_sharded(bm25_slice, index_cache) -> Path:
    """The BM25 slice in 4 shards of parts of 12 documents (12 units), with the single bm25s index beside them."""
    return build(str(bm25_slice), index_cache, "retriever=bm25", "index.num_shards=4", "index.part_docs=12")


@pytest.fixture(scope="session")
def bm25_one(bm25_slice, tmp_path_factory) -> Path:
    """The same slice as one shard of one part: one index."""
    return build(str(bm25_slice), tmp_path_factory.mktemp("one-cache"), "retriever=bm25")


DENSE = ("retriever=dense", "index.dense_group_docs=8")


@pytest.fixture(scope="session")
def dense_sharded(dense_slice, index_cache) -> Path:
    return build(str(dense_slice), index_cache, *DENSE, "index.num_shards=3", "index.part_docs=8")


@pytest.fixture(scope="session")
def dense_one(dense_slice, tmp_path_factory) -> Path:
    return build(str(dense_slice), tmp_path_factory.mktemp("dense-one"), *DENSE)
