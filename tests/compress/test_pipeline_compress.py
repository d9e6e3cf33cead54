"""The compression stage in the run: `compress=none` changes nothing, compressed runs record and report their ratio,
and the stage's settings enter the run's fingerprint (so compressed and uncompressed answers never share a folder;
LLM responses are cached by the prompt, which holds the compressed passages)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from rag.compress.base import STEP, NoCompression
from rag.core.io import read_jsonl
from rag.fingerprint import fingerprint
from rag.generate.base import GenerationInput
from rag.main import run
from rag.records import GenerationResult
from tests.compress.helpers import ROOT, context_for
from tests.conftest import DATA_DIR, compose_config


def test_none_leaves_the_context_identical(hotpot_data):
    question, ctx = context_for(0)
    items = [GenerationInput(question, list(ctx))]
    none = NoCompression()
    done = none.shrink(items)
    assert done == [] and items[0].passages == ctx
    results = none.mark([GenerationResult("a", "p")], done)
    assert results[0].steps == {} and results[0].passages is None and none.metrics([]) == {}


def test_none_runs_as_before_and_settings_enter_the_fingerprint(hotpot_data, shared_cache, tmp_path):
    base = [f"paths.cache_dir={shared_cache}", "dataset=hotpotqa", "dataset.limit=2", "generator=extractive",
            "logger=none", "rerank.k=3"]
    none = compose_config([*base, "compress=none"])
    metrics = run(none, tmp_path / "none")
    records = read_jsonl(tmp_path / "none" / "answers.jsonl")
    assert "compress/ratio" not in metrics and all(STEP not in r["steps"] for r in records)
    # the default run's fingerprint holds no compress key: folders written before the stage existed resume
    assert not any(k.startswith("compress") for k in fingerprint(none)["config"])
    recomp = compose_config([*base, "compress=recomp_extractive"])
    other = compose_config([*base, "compress=recomp_extractive", "compress.top_n=1"])
    hashes = {fingerprint(c)["hash"] for c in (none, recomp, other)}
    assert len(hashes) == 3 and fingerprint(recomp)["config"]["compress.top_n"] == 2


def test_recomp_end_to_end_from_the_command_line(hotpot_data, shared_cache, tmp_path):
    """`python -m rag.main dataset=hotpotqa dataset.limit=2 compress=recomp_extractive generator=extractive`."""
    env = {**os.environ, "RAG_DATA_DIR": str(DATA_DIR), "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    run_dir = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "rag.main", "dataset=hotpotqa", "dataset.limit=2",
                           "compress=recomp_extractive", "generator=extractive", "logger=none",
                           f"paths.data_dir={DATA_DIR}", f"paths.cache_dir={shared_cache}",
                           f"hydra.run.dir={run_dir}"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    records = read_jsonl(run_dir / "answers.jsonl")
    assert len(records) == 2 and all(r["answer"].strip() for r in records)
    steps = [r["steps"][STEP] for r in records]
    assert all(s["method"] == "recomp_extractive" and len(s["kept"]) == 2 for s in steps)
    assert metrics["compress/ratio"] == round(sum(s["ratio"] for s in steps) / 2, 4) and 0 < metrics["compress/ratio"] < 1
    for r, s in zip(records, steps):
        retrieved_docs = {p["doc_id"] for p in r["reranked"]}
        assert {k["doc_id"] for k in s["kept"]} <= retrieved_docs  # kept sentences cite retrieved documents
        assert all(p["doc_IDs"][0] in retrieved_docs for p in r["passages"])
        # the answer (extractive: a sentence of the best passage the generator read) comes from the kept sentences
        assert any(r["answer"].split()[0] in k["text"] for k in s["kept"])
