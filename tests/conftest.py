"""Shared fixtures: the real data folder, a fresh cache per test session, and Hydra config composition."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = ROOT / "conf"
DATA_DIR = Path(os.environ.get("RAG_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()

# tests/skip_report.py: skipped tests printed by reason at the end; under CI=true an undeclared skip fails the run
# (allow-list: tests/skips_allowed.txt). pytester: the plugin's own tests run pytest inside pytest.
pytest_plugins = ["pytester", "tests.skip_report"]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")


def compose_config(overrides: list[str], tmp_path: Path | None = None) -> DictConfig:
    """Compose the project's real config with overrides (as `python -m rag.main` would)."""
    base = [f"paths.data_dir={DATA_DIR}"]
    if tmp_path is not None:
        base += [f"paths.cache_dir={tmp_path / 'cache'}", f"paths.output_dir={tmp_path / 'outputs'}"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=base + overrides)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not (DATA_DIR / "liverag_dm" / "dev_qa.tsv").exists():
        pytest.skip(f"real data not found at {DATA_DIR}; set RAG_DATA_DIR")
    return DATA_DIR


@pytest.fixture(scope="session")
def hotpot_data() -> Path:
    if not (DATA_DIR / "hotpotqa_musique" / "hotpotqa_train.json").is_file():
        pytest.skip(f"HotpotQA data not found under {DATA_DIR}; set RAG_DATA_DIR")
    return DATA_DIR


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory) -> Path:
    """One cache for the session so that indexes are built once across tests."""
    return Path(os.environ.get("RAG_TEST_CACHE_DIR") or tmp_path_factory.mktemp("rag-cache"))
