"""`python -m rag.doctor [overrides...]`: is this machine ready for the run these overrides compose?

The config is composed as `python -m rag.main [overrides...]` composes it (the same defaults, substitutions and
attack metrics), nothing is built or loaded, and each check is one line, `OK` or `FAIL` with its fix:

- python: the Python version the project asks for (setup.cfg), run from a virtual environment (the checkout's
  `.venv`, made by `make setup`);
- config: the overrides compose, no setting is left `???` and none holds a secret by value;
- data, dataset: the data folder (`paths.data_dir`, `RAG_DATA_DIR`) and the dataset's question, corpus and
  qrels files;
- model: each model the run loads here: shipped GGUF and MiniLM packages, model files, hub models in the cache;
- llama.cpp: `import llama_cpp` (only for a llama.cpp engine); vllm: vLLM imports and the GPUs it sees, and where
  it would run (only for a vLLM engine); slurm: `sinfo` answers and knows the partition (hydra/launcher=slurm);
- wandb: the mode and whether a key is there (WANDB_API_KEY or a ~/.netrc entry; names only, never values);
- env: every variable a component declares it needs (`required_env` / `api_key_env`; names only);
- cache, outputs: the folders are writable and have free space;
- opensearch, pinecone: the configured host answers on its port within a few seconds.

Exit status 0 when every check is OK, 1 when one fails, 2 when the overrides do not compose (one line).
"""

from __future__ import annotations

import argparse
import configparser
import importlib
import importlib.util
import json
import netrc
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from omegaconf import DictConfig, OmegaConf

from rag.core.components import component_class
from rag.core.entry import CONF_DIR, config_problems, guard_command_line
from rag.core.errors import ConfigError
from rag.describe import closest, compose, groups
from rag.preflight import _resolved, config_components, data_file, required_env
from rag.preflight.attack import add_attack_metrics
from rag.preflight.substitutions import apply_substitutions

ROOT = CONF_DIR.parent
#: below this much free space in the cache or output folder, the check fails (an index, stage files, answers)
MIN_FREE_GIB = 2.0
#: how long a hosted service's host may take to accept a connection
CONNECT_TIMEOUT_S = 3.0
#: how long vLLM may take to import (it loads torch and probes the devices)
VLLM_PROBE_TIMEOUT_S = 300
GIB = 1024 ** 3
#: the groups named in the config line
SHOWN_GROUPS = ("experiment", "dataset", "query", "retriever", "rerank", "generator", "llm", "logger",
                "hydra/launcher", "substitutions")


@dataclass
class Check:
    """One line of the report."""

    name: str
    ok: bool
    text: str
    fix: str = ""

    def line(self) -> str:
        fix = f"; fix: {self.fix}" if self.fix and not self.ok else ""
        return f"{'OK' if self.ok else 'FAIL':<4}  {self.name:<10} {self.text}{fix}"


@dataclass
class Run:
    """The composed config of one run, as the checks read it."""

    cfg: DictConfig
    data: dict[str, Any]
    env: Mapping[str, str]
    components: list[tuple[str, dict[str, Any], Any]] = field(default_factory=list)

    @property
    def choices(self) -> dict[str, Any]:
        return dict(OmegaConf.select(self.cfg, "hydra.runtime.choices", default={}) or {})

    @property
    def on_slurm(self) -> bool:
        return "slurm" in str(self.choices.get("hydra/launcher")) or \
            "Slurm" in str(OmegaConf.select(self.cfg, "hydra.launcher._target_", default=""))

    def launcher(self, key: str) -> Any:
        try:
            return OmegaConf.select(self.cfg, f"hydra.launcher.{key}", default=None)
        except Exception:  # noqa: BLE001 - a setting that needs Hydra's runtime to resolve
            return None

    def using(self, base: type) -> list[tuple[str, dict[str, Any]]]:
        """(path, node) of each component of class `base` (or a subclass); equal nodes once (`judge.llm: ${llm}`)."""
        out: list[tuple[str, dict[str, Any]]] = []
        for path, node, cls in self.components:
            if isinstance(cls, type) and issubclass(cls, base) and all(node != seen for _, seen in out):
                out.append((path, node))
        return out


