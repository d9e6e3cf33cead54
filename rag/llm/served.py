"""A model served once for a whole sweep: the endpoint file, its leases, and the engine sweep cells use.

`python -m rag.llm.serve llm=NAME` (rag/llm/serve.py) starts vLLM's OpenAI-compatible server for a VLLMEngine
config as a job of its own and writes an endpoint file (`<paths.output_dir>/served/<serve.name>.json`): the URL,
the served model name, and the identity the in-process VLLMEngine of that config keys its response cache with
(`model`, `model_id`, the engine `signature`, the resolved rendering). Cells configured with `llm=served
llm.name=NAME` read it (`ServedVLLMEngine`): requests go to the URL through the OpenAI-compatible engine, but
prompts are rendered, cut and keyed exactly as the in-process engine renders, cuts and keys them, so a served
sweep and an in-process run of the same model answer each other's requests from one response cache.

Liveness (why a file, not just the URL): the server job rewrites the endpoint file every `heartbeat_s` with its
state and a heartbeat time. A reader on the job's host checks the job's and the server's pids; a reader on another
host the heartbeat's age against `lease_s`. A dead server is thereby told apart from a busy one, and a cell says
so in one line instead of retrying for minutes. The sweep using a server holds an owner lease
(`<name>.owner.json`, renewed by its Hydra callback, hydra_plugins/rag_sweep/served.py); a server whose owner
stopped renewing stops itself, so a sweep killed outright leaves no GPU server behind.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag.core.errors import ConfigError, ServiceError
from rag.core.io import atomic_write_json
from rag.llm.base import LLMRequest
from rag.llm.cache import ResponseCache
from rag.llm.openai_compat import OpenAICompatibleEngine
from rag.llm.vllm_engine import VLLMEngine

log = logging.getLogger(__name__)

#: bump when the endpoint file's meaning changes (a reader refuses another version in one line)
ENDPOINT_VERSION = 1
#: the `_target_` of served engine configs (the sweep callback finds them by it)
SERVED_TARGET = "rag.llm.served.ServedVLLMEngine"
#: a server's states: loading, answering, ended on purpose or by a crash, never became ready
STATES = ("starting", "ready", "stopped", "failed")
#: the fields a ready endpoint records (what cells need to send requests and key them as in-process vLLM would)
READY_FIELDS = ("url", "model", "request_model", "model_id", "engine", "rendering", "tokenizer", "llm")
#: VLLMEngine settings that change answers: a served config merged over a VLLMEngine one (`+llm@judge.llm=served` on a judge.llm node)
#: must name the served model's own value for each it sets, or the cell would judge with another model than
#: configured (the other VLLMEngine settings, such as tensor_parallel_size, say how a model runs, not what it answers)
ANSWER_SETTINGS = ("model", "model_name", "gguf_path", "gguf_package", "gguf_file", "lora", "dtype", "max_model_len",
                   "seed", "chat_format", "repetition_penalty", "trust_remote_code")


def hostname() -> str:
    return socket.gethostname()


def pid_alive(pid: int | None) -> bool:
    """Whether a process of this host runs (a zombie, killed but not yet reaped by its parent, does not)."""
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def owner_file(endpoint_file: str | Path) -> Path:
    """The owner lease beside an endpoint file: `<name>.owner.json`."""
    path = Path(endpoint_file)
    return path.with_name(f"{path.stem}.owner.json")


def stop_file(endpoint_file: str | Path) -> Path:
    """A stop request beside an endpoint file (`<name>.stop.json`): the job reads its reason, and a job on a host
    that cannot be signalled from here sees it at its next heartbeat."""
    path = Path(endpoint_file)
    return path.with_name(f"{path.stem}.stop.json")


def stop_request(endpoint_file: str | Path) -> str | None:
    """The reason of a pending stop request (None: none)."""
    try:
        data = json.loads(stop_file(endpoint_file).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError):
        return "a stop request"
    return str(data.get("reason") or "a stop request") if isinstance(data, dict) else "a stop request"


def serve_hint(path: Path) -> str:
    return f"`python -m rag.llm.serve llm=<its VLLMEngine config> serve.endpoint_file={path}`"


@dataclass
class Endpoint:
    """An endpoint file as read: the server's record (`data`) and where it lies."""

    path: Path
    data: dict[str, Any]

    @property
    def state(self) -> str:
        return str(self.data.get("state"))

    @property
    def url(self) -> str:
        return str(self.data.get("url") or "(no URL yet)")

    @property
    def model(self) -> str:
        return str(self.data.get("model") or "(unknown model)")

    @property
    def command(self) -> str:
        """The serve command that started it, to start it again."""
        return str(self.data.get("command") or serve_hint(self.path).strip("`"))

    def describe(self) -> str:
        return f"the served model {self.model} at {self.url} (endpoint file {self.path})"

    def processes_alive(self) -> bool:
        """Whether its job or its server still runs on this host (False for another host: unknown here)."""
        if self.data.get("host") != hostname():
            return False
        return any(pid_alive(self.data.get(key)) for key in ("pid", "server_pid"))

    def liveness(self, now: float | None = None) -> str | None:
        """None while it serves; else why not, in words: its state's reason, a process gone on this host, or (on
        another host) a heartbeat older than its lease."""
        if self.state != "ready":
            reason = self.data.get("reason")
            return f"it is {self.state}" + (f": {reason}" if reason else "")
        if self.data.get("host") == hostname():
            for key, what in (("pid", "job"), ("server_pid", "vLLM server")):
                pid = self.data.get(key)
                if pid and not pid_alive(pid):
                    return f"its {what} process {pid} on {self.data['host']} is gone"
            return None
        lease = float(self.data.get("lease_s") or 120.0)
        age = (time.time() if now is None else now) - float(self.data.get("heartbeat_at") or 0.0)
        if age > lease:
            return f"no heartbeat from {self.data.get('host')} for {age:.0f} s (lease {lease:g} s)"
        return None


