"""The live day accepts every LiveRAG experiment: the winners' pipelines and RAGtifier, with the laptop stand-ins
(`substitutions=embedded`), compose on every rung of the deadline guard's ladder, answer through it and write a
submission that passes the LiveRAG rules. In the end-to-end run the generator answers through the deterministic
endpoint on 127.0.0.1 (orchestration: the rungs on each experiment's query stage, fusion retriever and reranker
chain); each component's real-model path has its own test."""

from __future__ import annotations

import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from rag.core.io import read_jsonl
from rag.live.day import LiveDay, compose_live, split_overrides
from rag.live.submission import SubmissionSpec
from tests.cluster.helpers import rag_env
from tests.conftest import DATA_DIR, ROOT
from tests.instant_endpoint import InstantEndpoint

#: experiment -> whether its answer records keep the query stage's queries
EXPERIMENTS = {"liverag_grag": True, "liverag_magikarp": False, "liverag_preqrag": True, "liverag_topclust": False,
               "ragtifier": False}
#: what substitutions=embedded must have swapped out of every rung's config
HOSTED = ("rag.retrieve.pinecone", "rag.retrieve.opensearch", "rag.rerank.bge", "rag.llm.vllm_engine")


def _targets(node) -> list[str]:
    if isinstance(node, dict):
        own = [str(node["_target_"])] if "_target_" in node else []
        return own + [t for value in node.values() for t in _targets(value)]
    if isinstance(node, list):
        return [t for value in node for t in _targets(value)]
    return []


@pytest.mark.parametrize("experiment", sorted(EXPERIMENTS))
def test_every_rung_composes_on_each_liverag_experiment(experiment):
    """Each rung is the experiment with the rung's overrides on top, with the stand-ins swapped in (no hosted index
    or GPU engine left anywhere, the judges' included) and no k raised above the experiment's own."""
    overrides = [f"experiment={experiment}", "substitutions=embedded", f"paths.data_dir={DATA_DIR}"]
    day = LiveDay(compose_live(overrides).live, split_overrides(overrides))
    own = day.cfg0
    for rung, spec in enumerate(day.guard.rungs):
        cfg = day.compose(rung)
        data = OmegaConf.to_container(cfg, resolve=True)
        leftover = [t for t in _targets({k: v for k, v in data.items() if k != "substitutions"})
                    if t.startswith(HOSTED)]
        assert leftover == [], (spec.name, leftover)
        assert cfg.system.name == own.system.name
        for key in ("retriever.k", "rerank.k"):  # None: no cut of its own (GRAG's pointwise keeps what passes)
            mine, theirs = OmegaConf.select(own, key), OmegaConf.select(cfg, key)
            assert mine is None or theirs <= mine, (spec.name, key)
        if "generator=simple" in spec.overrides:
            assert cfg.generator._target_.endswith("SimpleGenerator")


@pytest.fixture(scope="module")
def endpoint():
    with InstantEndpoint() as served:
        yield served


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("experiment", sorted(EXPERIMENTS))
def test_the_live_day_runs_each_liverag_experiment(experiment, endpoint, hotpot_data, shared_cache, tmp_path):
    env = rag_env(tmp_path, cache=shared_cache, OPENAI_BASE_URL=endpoint.url, OPENAI_MODEL=endpoint.model,
                  OPENAI_API_KEY="instant-endpoint-accepts-any-key")
    out = tmp_path / "live"
    # the first question on the experiment's own settings; then a guard that plans on a sliver of the time left
    # (safety 0.001 of a 1 s deadline) finds no rung but the last in time: generator=extractive, retriever.k=20,
    # rerank.k=3 on the experiment's own query stage, retriever and reranker
    args = [f"experiment={experiment}", "substitutions=embedded", "llm=openai_compatible", "dataset=hotpotqa",
            "dataset.limit=3", "deadline=1s", "live.clock=ready", "live.guard.safety=0.001", "live.batch_size=1",
            f"out={out}"]
    proc = subprocess.run([sys.executable, "-m", "rag.live", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]

    records = read_jsonl(out / "answers.jsonl")
    lines = read_jsonl(out / "submission.jsonl")
    assert len(records) == len(lines) == 3
    assert SubmissionSpec().problems(lines, [r["id"] for r in records]) == []
    assert [r["live"]["rung"] for r in records] == ["configured", "extractive", "extractive"]
    assert bool(records[0].get("queries")) == EXPERIMENTS[experiment]
    assert lines[0]["final_prompt"] and lines[0]["passages"]
    for record in records[1:]:  # the rung's k only ever goes down
        assert len(record["reranked"]) <= 3 and len(record["retrieved"]) <= 20