def compose_run(overrides: list[str], env: Mapping[str, str] | None = None) -> Run:
    """The run's config as `python -m rag.main` composes it; `ConfigError` (one line) when it does not compose."""
    found = groups()
    for override in overrides:
        key, eq, value = override.partition("=")
        group = key.lstrip("+~")
        if eq and group in found and "," not in value and not value.startswith("[") and value != "null" \
                and value not in found[group]:
            raise ConfigError(f"{override}: no option {value!r} in group {group}{closest(value, found[group])} "
                              f"(python -m rag.describe {group} lists them)")
    try:
        cfg = compose("config", overrides)
    except Exception as err:  # noqa: BLE001 - Hydra's several grammar and composition errors
        raise ConfigError(f"the overrides do not compose: {str(err).strip().splitlines()[0]}") from None
    apply_substitutions(cfg)  # as rag.main.run does before it checks anything
    add_attack_metrics(cfg)
    run = Run(cfg, {}, os.environ if env is None else env)
    try:
        run.data = _resolved(cfg)
    except Exception:  # noqa: BLE001 - said by the config check
        return run
    # the substitutions' own `use` nodes are not the run's until they replace one; nearest the top first
    found = [c for c in config_components(run.data) if not c[0].startswith("substitutions.")]
    run.components = sorted(found, key=lambda c: c[0].count("."))
    return run


# -- the checks ------------------------------------------------------------------------------------------------------
def _python_requires() -> tuple[int, int]:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    match = re.search(r">=\s*(\d+)\.(\d+)", parser.get("options", "python_requires", fallback=""))
    return (int(match.group(1)), int(match.group(2))) if match else (3, 10)


def check_python(prefix: str = sys.prefix, base_prefix: str = sys.base_prefix,
                 version: tuple[int, ...] = tuple(sys.version_info[:3]), env: Mapping[str, str] = os.environ) -> Check:
    shown = ".".join(map(str, version))
    need = _python_requires()
    if tuple(version[:2]) < need:
        return Check("python", False, f"Python {shown} is older than the project's >={need[0]}.{need[1]}",
                     f"make setup with a newer interpreter (PY=python3.{need[1]} make setup)")
    where = Path(prefix).resolve()
    if where.is_relative_to(ROOT.resolve()) and prefix != base_prefix:
        return Check("python", True, f"Python {shown} in the project's venv ({where.relative_to(ROOT.resolve())})")
    if prefix != base_prefix or env.get("CONDA_PREFIX") == prefix:
        return Check("python", True, f"Python {shown} in the environment {prefix} (outside this checkout)")
    return Check("python", False, f"Python {shown} is the system's ({prefix}), not a virtual environment",
                 "make setup (creates .venv with the pinned packages), then .venv/bin/python -m rag.doctor ...")


def check_config(run: Run) -> Check:
    choices = run.choices
    shown = " ".join(f"{g}={choices[g]}" for g in SHOWN_GROUPS if choices.get(g) not in (None, "none")
                     or g in ("rerank", "logger"))
    problems = config_problems(run.cfg)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return Check("config", False, problems[0] + more, "give the setting on the command line")
    if not run.data:
        try:
            _resolved(run.cfg)
        except Exception as err:  # noqa: BLE001 - e.g. ${oc.env:VAR} without a default
            return Check("config", False, f"does not resolve: {str(err).splitlines()[0]}",
                         "set what the message names (an environment variable or a setting)")
    return Check("config", True, f"composes: {shown}")


def _data_dir(run: Run) -> tuple[Path | None, str]:
    value = (run.data.get("paths") or {}).get("data_dir")
    source = "RAG_DATA_DIR" if run.env.get("RAG_DATA_DIR") else "paths.data_dir"
    return (Path(str(value)).expanduser().absolute() if value else None), source


DATA_FIX = ("point RAG_DATA_DIR (or paths.data_dir=) at the data folder: the layout of the project's shared data "
            "(liverag_dm/, squad/, hotpotqa_musique/); nothing is downloaded")


def check_data_dir(run: Run) -> Check:
    folder, source = _data_dir(run)
    if folder is None:
        return Check("data", False, "paths.data_dir is not set", DATA_FIX)
    if not folder.is_dir():
        return Check("data", False, f"{source}={folder}: no such folder", DATA_FIX)
    return Check("data", True, f"{source}={folder}")


