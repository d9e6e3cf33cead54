"""Bad input ends in one clear error naming the file and line/row, or a warning with a count."""

from __future__ import annotations

import gzip
import json
import logging

import pytest

from rag.core.errors import DataError, MissingDataError
from rag.data.corpus import JsonlCorpus, chunk_words
from rag.data.dataset import Dataset
from rag.data.questions import DataMorganaQA, LiveRagQuestions

HEADER = "qid\tquestion\tanswer\tcontext\tdocument_ids\tquestion_multi-doc\n"


def test_tsv_row_with_extra_field_names_file_and_line(tmp_path):
    path = tmp_path / "qa.tsv"
    path.write_text(HEADER + "1\tq?\ta\t['x']\t['d1']\tsingle-doc\n2\tq2?\ta\t['x']\t['d1']\tsingle-doc\textra\n")
    with pytest.raises(DataError, match=r"qa\.tsv:3: row has more fields"):
        DataMorganaQA(str(path)).load()


@pytest.mark.parametrize("name", ["qa.tsv", "qa.tsv.gz"])
def test_byte_order_mark_is_not_part_of_the_first_column(tmp_path, name):
    """A file saved with a UTF-8 byte-order mark was once rejected as `missing column(s) qid`."""
    path = tmp_path / name
    data = "\ufeff" + HEADER + "1\tq?\ta\t['x']\t['d1']\tsingle-doc\n"
    path.write_bytes(gzip.compress(data.encode("utf-8")) if name.endswith(".gz") else data.encode("utf-8"))
    assert [q.id for q in DataMorganaQA(str(path)).load()] == ["1"]
    jsonl = tmp_path / "live.jsonl"
    jsonl.write_bytes("\ufeff".encode() + json.dumps({"id": 7, "question": "Why?"}).encode() + b"\n")
    assert [q.question for q in LiveRagQuestions(str(jsonl)).load()] == ["Why?"]


def test_tsv_bad_literal_list(tmp_path):
    path = tmp_path / "qa.tsv"
    path.write_text(HEADER + "1\tq?\ta\tnot a list\t['d1']\tsingle-doc\n")
    with pytest.raises(DataError, match=r"qa\.tsv:2: column 'context' is not a Python-literal list"):
        DataMorganaQA(str(path)).load()


def test_empty_question_is_an_error_or_skipped(tmp_path, caplog):
    path = tmp_path / "qa.tsv"
    path.write_text(HEADER + "1\t  \ta\t['x']\t['d1']\tsingle-doc\n2\tok?\ta\t['x']\t['d1']\tsingle-doc\n")
    with pytest.raises(DataError, match=r"qa\.tsv:2: empty question"):
        DataMorganaQA(str(path)).load()
    with caplog.at_level(logging.WARNING):
        questions = DataMorganaQA(str(path), skip_invalid=True).load()
    assert [q.id for q in questions] == ["2"]
    assert "empty question" in caplog.text


def test_malformed_jsonl_line(tmp_path):
    path = tmp_path / "questions.jsonl"
    path.write_text('{"id": 1, "question": "a?"}\n{"id": 2, "question": \n')
    with pytest.raises(DataError, match=r"questions\.jsonl:2: malformed JSON line"):
        LiveRagQuestions(str(path)).load()


def test_malformed_corpus_line_gz(tmp_path):
    path = tmp_path / "docs.jsonl.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(json.dumps({"doc_id": "a", "text": "x y"}) + "\n" + json.dumps({"id": "b"}) + "\n")
    with pytest.raises(DataError, match=r"docs\.jsonl\.gz:2: record lacks 'doc_id' or 'text'"):
        _ = JsonlCorpus(str(path)).passages


def test_missing_data_file_says_where_and_how(tmp_path):
    with pytest.raises(MissingDataError) as err:
        DataMorganaQA("liverag_dm/dev_qa.tsv", data_dir=str(tmp_path)).load()
    message = str(err.value)
    assert str(tmp_path / "liverag_dm" / "dev_qa.tsv") in message
    assert "RAG_DATA_DIR" in message and "paths.data_dir" in message


def test_corpus_lacking_gold_document_warns_and_counts(tmp_path, caplog):
    qa = tmp_path / "qa.tsv"
    qa.write_text(HEADER + "1\tq?\ta\t['x', 'y']\t['d1', 'd9']\tmulti-aspect\n")
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"doc_id": "d1", "text": "some words"}) + "\n")
    dataset = Dataset("tiny", DataMorganaQA(str(qa)), JsonlCorpus(str(docs)))
    with caplog.at_level(logging.WARNING):
        coverage = dataset.gold_coverage()
    assert coverage == {"gold_docs": 2, "gold_docs_missing_from_corpus": 1}
    assert "not in corpus" in caplog.text and "d9" in caplog.text


