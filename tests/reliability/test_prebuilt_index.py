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