def check_dataset(run: Run) -> Check:
    folder, _ = _data_dir(run)
    name = run.choices.get("dataset", "?")
    files = [(path, data_file(node, str(folder) if folder else None))
             for path, node, _ in run.components if path.startswith("dataset")]
    files = [(path, file) for path, file in files if file is not None]
    if not files:
        return Check("dataset", True, f"dataset={name} reads no file from paths.data_dir")

    def shown(file: Path) -> str:
        return str(file.relative_to(folder)) if folder and file.is_relative_to(folder) else str(file)

    missing = [f"{path.split('.')[-1] or path} {shown(file)}" for path, file in files if not file.exists()]
    if missing:
        return Check("dataset", False, f"dataset={name}: not found under {folder}: {', '.join(missing)}", DATA_FIX)
    return Check("dataset", True, f"dataset={name}: " + ", ".join(f"{p.split('.')[-1]} {shown(f)}" for p, f in files))


def _hub_cached(name: str, cache_dir: str | None = None) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    return any(isinstance(try_to_load_from_cache(name, file, cache_dir=cache_dir), str)
               for file in ("config.json", "modules.json", "adapter_config.json"))


def _hub_check(path: str, name: str, env: Mapping[str, str], cache_dir: str | None, setting: str) -> Check:
    if Path(name).expanduser().is_dir():
        return Check("model", True, f"{path}: {name} (a local folder)")
    if _hub_cached(name, cache_dir):
        return Check("model", True, f"{path}: {name} is in the Hugging Face cache")
    if str(env.get("HF_HUB_OFFLINE", "1")).lower() in ("0", "false", "no"):
        return Check("model", True, f"{path}: {name} is not cached; it downloads at the first run (HF_HUB_OFFLINE=0)")
    return Check("model", False, f"{path}: {name} is not in the Hugging Face cache (runs never download: "
                                 f"HF_HUB_OFFLINE=1)",
                 f"download it once where the hub is reachable (`huggingface-cli download {name}`, into HF_HOME "
                 f"shared with the nodes), or point {path}.{setting} at a local copy")


def check_models(run: Run) -> list[Check]:
    """Each model the run loads on this machine (hosted engines load none)."""
    from rag.core.models import resolve_model_dir
    from rag.llm.llama_cpp import LlamaCppEngine, resolve_model_file
    from rag.llm.vllm_engine import VLLMEngine

    out: list[Check] = []
    seen: list[dict[str, Any]] = []
    for path, node, cls in run.components:
        local = isinstance(cls, type) and issubclass(cls, (LlamaCppEngine, VLLMEngine))
        if node in seen or not (local or "model_path" in node or "model_package" in node):
            continue
        seen.append(node)
        try:
            if isinstance(cls, type) and issubclass(cls, LlamaCppEngine):
                file = resolve_model_file(node.get("model_path"), node.get("model_package"), node.get("model_file"))
                out.append(Check("model", True, f"{path}: {file.name} ({node.get('model_package') or 'model_path'})"))
            elif isinstance(cls, type) and issubclass(cls, VLLMEngine) and (node.get("gguf_path")
                                                                             or node.get("gguf_package")):
                file = resolve_model_file(node.get("gguf_path"), node.get("gguf_package"), node.get("gguf_file"))
                out.append(Check("model", True, f"{path}: {file.name} ({node.get('gguf_package') or 'gguf_path'}, "
                                                f"converted for vLLM once)"))
            elif node.get("model_path") or node.get("model_package"):
                where = resolve_model_dir(str(node.get("model")), node.get("model_path"), node.get("model_package"))
                out.append(Check("model", True, f"{path}: {node.get('model')} ({node.get('model_package') or where})"))
            elif node.get("model"):
                setting = "model" if isinstance(cls, type) and issubclass(cls, VLLMEngine) else "model_path"
                out.append(_hub_check(path, str(node["model"]), run.env, node.get("download_dir"), setting))
        except (OSError, ValueError) as err:
            package = node.get("model_package") or node.get("gguf_package")
            fix = (f"pip install {package.replace('_', '-')} (make setup installs the shipped models)" if package
                   and importlib.util.find_spec(package) is None else
                   f"point {path}.model_path at the model (null: the shipped {path}.model_package)")
            out.append(Check("model", False, str(err).splitlines()[0].split("; ")[0], fix))
    return out


