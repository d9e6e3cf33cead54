"""Issue 9, faults 2, 3 (truncated .gz) and 8 (empty documents, killed index build): corpora are keyed by their
content, bad corpus files fail in one line naming the file, and index builds clean up after a kill.

Real FineWeb documents (a slice of liverag_dm/fineweb_docs.jsonl.gz) and the real BM25 index and stage cache."""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rag.core.errors import DataError
from rag.core.io import BUILDING, build_once, iter_jsonl
from rag.data.corpus import JsonlCorpus, file_sha256
from rag.retrieve.bm25 import BM25Retriever
from rag.stage_cache import StageCache
from tests.conftest import ROOT


def _docs(fineweb_gz: Path, n: int) -> list[dict]:
    out = []
    for row in iter_jsonl(fineweb_gz):
        out.append({"doc_id": row["doc_id"], "text": row["text"]})
        if len(out) == n:
            break
    return out


def _write(path: Path, docs: list[dict]) -> None:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")


def test_same_size_edit_gets_a_new_index_and_new_retrieval(fineweb_gz, tmp_path):
    """A corpus edit that keeps the file's size (one word replaced by another of its length) must not reuse
    the old index or retrieval file: the new word is found, with a positive score, in the edited document (a
    stale index does not know the word and scores every passage 0)."""
    docs = _docs(fineweb_gz, 30)
    target = docs[-1]
    word = next(w for w in target["text"].split() if re.fullmatch(r"[a-z]{7}", w))
    new_word = "zqxjvkw"
    target["text"] = target["text"].replace(f" {word} ", f" {new_word} ", 1)
    assert new_word in target["text"]
    corpus_file = tmp_path / "corpus.jsonl"
    _write(corpus_file, _docs(fineweb_gz, 30))
    size = corpus_file.stat().st_size
    cache = tmp_path / "cache"

    def top_hit(corpus: JsonlCorpus) -> tuple[str, str, float]:
        retriever = BM25Retriever(k=3)
        retriever.prepare(corpus, cache)
        stage = StageCache(cache)
        [hits] = stage.retrieve(retriever, corpus.key, "q", ["q1"], [new_word], depth=3)
        return hits[0].passage.doc_id, hits[0].passage.text, hits[0].score

    before = JsonlCorpus(str(corpus_file), hash_cache_dir=str(cache / "file_hashes"))
    top_hit(before)  # builds the index and the retrieval file of the original corpus
    _write(corpus_file, docs)
    assert corpus_file.stat().st_size == size  # the edit kept the size: the old key could not see it
    after = JsonlCorpus(str(corpus_file), hash_cache_dir=str(cache / "file_hashes"))
    doc_id, text, score = top_hit(after)
    assert score > 0 and doc_id == target["doc_id"] and new_word in text
    assert after.key != before.key


def test_content_hash_is_computed_once_per_file_version(tmp_path):
    """The sha256 is remembered by (path, size, mtime): a second lookup reads the sidecar, a touched file is
    hashed again."""
    path = tmp_path / "c.jsonl"
    _write(path, [{"doc_id": "a", "text": "one two three"}])
    side = tmp_path / "hashes"
    real = file_sha256(path, side)
    [sidecar] = side.glob("*.json")
    entry = json.loads(sidecar.read_text())
    assert entry["sha256"] == real and entry["size"] == path.stat().st_size
    entry["sha256"] = "f" * 64  # a remembered value is used as is: proof that the file was not read again
    sidecar.write_text(json.dumps(entry))
    assert file_sha256(path, side) == "f" * 64
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    assert file_sha256(path, side) == real


def test_truncated_gzip_corpus_is_one_error_naming_the_file(fineweb_gz, tmp_path):
    data = fineweb_gz.read_bytes()
    cut = tmp_path / "fineweb_cut.jsonl.gz"
    cut.write_bytes(data[: len(data) // 3])
    with pytest.raises(DataError, match=re.escape(str(cut))):
        _ = JsonlCorpus(str(cut)).passages


def test_truncated_gzip_through_rag_main_is_one_line(fineweb_gz, hotpot_data, tmp_path):
    """The real CLI: exit 2, one line naming the file, no traceback (today: EOFError, no file named)."""
    data = fineweb_gz.read_bytes()
    cut = tmp_path / "fineweb_cut.jsonl.gz"
    cut.write_bytes(data[: len(data) // 3])
    env = {**os.environ, "RAG_DATA_DIR": str(hotpot_data), "RAG_CACHE_DIR": str(tmp_path / "cache"),
           "RAG_OUTPUT_DIR": str(tmp_path / "out"), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "rag.main", "dataset.limit=1", "logger=none",
                           f"dataset.corpus.path={cut}", f"hydra.run.dir={tmp_path / 'run'}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert "Traceback" not in out
    [line] = [ln for ln in out.splitlines() if "DataError" in ln]
    assert str(cut) in line and "truncated" in line


def test_empty_and_null_documents_are_counted_and_warned(tmp_path, caplog):
    path = tmp_path / "c.jsonl"
    _write(path, [{"doc_id": "a", "text": "alpha beta"}, {"doc_id": "b", "text": ""},
                  {"doc_id": "c", "text": None}, {"doc_id": "d", "text": "   "}])
    corpus = JsonlCorpus(str(path))
    with caplog.at_level(logging.WARNING, logger="rag.data.corpus"):
        passages = corpus.passages
    assert [p.doc_id for p in passages] == ["a"]
    assert corpus.empty_documents == 3
    assert any("3 document(s) with empty or null text" in r.getMessage() for r in caplog.records)


def test_build_killed_midway_leaves_nothing_behind(tmp_path):
    """SIGKILL during an index build leaves its temporary folder; the next build of that index removes it."""
    index_dir = tmp_path / "index" / "bm25__x"
    script = ("import os, signal, sys\n"
              "from pathlib import Path\n"
              "from rag.core.io import build_once\n"
              "def build(tmp):\n"
              "    (tmp / 'part.bin').write_bytes(b'x' * 1000)\n"
              "    os.kill(os.getpid(), signal.SIGKILL)\n"
              "build_once(Path(sys.argv[1]), build)\n")
    proc = subprocess.run([sys.executable, "-c", script, str(index_dir)], cwd=ROOT, capture_output=True,
                          timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert list(index_dir.parent.glob(f".bm25__x{BUILDING}*"))  # the killed build's leftovers
    build_once(index_dir, lambda tmp: (tmp / "index.bin").write_bytes(b"ok"))
    assert (index_dir / "COMPLETE").is_file()
    assert not list(index_dir.parent.glob(".bm25__x*")), list(index_dir.parent.iterdir())


def test_gzip_corpus_with_bad_utf8_names_the_file(tmp_path):
    path = tmp_path / "bad.jsonl.gz"
    with gzip.open(path, "wb") as handle:
        handle.write(b'{"doc_id": "a", "text": "ok"}\n{"doc_id": "b", "text": "\xff\xfe"}\n')
    with pytest.raises(DataError, match=re.escape(str(path))):
        _ = JsonlCorpus(str(path)).passages
