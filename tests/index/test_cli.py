"""`python -m rag.index` as a user runs it: one process, a multirun over index.shard merged by the callback, one
line for bad input, and (marker `slurm`) one SLURM array task per shard through our launcher."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.helpers import slurm_unavailable_reason
from tests.conftest import DATA_DIR, ROOT

PYTHON = sys.executable


def rag_index(args: list[str], tmp: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAG_DATA_DIR": str(DATA_DIR), "RAG_CACHE_DIR": str(tmp / "cache"),
           "RAG_OUTPUT_DIR": str(tmp / "outputs"), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([PYTHON, "-m", "rag.index", *args, "index.progress=false"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _index_path(proc: subprocess.CompletedProcess) -> Path:
    lines = [line for line in proc.stdout.splitlines() if line.startswith("index: ")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    return Path(lines[-1].split("index: ", 1)[1])


def test_one_command_builds_and_registers(bm25_slice, tmp_path):
    proc = rag_index([f"corpus={bm25_slice}", "retriever=bm25", "index.num_shards=2"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = _index_path(proc)
    assert folder.parent == tmp_path / "cache" / "index" and (folder / "COMPLETE").is_file()
    again = rag_index([f"corpus={bm25_slice}", "retriever=bm25", "index.num_shards=2"], tmp_path)
    assert again.returncode == 0 and "already complete" in again.stdout


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    proc = rag_index(["corpus=no/such/file.jsonl.gz"], tmp_path)
    assert proc.returncode == 2
    [line] = [ln for ln in proc.stdout.splitlines() + proc.stderr.splitlines() if "Error" in ln]
    assert "MissingDataError: corpus: file not found:" in line and "no/such/file.jsonl.gz" in line
    proc = rag_index(["corpus=liverag_dm/fineweb_docs.jsonl.gz", "index.num_shards=2", "index.shard=5"], tmp_path)
    assert proc.returncode == 2 and "index.shard=5 is outside 0..1" in proc.stdout


def test_multirun_over_shards_merges_at_the_end(bm25_slice, tmp_path):
    proc = rag_index(["-m", f"corpus={bm25_slice}", "retriever=bm25", "index.num_shards=3", "index.part_docs=15",
                      "index.shard=range(0,3)"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = _index_path(proc)  # printed by the merge callback
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["num_shards"] == 3 and {u["shard"] for u in manifest["units"]} == {0, 1, 2}
    assert len(list((tmp_path / "outputs" / "index").glob("*/*/[0-2]"))) == 3  # one job folder per shard


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_slurm_array_task_per_shard_then_merge(bm25_slice, tmp_path):
    reason = slurm_unavailable_reason()
    if reason:
        pytest.skip(f"SLURM not available: {reason}")
    node = ["hydra/launcher=slurm", "hydra.launcher.gpus_per_node=0", "hydra.launcher.mem_gb=2",
            "hydra.launcher.cpus_per_task=1", "hydra.launcher.timeout_min=30"]
    proc = rag_index(["-m", *node, f"corpus={bm25_slice}", "retriever=bm25", "index.num_shards=3",
                      "index.shard=range(0,3)"], tmp_path, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = _index_path(proc)
    [sweep] = [p for p in (tmp_path / "outputs" / "index").glob("*/*") if (p / ".submitit").is_dir()]
    assert len(list((sweep / ".submitit").glob("*_[0-2]"))) == 3  # one array task per shard
    assert json.loads((folder / "manifest.json").read_text())["num_shards"] == 3
