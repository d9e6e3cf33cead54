"""A journal written under other settings is never mixed into a new run (checked before any LLM call)."""

from __future__ import annotations

import json

import pytest

from rag.core.errors import ConfigError, MissingDataError
from rag.datagen.generator import JOURNAL_FILE
from rag.datagen.main import datagen_corpus, generate
from rag.datagen.output import QA_FILE
from tests.datagen.helpers import compose_datagen, fineweb_sample, write_corpus


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


def test_the_corpus_hash_is_kept_under_paths_cache_dir(tmp_path, monkeypatch):
    """Issue 52: rag.datagen remembered its corpus's content hash under ~/.cache/rag/file_hashes, not under
    `paths.cache_dir` as rag.main does."""
    home_cache = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home_cache))
    monkeypatch.delenv("RAG_CACHE_DIR", raising=False)
    corpus_path = write_corpus(tmp_path / "docs.jsonl.gz", [{"doc_id": "d1", "text": "a few words of text"}])
    cfg = compose_datagen([f"corpus={corpus_path}"], tmp_path)
    _ = datagen_corpus(cfg, corpus_path, tmp_path / "cache").key
    assert len(list((tmp_path / "cache" / "file_hashes").glob("*.json"))) == 1
    assert not home_cache.exists()