def check_llama_cpp(run: Run) -> list[Check]:
    from rag.llm.llama_cpp import LlamaCppEngine

    users = run.using(LlamaCppEngine)
    if not users:
        return []
    where = ", ".join(path for path, _ in users)
    try:
        module = importlib.import_module("llama_cpp")
    except Exception as err:  # noqa: BLE001 - ImportError, or the shared library failing to load (OSError)
        return [Check("llama.cpp", False, f"llama_cpp does not load ({where}): {type(err).__name__}: "
                                          f"{str(err).splitlines()[0] if str(err) else ''}",
                      "make setup builds llama-cpp-python as a portable AVX2 wheel (LLAMA_CMAKE_ARGS in the Makefile)")]
    return [Check("llama.cpp", True, f"llama-cpp-python {getattr(module, '__version__', '?')} loads ({where})")]


_VLLM_PROBE = """
import json, vllm
out = {"version": vllm.__version__, "gpus": [], "platform": None}
try:
    import torch
    out["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
except Exception:
    pass
try:
    from vllm.platforms import current_platform
    out["platform"] = str(current_platform.device_type)
except Exception:
    pass
print(json.dumps(out))
"""


def probe_vllm(timeout: float = VLLM_PROBE_TIMEOUT_S) -> dict[str, Any]:
    """vLLM's version, the GPUs torch sees and vLLM's platform, from a child Python (vLLM's import is heavy and
    noisy); `error` instead when it does not import."""
    try:
        proc = subprocess.run([sys.executable, "-c", _VLLM_PROBE], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"import vllm took over {timeout:.0f} s"}
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        return {"error": lines[-1] if lines else f"exit status {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check_vllm(run: Run, probe: dict[str, Any] | None = None) -> list[Check]:
    from rag.llm.vllm_engine import VLLMEngine

    users = run.using(VLLMEngine)
    if not users:
        return []
    needed = max(int(node.get("tensor_parallel_size") or 1) for _, node in users)
    which = ", ".join(path for path, _ in users)
    if run.on_slurm:
        asked = ", ".join(f"hydra.launcher.{key}={run.launcher(key)}" for key in ("gpus_per_node", "gres")
                          if run.launcher(key) is not None)
        where = f"on the SLURM nodes ({asked or 'no GPU asked'}), not on this machine"
    else:
        where = "in this process, on this machine"
    probe = probe_vllm() if probe is None else probe
    if "error" in probe:
        return [Check("vllm", False, f"vLLM does not import in this Python: {probe['error']}; {which} would run "
                                     f"{where}",
                      "make vllm-env, then run with .venv-vllm/bin/python (on SLURM: activate it in cluster.setup)")]
    seen = probe.get("gpus") or []
    said = f"vLLM {probe.get('version')} imports; it sees {len(seen)} GPU(s)" + (f" ({', '.join(seen)})" if seen
                                                                                 else "")
    if run.on_slurm:
        gpus = run.launcher("gpus_per_node")
        if isinstance(gpus, int) and gpus < needed:
            return [Check("vllm", False, f"{said}; {which} needs {needed} GPUs and a cell gets "
                                         f"hydra.launcher.gpus_per_node={gpus}",
                          f"hydra.launcher.gpus_per_node={needed} (or cluster.gpus_per_node in conf/local)")]
        return [Check("vllm", True, f"{said}; {which} runs {where}")]
    if probe.get("platform") == "cpu":
        return [Check("vllm", True, f"{said}; {which} runs in this process on the CPU (vLLM's CPU build)")]
    if len(seen) < needed:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        return [Check("vllm", False, f"{said}; {which} needs {needed} (tensor_parallel_size)"
                                     + (f"; CUDA_VISIBLE_DEVICES={visible}" if visible is not None else ""),
                      "run on a machine with the GPUs, or hydra/launcher=slurm to send the run to one")]
    return [Check("vllm", True, f"{said}; {which} runs in this process on {seen[0]}")]


def check_slurm(run: Run) -> list[Check]:
    if not run.on_slurm:
        return []
    sinfo = shutil.which("sinfo", path=run.env.get("PATH"))
    if not sinfo:
        return [Check("slurm", False, "hydra/launcher=slurm, and `sinfo` is not on PATH: no SLURM reachable here",
                      "run from a login node of the cluster (where sbatch and sinfo work), or hydra/launcher=local")]
    try:
        proc = subprocess.run([sinfo, "-h", "-o", "%P"], capture_output=True, text=True, timeout=20,
                              env=dict(run.env))
    except subprocess.TimeoutExpired:
        proc = None
    if proc is None or proc.returncode != 0:
        said = "no answer in 20 s" if proc is None else (proc.stderr.strip().splitlines() or ["exit status "
                                                                                            f"{proc.returncode}"])[0]
        return [Check("slurm", False, f"sinfo fails: {said}", "is the controller up? `scontrol ping` says")]
    partitions = [p.strip().rstrip("*") for p in proc.stdout.split() if p.strip()]
    wanted = run.launcher("partition")
    if wanted and str(wanted) not in partitions:
        return [Check("slurm", False, f"partition {wanted!r} is not among sinfo's: {', '.join(partitions)}",
                      "set cluster.partition in conf/local/default.yaml (or hydra.launcher.partition=...)")]
    return [Check("slurm", True, f"sinfo answers: partitions {', '.join(partitions) or '(none)'}"
                                 + (f"; the cells go to {wanted}" if wanted else "; the cells go to the default"))]


def wandb_login(env: Mapping[str, str]) -> str | None:
    """Where a W&B key would come from (a variable's or a file's name, never the key), or None."""
    if str(env.get("WANDB_API_KEY", "")).strip():
        return "WANDB_API_KEY is set"
    host = urlsplit(env.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname or "api.wandb.ai"
    path = Path(env.get("NETRC") or Path.home() / ".netrc").expanduser()
    try:
        if netrc.netrc(str(path)).authenticators(host):
            return f"{path} has an entry for {host}"
    except (OSError, netrc.NetrcParseError):
        pass
    return None


def check_wandb(run: Run) -> list[Check]:
    from rag.loggers.wandb_logger import WandbLogger

    logger = run.data.get("logger") or {}
    cls = component_class(str(logger.get("_target_", ""))) if logger.get("_target_") else None
    if not (isinstance(cls, type) and issubclass(cls, WandbLogger)):
        return []
    mode = str(logger.get("mode") or "online")
    if importlib.util.find_spec("wandb") is None:
        return [Check("wandb", False, f"logger=wandb (mode {mode}), and wandb is not installed", "pip install wandb")]
    login = wandb_login(run.env)
    if mode == "disabled":
        return [Check("wandb", True, "mode disabled: nothing is logged")]
    if mode == "offline":
        return [Check("wandb", True, f"mode offline: runs are kept under <run>/wandb/ for `wandb sync`; "
                                     f"logged in: {login or 'no (needed only to sync)'}")]
    if login is None:
        return [Check("wandb", False, f"mode {mode}, and no W&B key: neither WANDB_API_KEY nor a ~/.netrc entry",
                      "wandb login (keeps the key in ~/.netrc) or export WANDB_API_KEY; or WANDB_MODE=offline")]
    return [Check("wandb", True, f"mode {mode}; {login}")]


def check_env(run: Run) -> list[Check]:
    needed: dict[str, list[str]] = {}
    for path, node, cls in run.components:
        names = required_env(cls, node) or ([node["api_key_env"]] if cls is None and node.get("api_key_env") else [])
        for name in names:
            owner = f"{path} ({str(node.get('_target_')).rsplit('.', 1)[-1]})"
            if owner not in needed.setdefault(str(name), []):
                needed[str(name)].append(owner)
    if not needed:
        return [Check("env", True, "the config needs no key or host variable")]
    out = []
    for name, owners in needed.items():
        if str(run.env.get(name, "")).strip():
            out.append(Check("env", True, f"{name} is set (for {', '.join(owners)})"))
        else:
            out.append(Check("env", False, f"{name} is not set (needed by {', '.join(owners)})",
                             f"export {name} in this shell (the jobs of a SLURM sweep inherit it; a config never "
                             f"holds its value)"))
    return out


def check_folder(name: str, setting: str, value: Any, variable: str) -> Check:
    """A folder a run writes into: it (or the parent it will be made in) takes a file, and has free space."""
    if not value:
        return Check(name, False, f"{setting} is not set", f"set {variable} or {setting}=")
    folder = Path(str(value)).expanduser().absolute()
    fix = f"point {variable} (or {setting}=) at a writable folder with space (on a cluster: a shared filesystem)"
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return Check(name, False, f"{setting}={folder}: {existing} is a file, not a folder", fix)
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        return Check(name, False, f"{setting}={folder} is not writable ({err.strerror or err})", fix)
    free = shutil.disk_usage(existing).free / GIB
    if free < MIN_FREE_GIB:
        return Check(name, False, f"{setting}={folder}: {free:.1f} GiB free, under {MIN_FREE_GIB:g} GiB", fix)
    made = "" if folder.exists() else f" (made at the first run, in {existing})"
    return Check(name, True, f"{setting}={folder} writable, {free:.0f} GiB free{made}")


def _reachable(name: str, path: str, host: str, port: int, fix: str) -> Check:
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as err:
        return Check(name, False, f"{path}: {host}:{port} does not answer within {CONNECT_TIMEOUT_S:g} s "
                                  f"({type(err).__name__}: {err})", fix)
    return Check(name, True, f"{path}: {host}:{port} accepts connections")


def check_services(run: Run) -> list[Check]:
    from rag.core.errors import ServiceError
    from rag.retrieve.opensearch import OpenSearchRetriever
    from rag.retrieve.pinecone import PineconeRetriever

    out = []
    laptop = "on a laptop, substitutions=embedded runs the embedded indexes instead"
    for path, node in run.using(OpenSearchRetriever):
        try:
            host, port, _ = OpenSearchRetriever(**{k: v for k, v in node.items() if not k.startswith("_")}).endpoint()
        except (ServiceError, ValueError, TypeError):
            out.append(Check("opensearch", False, f"{path}: no OpenSearch host configured",
                             f"set {path}.host or export {node.get('host_env') or 'OPENSEARCH_HOST'}; {laptop}"))
            continue
        out.append(_reachable("opensearch", path, host, port, f"check {path}.host / "
                              f"{node.get('host_env') or 'OPENSEARCH_HOST'}, the VPN or firewall; {laptop}"))
    for path, node in run.using(PineconeRetriever):
        host_env = node.get("host_env")
        raw = node.get("host") or (run.env.get(host_env) if host_env else None) or node.get("control_host") \
            or "api.pinecone.io"
        parts = urlsplit(raw if "://" in raw else f"//{raw}")
        out.append(_reachable("pinecone", path, parts.hostname or raw, parts.port or 443,
                              f"check {path}.host / {host_env or 'PINECONE_HOST'} and the network; {laptop}"))
    return out


def checks(run: Run, vllm_probe: dict[str, Any] | None = None) -> list[Check]:
    """Every check of one composed run, in the order they print."""
    out = [check_python(env=run.env), check_config(run)]
    if not run.data:
        return out
    paths = run.data.get("paths") or {}
    out += [check_data_dir(run), check_dataset(run), *check_models(run), *check_llama_cpp(run),
            *check_vllm(run, vllm_probe), *check_slurm(run), *check_wandb(run), *check_env(run),
            check_folder("cache", "paths.cache_dir", paths.get("cache_dir"), "RAG_CACHE_DIR"),
            check_folder("outputs", "paths.output_dir", paths.get("output_dir"), "RAG_OUTPUT_DIR"),
            *check_services(run)]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rag.doctor", description="Is this machine ready for `python -m rag.main [overrides...]`? "
        "One line per check, OK or FAIL with its fix; exit status 0 when all are OK, 1 otherwise.")
    parser.add_argument("overrides", nargs="*", help="the run's overrides, as given to python -m rag.main")
    overrides = parser.parse_args(argv).overrides
    guard_command_line("config", overrides)  # a secret given by value ends here, as for every entry point
    try:
        run = compose_run(overrides)
    except ConfigError as err:
        print(f"ConfigError: {err}".splitlines()[0], file=sys.stderr, flush=True)
        return 2
    print(f"rag.doctor: python -m rag.main {' '.join(overrides)}".rstrip() + " on this machine", flush=True)
    results = checks(run)
    for check in results:
        print(check.line(), flush=True)
    failed = [check.name for check in results if not check.ok]
    if failed:
        print(f"{len(failed)} of {len(results)} checks failed: {', '.join(dict.fromkeys(failed))}", flush=True)
        return 1
    print(f"all {len(results)} checks OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
