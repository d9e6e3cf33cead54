"""Bad input and faults of sharded builds: an early merge, a corpus changed between shards, duplicate passage ids
across shards, corrupt shard files, and a shard task killed midway that redoes only what it had not finished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from rag.core.errors import ConfigError, DataError
from rag.retrieve.bm25 import BM25Retriever
from rag.retrieve.sharded import ShardedRetriever
from tests.conftest import DATA_DIR, ROOT
from tests.index.conftest import build, read_docs, slice_corpus, write_jsonl_gz

BM25 = ("retriever=bm25",)


def _one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message, message
    return message


def test_merge_before_every_shard_finished_names_the_missing_ones(bm25_slice, tmp_path):
    args = (*BM25, "index.num_shards=5", "index.part_docs=10")
    for shard in (0, 2, 4):
        assert build(str(bm25_slice), tmp_path, *args, f"index.shard={shard}") is None
    with pytest.raises(ConfigError) as err:
        build(str(bm25_slice), tmp_path, *args, "index.step=merge")
    message = _one_line(err)
    assert "2 of 5 shard(s) not finished: 1,3" in message and "-m index.shard=1,3" in message
    assert not list((tmp_path / "index").glob("bm25-*__*"))  # nothing registered
    for shard in (1, 3):
        build(str(bm25_slice), tmp_path, *args, f"index.shard={shard}")
    folder = build(str(bm25_slice), tmp_path, *args, "index.step=merge")
    assert json.loads((folder / "manifest.json").read_text())["num_shards"] == 5


def test_corpus_changed_between_shards_is_refused(fineweb, tmp_path):
    path = write_jsonl_gz(tmp_path / "data" / "corpus.jsonl.gz", read_docs(30))
    args = (*BM25, "index.num_shards=2")
    build(str(path), tmp_path, *args, "index.shard=0")
    docs = read_docs(30)
    docs[20]["text"] += " an edit after shard 0 was built"
    write_jsonl_gz(path, docs)
    with pytest.raises(DataError) as err:
        build(str(path), tmp_path, *args, "index.shard=1")
    message = _one_line(err)
    assert "corpus changed since this index was planned" in message and str(path) in message
    assert "shards built: 0" in message and "delete" in message
    with pytest.raises(DataError, match="corpus changed"):
        build(str(path), tmp_path, *args, "index.step=merge")


def test_duplicate_passage_ids_across_shards_name_both_rows(fineweb, tmp_path):
    docs = read_docs(20)
    first = write_jsonl_gz(tmp_path / "a.jsonl.gz", docs[:10])
    second = write_jsonl_gz(tmp_path / "b.jsonl.gz", docs[10:] + [docs[3]])  # a document of a.jsonl.gz again
    with pytest.raises(DataError) as err:
        build([str(first), str(second)], tmp_path, *BM25, "index.num_shards=2")
    message = _one_line(err)
    assert f"duplicate passage id '{docs[3]['doc_id']}#p0'" in message
    assert f"{first}:4 (shard 0)" in message and f"{second}:11 (shard 1)" in message


def test_a_document_without_text_stops_the_build_naming_its_row(fineweb, tmp_path):
    docs = read_docs(12)
    docs[7]["text"] = ""
    path = write_jsonl_gz(tmp_path / "holes.jsonl.gz", docs)
    with pytest.raises(DataError) as err:
        build(str(path), tmp_path, *BM25, "index.num_shards=3")
    assert f"{path}:8: document '{docs[7]['doc_id']}' has no text" in _one_line(err)
    folder = build(str(path), tmp_path / "skip", *BM25, "index.num_shards=3", "index.empty_text=skip")
    corpus = slice_corpus(path, tmp_path)  # rag.main's corpus skips it too: the same passages, the same index
    assert json.loads((folder / "passage_ids.json").read_text()) == [p.passage_id for p in corpus.passages]
    assert json.loads((folder / "manifest.json").read_text())["empty_documents"] == 1


def test_corrupt_shard_files_name_the_file(bm25_sharded, bm25_slice, index_cache, tmp_path):
    import shutil

    copy = tmp_path / bm25_sharded.name
    shutil.copytree(bm25_sharded, copy)
    unit = copy / "units" / "s00002-p00001"
    for name in ("scores.data.npy", "pid_rank.npy"):
        target = unit / name
        data = target.read_bytes()
        target.unlink()  # the copy's files are its own (not hard links to the build folder's parts)
        target.write_bytes(data[: len(data) // 2])
        retriever = ShardedRetriever(base=BM25Retriever(), index_dir=str(copy))
        with pytest.raises(DataError) as err:
            retriever.prepare(None, tmp_path)
        assert str(target) in _one_line(err) and "corrupt shard file" in str(err.value)
        target.unlink()
        target.write_bytes(data)
    (copy / "manifest.json").write_text("{not json")
    with pytest.raises(DataError, match=r"manifest\.json: corrupt index manifest"):
        ShardedRetriever(base=BM25Retriever(), index_dir=str(copy)).prepare(None, tmp_path)


def test_corrupt_part_in_the_build_folder_stops_the_merge(bm25_slice, tmp_path):
    args = (*BM25, "index.num_shards=2", "index.part_docs=20")
    for shard in (0, 1):
        build(str(bm25_slice), tmp_path, *args, f"index.shard={shard}")
    [part] = list((tmp_path / "index" / ".build").glob("*/parts/s00001-p00000"))
    target = part / "tf.indptr.npy"
    target.write_bytes(target.read_bytes()[:40])
    with pytest.raises(DataError) as err:
        build(str(bm25_slice), tmp_path, *args, "index.step=merge")
    assert str(target) in _one_line(err)


def _parts(root):
    return {p.name: p.stat().st_ino for p in root.glob("index/.build/*/parts/s*")}


@pytest.mark.timeout(600)
def test_killed_shard_task_redoes_only_what_it_had_not_finished(fineweb, tmp_path):
    """A real `python -m rag.index index.shard=1` killed with SIGKILL after its first parts (as a preempted or
    timed-out array task): the rerun keeps the finished parts (same files) and shard 0, and the merged index
    equals an uninterrupted build."""
    path = write_jsonl_gz(tmp_path / "data" / "corpus.jsonl.gz", read_docs(1200))
    args = ["retriever=bm25", "index.num_shards=2", "index.part_docs=25", "index.progress=false",
            f"paths.data_dir={DATA_DIR}", f"paths.cache_dir={tmp_path / 'cache'}",
            f"paths.output_dir={tmp_path / 'out'}", f"corpus={path}"]
    build(str(path), tmp_path / "cache", *args[:3], "index.shard=0")
    shard0 = _parts(tmp_path / "cache")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    task = subprocess.Popen([sys.executable, "-m", "rag.index", *args, "index.shard=1"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(_parts(tmp_path / "cache")) < len(shard0) + 2:
        time.sleep(0.02)
    task.send_signal(signal.SIGKILL)
    task.wait(timeout=60)
    before = _parts(tmp_path / "cache")
    done_before = sorted(set(before) - set(shard0))
    assert len(done_before) >= 2, "the task finished or never started before the kill"
    assert len(done_before) < 24, "the task finished before the kill: nothing to resume"
    assert not list((tmp_path / "cache" / "index" / ".build").glob("*/done/shard-00001-*"))
    proc = subprocess.run([sys.executable, "-m", "rag.index", *args, "index.shard=1"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"{len(done_before)} of 24 part(s) were already done (resumed)" in proc.stdout + proc.stderr
    after = _parts(tmp_path / "cache")
    assert {name: after[name] for name in before} == before  # finished parts and shard 0 untouched
    assert not list((tmp_path / "cache" / "index" / ".build").glob("*/parts/.*tmp-*"))  # the torn part removed
    merged = build(str(path), tmp_path / "cache", *args[:3], "index.step=merge")
    clean = build(str(path), tmp_path / "clean", "retriever=bm25", "index.num_shards=2", "index.part_docs=25")
    for name in ("data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy", "passage_ids.json"):
        assert (merged / name).read_bytes() == (clean / name).read_bytes(), name
    assert np.array_equal(np.load(merged / "vocab.offsets.npy"), np.load(clean / "vocab.offsets.npy"))
