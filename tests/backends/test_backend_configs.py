"""The service, reranker and LLM configs compose into the project's config and build the right objects.

Building never loads a model or opens a connection (that happens on first use), so these run anywhere.
"""

from __future__ import annotations

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from rag.core.secrets import redact
from rag.llm.anthropic_engine import AnthropicEngine
from rag.llm.openai_compat import OpenAICompatibleEngine
from rag.llm.vllm_engine import VLLMEngine
from rag.rerank.bge import BGEReranker
from rag.rerank.rank_r1 import RankR1Reranker
from rag.retrieve.bm25 import BM25Retriever
from rag.retrieve.dense import DenseRetriever
from rag.retrieve.hybrid import HybridRetriever
from rag.retrieve.opensearch import OpenSearchRetriever
from rag.retrieve.pinecone import PineconeRetriever
from tests.conftest import CONF_DIR, compose_config

OURS = ["retriever/pinecone", "retriever/opensearch", "retriever/hybrid", "rerank/bge", "rerank/bge_m3",
        "rerank/rank_r1", "llm/falcon3_10b", "llm/gemma3_27b", "llm/claude_haiku", "llm/openai_compatible",
        "llm/openai_reasoning"]

SERVICE_VARS = ["E5_BASE_V2_PATH", "PINECONE_HOST", "OPENSEARCH_ACCESS", "AWS_PROFILE", "BGE_RERANKER_PATH",
                "BGE_M3_PATH", "RANK_R1_BASE_MODEL", "RANK_R1_ADAPTER", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "OPENAI_MODEL"]


@pytest.fixture(autouse=True)
def _no_service_env(monkeypatch):
    for var in SERVICE_VARS:
        monkeypatch.delenv(var, raising=False)


def _build(group: str, name: str, *extra: str):
    cfg = compose_config([f"{group}={name}", *extra])
    return instantiate(cfg[group]) if group != "llm" else instantiate(cfg.llm, cache=None)


def test_pinecone_config_is_liverag():
    retriever = _build("retriever", "pinecone")
    assert isinstance(retriever, PineconeRetriever)
    assert (retriever.index_name, retriever.namespace) == ("fineweb10bt-512-0w-e5-base-v2", "default")
    assert retriever.embedder.name == "intfloat/e5-base-v2" and retriever.embedder.query_prefix == "query: "
    assert retriever.api_key_env == "PINECONE_API_KEY" and retriever.stores_text


def test_opensearch_config_is_liverag():
    retriever = _build("retriever", "opensearch")
    assert isinstance(retriever, OpenSearchRetriever)
    assert retriever.index_name == "fineweb10bt-512-0w-e5-base-v2"
    assert (retriever.access, retriever.aws_region, retriever.field) == ("aws", "us-east-1", "text")


def test_hybrid_composes_any_two_retrievers():
    default = _build("retriever", "hybrid")
    assert isinstance(default, HybridRetriever) and default.rrf_k == 60
    assert isinstance(default.first, BM25Retriever) and isinstance(default.second, DenseRetriever)
    services = _build("retriever", "hybrid", "retriever@retriever.first=opensearch",
                      "retriever@retriever.second=pinecone", "retriever.rrf_k=30")
    assert isinstance(services.first, OpenSearchRetriever) and isinstance(services.second, PineconeRetriever)
    assert services.rrf_k == 30 and services.key != default.key


def test_reranker_configs():
    bge = _build("rerank", "bge")
    assert isinstance(bge, BGEReranker) and (bge.model_name, bge.mode) == ("BAAI/bge-reranker-v2-m3", "cross_encoder")
    assert bge.use_fp16 and bge.max_length == 512 and bge.k == 5
    m3 = _build("rerank", "bge_m3")
    assert (m3.model_name, m3.mode) == ("BAAI/bge-m3", "m3") and m3.key != bge.key
    r1 = _build("rerank", "rank_r1")
    assert isinstance(r1, RankR1Reranker) and isinstance(r1.engine, VLLMEngine)
    assert r1.engine.model == "ielabgroup/Rank-R1-7B-v0.1" and r1.num_child == 19 and r1.sort_depth == 10


def test_llm_configs():
    falcon = _build("llm", "falcon3_10b")
    assert isinstance(falcon, VLLMEngine) and falcon.model == "tiiuae/Falcon3-10B-Instruct"
    assert not hasattr(falcon, "default_params")  # sampling settings are the generator's and judges' own
    assert {"tensor_parallel_size", "max_model_len", "gpu_memory_utilization"} <= set(falcon.engine_args)
    gemma = _build("llm", "gemma3_27b")
    assert gemma.model == "google/gemma-3-27b-it"
    claude = _build("llm", "claude_haiku")
    assert isinstance(claude, AnthropicEngine) and claude.model == "claude-haiku-4-5-20251001"
    assert claude.api_key_env == "ANTHROPIC_API_KEY" and claude.price_output_per_mtok == 5.0
    compat = _build("llm", "openai_compatible")
    assert isinstance(compat, OpenAICompatibleEngine) and compat.base_url == "http://127.0.0.1:8000/v1"


def test_base_url_comes_from_env(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://10.0.0.5:9000/v1")
    assert _build("llm", "openai_compatible").base_url == "http://10.0.0.5:9000/v1"


@pytest.mark.parametrize("name", OURS)
def test_configs_hold_no_secrets(name):
    """Only names of environment variables, never values, under secret-looking keys."""
    data = OmegaConf.to_container(OmegaConf.load(CONF_DIR / f"{name}.yaml"), resolve=False)
    assert redact(data) == data
