"""A retriever that searches an index built beforehand (`retriever=sharded`) over a corpus `python -m rag.index`
cannot read is refused by the preflight in one line (rag/preflight/prebuilt.py), not told to run a command that
itself refuses the file."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from rag.preflight import check_config
from rag.preflight.prebuilt import unbuildable_index
from tests.conftest import compose_config


@pytest.mark.parametrize("dataset", ["hotpotqa", "musique", "squad_v1", "squad_v2"])
def test_sharded_over_a_corpus_rag_index_cannot_read_is_refused(dataset, tmp_path):
    cfg = compose_config([f"dataset={dataset}", "retriever=sharded", "generator=none", "logger=none"], tmp_path)
    problem = unbuildable_index(OmegaConf.to_container(cfg, resolve=True))
    assert problem and f"dataset={dataset}" in problem and "retriever=sharded" in problem
    assert "retriever=bm25" in problem  # what runs instead
    assert any(p.endswith(problem) for p in check_config(cfg, environ={}))


def test_sharded_over_corpus_files_and_other_retrievers_pass(tmp_path):
    sharded = compose_config(["dataset=liverag_dev", "retriever=sharded", "generator=none", "logger=none"], tmp_path)
    assert unbuildable_index(OmegaConf.to_container(sharded, resolve=True)) is None
    bm25 = compose_config(["dataset=hotpotqa", "retriever=bm25", "generator=none", "logger=none"], tmp_path)
    assert unbuildable_index(OmegaConf.to_container(bm25, resolve=True)) is None


def test_sharded_after_a_run_built_the_single_index_searches_it(tmp_path, data_dir):
    """`retriever=bm25` builds its single index in the folder a sharded build of the same corpus would use; then
    `python -m rag.index` finds that folder complete and builds no shards. `retriever=sharded` searches the single
    index as one unit: the same ranking as retriever=bm25, where it used to fail naming a build that builds nothing."""
    import os
    import subprocess
    import sys

    from tests.data.collections import hotpot_collection, write_beir

    beir = write_beir(tmp_path / "beir", hotpot_collection(data_dir, n_questions=3))
    env = {**os.environ, "RAG_CACHE_DIR": str(tmp_path / "cache"), "RAG_OUTPUT_DIR": str(tmp_path / "out"),
           "RAG_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1"}
    runs = {}
    for retriever in ("bm25", "sharded"):
        out = tmp_path / retriever
        proc = subprocess.run([sys.executable, "-m", "rag.main", "dataset=beir", f"dataset.path={beir}",
                               f"retriever={retriever}", "generator=none", "logger=none", f"hydra.run.dir={out}"],
                              env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        runs[retriever] = (out / "run.retrieval.trec").read_text().replace("sharded", "bm25").split("\n")
    strip = [[" ".join(line.split()[:5]) for line in lines] for lines in runs.values()]
    assert strip[0] == strip[1] and len(strip[0]) > 3
