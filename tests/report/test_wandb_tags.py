"""W&B refuses a run with a tag over 64 characters; a path given as an override (retriever.index_dir=...) makes one.
The run's tags are capped the way folder names are: the start kept, a hash of the whole appended."""

from __future__ import annotations

import wandb

from rag.loggers.wandb_logger import TAG_LIMIT, wandb_tags


def test_long_override_tags_are_capped_unique_and_accepted_by_wandb(tmp_path):
    long_a = "retriever.index_dir=/cache/index/dense-all-MiniLM-L6-v2-len256-ivf16pq8__000_00000-00a8c1d60fb4f642-a"
    long_b = long_a[:-1] + "b"
    tags = wandb_tags([long_a, long_b, "rerank.k=5"])
    assert all(len(t) <= TAG_LIMIT for t in tags) and len(set(tags)) == 3 and tags[2] == "rerank.k=5"
    assert tags[0].startswith("retriever.index_dir=/cache/")
    run = wandb.init(project="tags", mode="offline", dir=str(tmp_path), tags=tags, reinit="finish_previous")
    run.finish()  # the uncapped tag raises here (pydantic: "Tags must be between 1 and 64 characters")