def read_endpoint(path: str | Path, setting: str = "llm.endpoint_file") -> Endpoint:
    """The endpoint file at `path`; one line naming `setting` and what to run when there is none or it is not one."""
    path = Path(os.path.expanduser(str(path)))
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        others = sorted(p.stem for p in path.parent.glob("*.json")
                        if not p.stem.endswith((".owner", ".stop", ".spec")))
        there = f" ({path.parent} holds: {', '.join(others)})" if others else ""
        raise ServiceError(f"{setting}={path}: no served model there (no endpoint file){there}; start one with "
                           f"{serve_hint(path)}") from None
    except OSError as err:
        raise ServiceError(f"{setting}={path}: cannot read the endpoint file ({err.strerror or err})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{setting}={path}: not an endpoint file of `python -m rag.llm.serve` (invalid JSON at line "
                          f"{err.lineno}: {err.msg})") from None
    if not isinstance(data, dict) or data.get("version") != ENDPOINT_VERSION or data.get("state") not in STATES:
        got = data.get("version") if isinstance(data, dict) else type(data).__name__
        raise ConfigError(f"{setting}={path}: not an endpoint file of `python -m rag.llm.serve` version "
                          f"{ENDPOINT_VERSION} (found version {got!r}); start the server again with this release")
    if data["state"] == "ready" or "model_id" in data:
        missing = [f for f in READY_FIELDS if f not in data]
        if missing:
            raise ConfigError(f"{setting}={path}: the endpoint file lacks {', '.join(missing)}; start the server "
                              f"again with {serve_hint(path)}")
    return Endpoint(path, data)


def write_endpoint(path: str | Path, data: dict[str, Any]) -> None:
    """Atomically (readers see the old record or the new one, never half of one)."""
    atomic_write_json(path, {"version": ENDPOINT_VERSION, **data})


# -- the sweep's owner lease ------------------------------------------------------------------------------------
def write_owner(endpoint_file: str | Path, sweep_dir: str, lease_s: float) -> None:
    """Claim (or renew) a served model for a sweep: the server stops itself once this stops being renewed."""
    atomic_write_json(owner_file(endpoint_file), {"pid": os.getpid(), "host": hostname(), "sweep_dir": sweep_dir,
                                                 "renewed_at": time.time(), "lease_s": lease_s})


