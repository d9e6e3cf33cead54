"""Streaming corpus input: JSONL and FineWeb-style parquet give exactly rag.main's passages, from any document
range; bad records end in one line naming the file and row."""

from __future__ import annotations

import pytest

from rag.core.errors import ConfigError, DataError, MissingDataError
from rag.index.plan import BuildFolder, CorpusInput
from rag.index.sources import Fields, expand_corpus, passages_of
from tests.index.conftest import read_docs, slice_corpus, write_jsonl_gz


def _folder(tmp_path, files, **kwargs) -> BuildFolder:
    corpus = CorpusInput(tuple(files), hash_cache_dir=str(tmp_path / "hashes"), **kwargs)
    return BuildFolder(tmp_path / "index", corpus, 1, 1000, "test", {})


def _stream(folder: BuildFolder, start: int, stop: int):
    files, kinds, corpus = folder.files(), folder.corpus.kinds, folder.corpus
    docs = list(folder.documents(start, stop))
    found, _ = passages_of(docs, files, kinds, corpus.chunk_words, corpus.overlap_words, corpus.empty_text)
    return [(s.passage.passage_id, s.passage.doc_id, s.passage.text, s.passage.title) for s in found]


def write_parquet(path, docs, row_group_size=17):
    """FineWeb's parquet schema (id, text, url, dump, ...), written from real documents."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"text": [d["text"] for d in docs], "id": [d["doc_id"] for d in docs],
                      "dump": ["CC-MAIN-2024-10"] * len(docs), "url": [f"https://example.org/{i}" for i in range(len(docs))],
                      "language_score": [0.9] * len(docs), "token_count": [len(d["text"].split()) for d in docs]})
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def test_streamed_passages_are_rag_mains_passages(bm25_slice, tmp_path):
    expected = [(p.passage_id, p.doc_id, p.text, p.title) for p in slice_corpus(bm25_slice, tmp_path).passages]
    folder = _folder(tmp_path, [bm25_slice])
    assert _stream(folder, 0, folder.plan().documents) == expected
    # any document range streams the same passages as the whole file's slice of them
    docs_before = {p[1] for p in _stream(folder, 0, 37)}
    middle = _stream(folder, 37, 80)
    assert middle == [p for p in expected if p[1] not in docs_before][:len(middle)]
    assert folder.plan().corpus_key == slice_corpus(bm25_slice, tmp_path).key


def test_parquet_shards_stream_the_same_passages(fineweb, tmp_path):
    docs = read_docs(60)
    jsonl = write_jsonl_gz(tmp_path / "docs.jsonl.gz", docs)
    (tmp_path / "fw").mkdir()
    first = write_parquet(tmp_path / "fw" / "000_00000.parquet", docs[:25])
    second = write_parquet(tmp_path / "fw" / "000_00001.parquet", docs[25:])
    expected = _stream(_folder(tmp_path / "a", [jsonl]), 0, 60)
    files = expand_corpus(str(tmp_path / "fw" / "*.parquet"), None)
    assert files == [first, second]
    folder = _folder(tmp_path / "b", files)  # id_field null: FineWeb's `id` column
    assert folder.plan().documents == 60
    assert _stream(folder, 0, 60) == expected
    # a range inside the second file, across its row groups of 17 rows
    assert _stream(folder, 30, 55) == [p for p in expected if p[1] in {d["doc_id"] for d in docs[30:55]}]
    assert folder.plan().corpus_key.startswith("fw-")


def test_corpus_patterns_name_what_is_missing(tmp_path):
    with pytest.raises(MissingDataError, match=r"no file matches .*nothing-\*\.parquet"):
        expand_corpus(str(tmp_path / "nothing-*.parquet"), None)
    with pytest.raises(MissingDataError, match="file not found"):
        expand_corpus("missing.jsonl.gz", tmp_path)
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(ConfigError, match=r"x\.csv: unknown format"):
        expand_corpus(str(tmp_path / "x.csv"), None)


def test_bad_records_name_file_and_row(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"doc_id": "a", "text": "one two"}\n\n{"doc_id": "b", "body": "x"}\n')
    with pytest.raises(DataError, match=r"bad\.jsonl:3: record lacks 'doc_id' or 'text'"):
        _stream(_folder(tmp_path, [path]), 0, 2)
    path.write_text('{"doc_id": "a", "text": "one two"}\n{"doc_id": "b", "text": 7}\n')
    with pytest.raises(DataError, match=r"bad\.jsonl:2: 'text' is int, not text"):
        _stream(_folder(tmp_path / "t", [path]), 0, 2)
    path.write_text('{"doc_id": "a", "text": "one two"}\n{"doc_id": "b", "text": \n')
    with pytest.raises(DataError, match=r"bad\.jsonl:2: malformed JSON line"):
        _stream(_folder(tmp_path / "j", [path]), 0, 2)


def test_document_without_text_is_an_error_or_skipped(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text('{"doc_id": "a", "text": "one two"}\n{"doc_id": "b", "text": null}\n{"doc_id": "c", "text": "  "}\n')
    with pytest.raises(DataError, match=r"empty\.jsonl:2: document 'b' has no text .*index\.empty_text=skip"):
        _stream(_folder(tmp_path, [path]), 0, 3)
    skipped = _stream(_folder(tmp_path / "s", [path], empty_text="skip"), 0, 3)
    assert [p[0] for p in skipped] == ["a#p0"]
    assert skipped == [(p.passage_id, p.doc_id, p.text, p.title) for p in slice_corpus(path, tmp_path).passages]


def test_parquet_without_the_id_column_names_the_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "x.parquet"
    pq.write_table(pa.table({"body": ["a b"], "uid": ["1"]}), path)
    folder = _folder(tmp_path, [path])
    with pytest.raises(DataError, match=r"x\.parquet: parquet file has no column 'doc_id', 'text' \(columns: body, uid\)"):
        _stream(folder, 0, 1)
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not really")
    with pytest.raises(DataError, match=r"broken\.parquet: not a readable parquet file"):
        _folder(tmp_path / "b", [broken]).plan()


def test_fields_are_configurable(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_text('{"uid": "u1", "body": "alpha beta", "headline": "T"}\n')
    folder = _folder(tmp_path, [path], fields=Fields("uid", "body", "headline"))
    assert _stream(folder, 0, 1) == [("u1#p0", "u1", "alpha beta", "T")]
