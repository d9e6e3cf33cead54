"""Issue 25, fault 3: `retriever.k=100000 rerank=none` ran with rc 0 and put all 28,082 passages into every
prompt, silently. k beyond the corpus is now the corpus, said once, and the metrics name the depth really used."""

from __future__ import annotations

import logging

from rag.core.io import read_jsonl
from rag.pipeline import Pipeline
from tests.conftest import compose_config


def test_k_beyond_the_corpus_is_clamped_with_one_warning(hotpot_data, shared_cache, tmp_path, caplog):
    cfg = compose_config([f"paths.cache_dir={shared_cache}", "dataset=hotpotqa", "dataset.limit=2",
                          "retriever.k=100000", "rerank=none", "generator=none", "logger=none"])
    pipeline = Pipeline(cfg)
    try:
        with caplog.at_level(logging.WARNING, logger="rag.pipeline"):
            metrics = pipeline.run(tmp_path / "run")
        size = len(pipeline.dataset.corpus.passages)
    finally:
        pipeline.close()
    warnings = [r.getMessage() for r in caplog.records if "more than the" in r.getMessage()]
    assert warnings == [f"retriever.k=100000 is more than the {size} passages of the corpus "
                        f"{pipeline.dataset.corpus.key}: using {size}"]
    assert f"recall/retrieval@{size}/all" in metrics and "recall/retrieval@100000/all" not in metrics
    assert all(len(r["retrieved"]) == size for r in read_jsonl(tmp_path / "run" / "answers.jsonl"))
