"""A journal written under other settings is never mixed into a new run (checked before any LLM call)."""

from __future__ import annotations

import json

import pytest

from rag.core.errors import ConfigError, MissingDataError
from rag.datagen.generator import JOURNAL_FILE
from rag.datagen.main import generate
from rag.datagen.output import QA_FILE
from tests.datagen.helpers import compose_datagen, fineweb_sample


def test_journal_of_other_settings_is_refused(data_dir, tmp_path):
    corpus = fineweb_sample(tmp_path / "docs.jsonl.gz", 20)
    out = tmp_path / "out"
    out.mkdir()
    (out / JOURNAL_FILE).write_text(json.dumps({"type": "header", "fingerprint": "other-settings"}) + "\n")
    cfg = compose_datagen([f"corpus={corpus}", "n=2", "categories=liverag"], tmp_path)
    with pytest.raises(ConfigError, match=r"datagen_journal\.jsonl: this folder holds a generation run with "
                                          r"other settings"):
        generate(cfg)
    assert not (out / QA_FILE).exists()


def test_missing_corpus_names_where_it_looked(tmp_path):
    cfg = compose_datagen(["corpus=no/such/docs.jsonl.gz", "n=2"], tmp_path)
    with pytest.raises(MissingDataError, match=r"corpus=no/such/docs\.jsonl\.gz: file not found"):
        generate(cfg)