def test_offset_and_limit_select_a_slice_and_an_offset_past_the_end_is_refused(tmp_path):
    """Slices add up to the whole file (a long benchmark run in parts); an offset that skips every question
    names the setting and the file instead of running nothing."""
    qa = tmp_path / "qa.tsv"
    qa.write_text(HEADER + "".join(f"{i}\tq{i}?\ta\t['x']\t['d1']\tsingle-doc\n" for i in range(5)))
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"doc_id": "d1", "text": "some words"}) + "\n")

    def ids(**kwargs) -> list[str]:
        return [q.id for q in Dataset("tiny", DataMorganaQA(str(qa)), JsonlCorpus(str(docs)), **kwargs).questions]

    assert ids(limit=2) + ids(offset=2, limit=2) + ids(offset=4) == ids() == ["0", "1", "2", "3", "4"]
    assert Dataset("tiny", DataMorganaQA(str(qa)), JsonlCorpus(str(docs)), offset=2, limit=2).key != \
        Dataset("tiny", DataMorganaQA(str(qa)), JsonlCorpus(str(docs)), limit=2).key
    with pytest.raises(ValueError, match=r"dataset\.offset=5 skips all 5 questions of .*qa\.tsv"):
        ids(offset=5)
    with pytest.raises(ValueError, match=r"dataset\.offset must be 0 or a positive integer"):
        ids(offset=-1)


@pytest.mark.parametrize("name, text", [("qa.tsv", HEADER), ("qa.jsonl", ""), ("qa.tsv.gz", HEADER)])
def test_a_question_file_with_only_its_header_is_one_line_naming_the_file(tmp_path, name, text):
    """Issue 52: a question file with only its header ended in a traceback blaming `dataset.offset=0`."""
    qa = tmp_path / name
    qa.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"doc_id": "d1", "text": "some words"}) + "\n")
    with pytest.raises(DataError) as err:
        _ = Dataset("tiny", DataMorganaQA(str(qa)), JsonlCorpus(str(docs))).questions
    assert str(err.value) == f"{qa}: holds no questions (only a header, or nothing; dataset.questions.path)"


def test_dropped_unjudged_questions_are_counted(tmp_path, caplog):
    """Issue 52: `dataset.unjudged=drop` (BEIR) left out the queries its qrels do not judge without a word."""
    from rag.data.qrels import QrelsFile

    qa = tmp_path / "qa.tsv"
    qa.write_text(HEADER + "".join(f"{i}\tq{i}?\ta\t['x']\t['d1']\tsingle-doc\n" for i in range(5)))
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\n1\td1\t1\n3\td1\t2\n")
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"doc_id": "d1", "text": "some words"}) + "\n")
    with caplog.at_level(logging.INFO, logger="rag.data.dataset"):
        kept = Dataset("tiny", DataMorganaQA(str(qa)), JsonlCorpus(str(docs)), qrels=QrelsFile(str(qrels)),
                       unjudged="drop").questions
    assert [q.id for q in kept] == ["1", "3"]
    assert "dataset tiny: 3 of 5 question(s) have no judgment in the qrels and are left out (dataset.unjudged=drop; " \
           "keep runs them unjudged), e.g. 0" in caplog.text


def test_chunking_limits_and_overlap():
    text = " ".join(f"w{i}" for i in range(10))
    assert chunk_words(text, 4) == ["w0 w1 w2 w3", "w4 w5 w6 w7", "w8 w9"]
    assert chunk_words(text, 4, overlap=2)[:2] == ["w0 w1 w2 w3", "w2 w3 w4 w5"]
    assert chunk_words("", 4) == []
    with pytest.raises(ValueError, match="overlap_words"):
        chunk_words(text, 4, overlap=4)


def test_hop_keeps_one_kind_before_offset_and_limit_and_a_kind_with_no_question_is_refused(tmp_path):
    """`dataset.hop=multi` (LiveRAG's two-document questions) filters first, so `offset`/`limit` count the kept
    questions; a kind the file lacks is one line naming the setting and the file; an unknown kind is refused."""
    qa = tmp_path / "qa.tsv"
    labels = ["single-doc", "multi-aspect", "comparison", "single-doc", "multi-aspect"]
    qa.write_text(HEADER + "".join(f"{i}\tq{i}?\ta\t['x']\t['d1']\t{label}\n" for i, label in enumerate(labels)))
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"doc_id": "d1", "text": "some words"}) + "\n")

    def ids(**kwargs) -> list[str]:
        return [q.id for q in Dataset("tiny", DataMorganaQA(str(qa)), JsonlCorpus(str(docs)), **kwargs).questions]

    assert ids(hop="multi") == ["1", "2", "4"]
    assert ids(hop="single") == ["0", "3"]
    assert ids(hop="multi", offset=1, limit=1) == ["2"]
    assert Dataset("tiny", DataMorganaQA(str(qa)), JsonlCorpus(str(docs)), hop="multi").key != \
        Dataset("tiny", DataMorganaQA(str(qa)), JsonlCorpus(str(docs))).key
    with pytest.raises(ValueError, match=r"dataset\.offset=3 skips all 3 multi-hop questions of .*qa\.tsv"):
        ids(hop="multi", offset=3)
    qa.write_text(HEADER + "0\tq?\ta\t['x']\t['d1']\tsingle-doc\n")
    with pytest.raises(ValueError, match=r"dataset\.hop=multi keeps none of the 1 questions of .*qa\.tsv"):
        ids(hop="multi")
    with pytest.raises(ValueError, match=r"dataset\.hop must be one of single, multi or null, got 'two'"):
        ids(hop="two")
