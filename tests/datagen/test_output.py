"""The generated folder's shape (byte-equal to the shared LiveRAG TSV for the same rows) and bad corpora."""

from __future__ import annotations

import ast
import csv
import gzip
import json
import sys
from pathlib import Path

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from rag.core.errors import DataError
from rag.data.corpus import JsonlCorpus
from rag.data.generated import GeneratedQA
from rag.data.questions import DataMorganaQA
from rag.datagen.categories import CategorySet
from rag.datagen.documents import DocumentPool
from rag.datagen.output import CORPUS_FILE, QA_FILE, QA_JSONL, place_corpus, qa_rows, write_qa
from tests.conftest import compose_config
from tests.datagen.helpers import compose_datagen, write_corpus


def _dev_rows(data_dir: Path, n: int) -> tuple[list[str], list[dict[str, str]]]:
    csv.field_size_limit(sys.maxsize)
    with open(data_dir / "liverag_dm" / "dev_qa.tsv", encoding="utf-8", newline="") as handle:
        lines = handle.read().split("\r\n")
    rows = list(csv.DictReader(lines[: n + 1], delimiter="\t"))
    return lines[: n + 1], rows


def test_tsv_is_byte_identical_to_the_shared_file_for_the_same_rows(data_dir, tmp_path):
    # the first three rows of the shared file are numbered 1..3, as the generator numbers its pairs
    original, rows = _dev_rows(data_dir, 3)
    assert [r["qid"] for r in rows] == ["1", "2", "3"]
    cfg = compose_datagen(["categories=liverag"])
    cats = CategorySet(**OmegaConf.to_container(cfg.categories, resolve=True))
    kept = [{"slot": i, "status": "kept",
             "categories": {c: r[c] for c in cats.columns()},
             "pair": {"question": r["question"], "answer": r["answer"],
                      "context": ast.literal_eval(r["context"]), "document_ids": ast.literal_eval(r["document_ids"]),
                      "generation_timestamp": r["generation_timestamp"]}} for i, r in enumerate(rows)]
    columns, out_rows = qa_rows(kept, cats)
    write_qa(tmp_path, columns, out_rows)
    written = (tmp_path / QA_FILE).read_bytes().decode("utf-8").split("\r\n")
    assert written[:-1] == original and written[-1] == ""

    # both loaders read it back; the JSONL twin gives the same questions
    tsv = DataMorganaQA(str(QA_FILE), str(tmp_path)).load()
    twin = DataMorganaQA(str(QA_JSONL), str(tmp_path)).load()
    assert [q.to_dict() for q in tsv] == [q.to_dict() for q in twin]
    assert tsv[0].gold_doc_ids == ast.literal_eval(rows[0]["document_ids"]) and tsv[0].hop == "multi"
    assert not list(tmp_path.rglob(".*.tmp"))


def test_generated_loader_keeps_every_category_column(tmp_path):
    cfg = compose_datagen(["categories=ragtifier"])
    cats = CategorySet(**OmegaConf.to_container(cfg.categories, resolve=True))
    draw = {**{k: c.name for k, c in cats.draw(0, 0).items()}, "question_multi-doc": "single-doc"}
    kept = [{"slot": 0, "status": "kept", "categories": draw,
             "pair": {"question": "Which river flows through the old town?", "answer": "The Vltava.",
                      "context": ["The Vltava flows through the old town of Prague.\tIt has many bridges."],
                      "document_ids": ["<doc-1>"], "generation_timestamp": "2026-01-01T00:00:00"}}]
    write_qa(tmp_path, *qa_rows(kept, cats))
    question = GeneratedQA(str(QA_FILE), str(tmp_path)).load()[0]
    assert question.categories["user_behavior-patterns"] == draw["user_behavior-patterns"]
    assert question.categories["question_quantitative-nature"] == draw["question_quantitative-nature"]
    assert question.gold_docs == kept[0]["pair"]["context"]  # a tab inside a document survives the TSV
    # the plain DataMorgana loader reads the same file (with the LiveRAG subset of the columns)
    assert DataMorganaQA(str(QA_FILE), str(tmp_path)).load()[0].question == question.question
    # and `dataset=generated` composes onto the folder
    dataset = instantiate(compose_config(["dataset=generated", f"paths.data_dir={tmp_path}"]).dataset)
    assert dataset.name == "generated" and dataset.questions[0].categories == question.categories


def test_corpus_is_linked_or_rewritten_where_the_dataset_config_expects_it(tmp_path):
    gz = write_corpus(tmp_path / "docs.jsonl.gz", [{"doc_id": "a", "text": "alpha beta"}])
    link = place_corpus(gz, tmp_path / "linked", "symlink", "doc_id", "text")
    assert link == tmp_path / "linked" / CORPUS_FILE and link.is_symlink() and link.resolve() == gz.resolve()
    copy = place_corpus(gz, tmp_path / "copied", "copy", "doc_id", "text")
    assert not copy.is_symlink() and copy.read_bytes() == gz.read_bytes()
    plain = tmp_path / "docs.jsonl"
    plain.write_text(json.dumps({"id": "b", "body": "gamma delta"}) + "\n")
    rewritten = place_corpus(plain, tmp_path / "rewritten", "symlink", "id", "body")
    with gzip.open(rewritten, "rt") as handle:
        assert [json.loads(line) for line in handle] == [{"doc_id": "b", "text": "gamma delta"}]


def test_empty_corpus_and_too_short_documents_are_one_clear_error(tmp_path):
    empty = write_corpus(tmp_path / "empty.jsonl.gz", [])
    with pytest.raises(DataError, match="corpus has no documents"):
        DocumentPool(JsonlCorpus(str(empty)))
    blank = write_corpus(tmp_path / "blank.jsonl.gz", [{"doc_id": "a", "text": "   "}])
    with pytest.raises(DataError, match="corpus has no documents"):
        DocumentPool(JsonlCorpus(str(blank)))
    short = write_corpus(tmp_path / "short.jsonl.gz", [{"doc_id": "a", "text": "only five words in here"},
                                                       {"doc_id": "b", "text": "three words here"}])
    with pytest.raises(DataError, match=r"short\.jsonl\.gz: no document has at least 80 words \(the longest has 5\)"
                       r".*; lower documents\.min_words$"):  # the setting as rag.datagen's config names it
        DocumentPool(JsonlCorpus(str(short)), min_words=80)