def read_owner(endpoint_file: str | Path) -> dict[str, Any] | None:
    try:
        data = json.loads(owner_file(endpoint_file).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def owner_gone(owner: dict[str, Any] | None, now: float | None = None) -> str | None:
    """Why the sweep that owns a server no longer holds it (None: no owner, or it holds it)."""
    if not owner:
        return None
    who = f"sweep {owner.get('sweep_dir')} (pid {owner.get('pid')} on {owner.get('host')})"
    if owner.get("host") == hostname() and not pid_alive(owner.get("pid")):
        return f"{who} is gone"
    lease = float(owner.get("lease_s") or 120.0)
    age = (time.time() if now is None else now) - float(owner.get("renewed_at") or 0.0)
    if age > lease:
        return f"{who} has not renewed its lease for {age:.0f} s (lease {lease:g} s)"
    return None


# -- stopping -------------------------------------------------------------------------------------------------
def stop_server(endpoint_file: str | Path, reason: str, wait_s: float = 60.0) -> str:
    """Stop the server an endpoint file names (SIGTERM to its job on this host, `scancel` of its SLURM job
    elsewhere), wait until it says it stopped, and return one line saying what happened."""
    path = Path(endpoint_file)
    try:
        endpoint = read_endpoint(path, "serve.endpoint_file")
    except ServiceError:
        return f"{path}: no endpoint file, nothing to stop"
    data = endpoint.data
    if endpoint.state in ("stopped", "failed") and not endpoint.processes_alive():
        return f"{endpoint.describe()} was already {endpoint.state}"
    local = data.get("host") == hostname()
    atomic_write_json(stop_file(path), {"reason": reason, "pid": os.getpid(), "host": hostname(), "at": time.time()})
    if local and pid_alive(data.get("pid")):
        os.kill(int(data["pid"]), signal.SIGTERM)
    elif data.get("job_id"):
        try:
            subprocess.run(["scancel", str(data["job_id"])], check=False, capture_output=True, timeout=60)
        except (FileNotFoundError, subprocess.TimeoutExpired) as err:
            raise ServiceError(f"{endpoint.describe()}: cannot cancel its SLURM job {data['job_id']} from here "
                               f"({type(err).__name__}); run `scancel {data['job_id']}` on the cluster") from None
    # otherwise (a job on another host, no scheduler): it reads the stop request within half a second
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        with contextlib.suppress(ServiceError, ConfigError):
            endpoint = read_endpoint(path, "serve.endpoint_file")
        if endpoint.state in ("stopped", "failed") and not endpoint.processes_alive():
            return f"{endpoint.describe()} stopped ({reason})"
        if local and not endpoint.processes_alive():
            break  # the job died without saying so: said below
        time.sleep(0.5)
    if local:  # still there after SIGTERM and the wait: its whole process group goes
        for key in ("pid", "server_pid"):
            pid = endpoint.data.get(key)
            if pid_alive(pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(os.getpgid(int(pid)), signal.SIGKILL)
    stop_file(path).unlink(missing_ok=True)
    write_endpoint(path, {**{k: v for k, v in endpoint.data.items() if k != "version"}, "state": "stopped",
                          "reason": f"{reason} (did not stop by itself within {wait_s:g} s)",
                          "stopped_at": time.time()})
    return f"{endpoint.describe()} stopped ({reason}; it did not say so within {wait_s:g} s)"


def rerun_hint() -> str:
    """What to run after the server is back: the sweep's folder when this runs inside a Hydra multirun cell."""
    with contextlib.suppress(Exception):
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized() and HydraConfig.get().mode.name == "MULTIRUN":
            sweep = HydraConfig.get().sweep.dir
            return (f"then rerun the sweep into its folder (the same command with hydra.sweep.dir={sweep}, or "
                    f"`python -m jobs.resubmit {sweep}`): finished cells and journalled answers are kept")
    return "then rerun: journalled answers are kept"


# -- the engine of sweep cells ----------------------------------------------------------------------------------
class ServedVLLMEngine(OpenAICompatibleEngine):
    """The OpenAI-compatible engine against a server `python -m rag.llm.serve` started, keyed as in-process vLLM.

    The endpoint file gives the URL and the identity; prompts are rendered and cut by a VLLMEngine of the served
    model's tokenizer that never loads weights (the same code as in-process vLLM), and the cache key takes the
    served engine's `model`, `model_id` and `signature` as recorded by the server job. So the key of a request is
    the key in-process vLLM of the same config gives it, and the two share cached answers.
    """

    def __init__(self, endpoint_file: str, name: str | None = None, concurrency: int = 16, timeout_s: float = 600.0,
                 max_retries: int = 4, cache: ResponseCache | None = None, **served_settings: Any):
        """`endpoint_file`: what the serve command wrote (`name` is only its file name's part in the default
        path). `served_settings`: VLLMEngine settings of a config this one is merged over; each that changes
        answers must equal the served model's."""
        self.endpoint_file = Path(os.path.expanduser(str(endpoint_file)))
        self.name = name
        endpoint = read_endpoint(self.endpoint_file)
        if "model_id" not in endpoint.data:
            raise ServiceError(f"llm.endpoint_file={self.endpoint_file}: no ready server there "
                               f"({endpoint.liveness()}); start it with `{endpoint.command}`")
        check_served_settings(served_settings, endpoint)
        data = endpoint.data
        super().__init__(model=data["model"], base_url=data["url"], api_key_env=data.get("api_key_env"),
                         chat_format=data["rendering"], json_mode="json_schema", concurrency=concurrency,
                         timeout_s=timeout_s, max_retries=max_retries, cache=cache,
                         extra_body={"repetition_penalty": data.get("repetition_penalty", 1.0)},
                         n_ctx=data.get("max_model_len"))
        self.endpoint = endpoint
        self._shadow: VLLMEngine | None = None

    # -- identity: the in-process engine's -------------------------------------------------------------------
    def model_identity(self) -> dict[str, Any]:
        return dict(self.endpoint.data["model_id"])

    def signature(self) -> dict[str, Any]:
        return dict(self.endpoint.data["engine"])

    @property
    def shadow(self) -> VLLMEngine:
        """A VLLMEngine of the served model's tokenizer and context (weights never load): renders and cuts."""
        if self._shadow is None:
            data = self.endpoint.data
            self._shadow = VLLMEngine(model=data["tokenizer"], model_name=data["model"],
                                      max_model_len=data.get("max_model_len"), chat_format=data["rendering"],
                                      trust_remote_code=bool(data.get("trust_remote_code")))
        return self._shadow

    def uses_plain_text(self) -> bool:
        return self.chat_format == "plain"

    def fit(self, request: LLMRequest) -> tuple[LLMRequest, bool]:
        return self.shadow.fit(request)

    def _render_chat(self, messages: list[dict[str, str]]) -> str:
        return self.shadow._render_chat(messages)

    def build_payload(self, request: LLMRequest) -> dict[str, Any]:
        body = super().build_payload(request)
        body["model"] = self.endpoint.data["request_model"]  # a LoRA adapter is served under its own name
        return body

    # -- a server that went away -----------------------------------------------------------------------------
    def refresh(self) -> None:
        """Read the endpoint file again: a server restarted under the same name (another port) is followed; one
        that now serves another model is refused."""
        fresh = read_endpoint(self.endpoint_file)
        if "model_id" in fresh.data and any(fresh.data.get(k) != self.endpoint.data.get(k)
                                            for k in ("model", "model_id", "engine", "rendering")):
            raise ConfigError(f"llm.endpoint_file={self.endpoint_file} now serves {fresh.model} "
                              f"({fresh.data.get('model_id')}), not the model this run started with "
                              f"({self.model}); serve that one again, or start a new run folder")
        if fresh.data.get("url") and fresh.data["url"] != self.base_url:
            log.info("served model %s moved to %s", self.model, fresh.url)
            self.base_url = fresh.data["url"]
            super().close()  # the client of the old URL
            self._endpoint_ok = False
        self.endpoint = Endpoint(fresh.path, {**self.endpoint.data, **fresh.data})

    def gone_reason(self) -> str | None:
        """Why the server no longer serves (None: it does, or the endpoint file cannot say)."""
        try:
            return read_endpoint(self.endpoint_file).liveness()
        except ServiceError as err:
            return str(err)
        except ConfigError:
            return None

    def gone_error(self, reason: str) -> ServiceError:
        return ServiceError(f"llm: {self.endpoint.describe()} is gone: {reason}; start it again with "
                            f"`{self.endpoint.command}`, {rerun_hint()}")

    def check_endpoint(self) -> None:
        self.refresh()
        reason = self.endpoint.liveness()
        if reason:
            raise self.gone_error(reason)
        try:
            super().check_endpoint()
        except ServiceError as err:
            reason = self.gone_reason()
            if reason:
                raise self.gone_error(reason) from None
            why = re.search(r"cannot be reached \((.*); \d+ attempts\)", str(err))
            raise ServiceError(f"llm: {self.endpoint.describe()} does not answer on {hostname()} though its job "
                               f"runs ({why.group(1) if why else err}); check that this node can reach "
                               f"{self.base_url}") from None

    def retryable(self, err: BaseException) -> bool:
        """A request to a server known to be gone is not retried (it would only delay the one-line error)."""
        import openai

        if isinstance(err, openai.APIConnectionError) and self.gone_reason():
            return False
        return super().retryable(err)

    def service_error(self, err: BaseException, attempts: str = "") -> BaseException:
        import openai

        if isinstance(err, (openai.APIConnectionError, openai.APITimeoutError)):
            reason = self.gone_reason()
            if reason:
                return self.gone_error(reason)
        return super().service_error(err, attempts)


def check_served_settings(settings: dict[str, Any], endpoint: Endpoint) -> None:
    """One line when a setting is not a VLLMEngine one, or names another value than the served model's."""
    known = set(inspect.signature(VLLMEngine.__init__).parameters) - {"self", "cache"}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ConfigError(f"llm.{unknown[0]}: ServedVLLMEngine takes no argument {unknown[0]!r} (its own: "
                          f"endpoint_file, name, concurrency, timeout_s, max_retries; besides those only VLLMEngine "
                          f"settings of the served model)")
    served = endpoint.data.get("llm") or {}
    for key in ANSWER_SETTINGS:
        if key in settings and settings[key] != served.get(key):
            raise ConfigError(f"llm.{key}={settings[key]!r}, but {endpoint.describe()} was started with "
                              f"{key}={served.get(key)!r}: its answers would not be this config's; serve the "
                              f"configured model (`python -m rag.llm.serve ...`) or leave {key} out")
