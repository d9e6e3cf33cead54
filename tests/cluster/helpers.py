"""Helpers for the cluster tests: environments for `python -m rag.main` subprocesses, SLURM checks, and
reading offline W&B runs back with wandb's own reader (`wandb leet inspect --json`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.conftest import DATA_DIR, ROOT

PYTHON = sys.executable
WANDB = str(Path(sys.executable).parent / "wandb")

#: short prompts (5 candidates, 2 passages to the model, 8 new tokens) keep the real model fast on 2 CPUs
CHEAP = ["dataset=hotpotqa", "retriever.k=5", "rerank.k=2", "generator.max_tokens=8"]


def rag_env(tmp: Path, cache: Path | None = None, **extra: str) -> dict[str, str]:
    """Environment of a subprocess run: real data, a test-owned cache and output folder, W&B offline."""
    env = {**os.environ, "RAG_DATA_DIR": str(DATA_DIR), "RAG_CACHE_DIR": str(cache or tmp / "cache"),
           "RAG_OUTPUT_DIR": str(tmp / "outputs"), "WANDB_MODE": "offline", "WANDB_SILENT": "true",
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("WANDB_RUN_GROUP", None)
    env.update(extra)
    return env


def rag_main(args: list[str], env: dict[str, str], timeout: float = 1200) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "rag.main", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def run_module(module: str, args: list[str], env: dict[str, str] | None = None,
               timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", module, *args], cwd=ROOT, env=env or dict(os.environ),
                          capture_output=True, text=True, timeout=timeout)


def sweep_dirs(outputs: Path) -> list[Path]:
    """Sweep folders under RAG_OUTPUT_DIR/multirun/<date>/<time>."""
    return sorted(p for p in (outputs / "multirun").glob("*/*") if p.is_dir())


def slurm_unavailable_reason() -> str | None:
    """None when a SLURM controller answers and its node can run jobs; else why not."""
    if shutil.which("sinfo") is None:
        return "sinfo not installed (start SLURM with .ci/slurm/setup.sh)"
    try:
        proc = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"sinfo does not respond: {err}"
    if proc.returncode != 0:
        return f"sinfo fails: {proc.stderr.strip()[:200]}"
    states = proc.stdout.split()
    if not any(s.rstrip("*~#") in ("idle", "mix", "alloc") for s in states):
        return f"no usable SLURM node (states {states})"
    return None


def wait_for(predicate, timeout: float, interval: float = 0.5, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def journal_lines(run_dir: Path) -> int:
    path = run_dir / "answers.partial.jsonl"
    if not path.is_file():
        return 0
    return sum(1 for line in path.read_bytes().split(b"\n")[:-1] if line.strip())


# -- W&B offline runs, read back -------------------------------------------------------------------------------
def offline_runs(folder: Path) -> list[Path]:
    return sorted(folder.glob("wandb/offline-run-*"))


def read_wandb_run(run_dir: Path) -> dict[str, Any]:
    """name, group, job_type, tags, config, summary and history of an offline run, as W&B recorded them."""
    records = subprocess.run([WANDB, "leet", "inspect", "--json", str(run_dir)], capture_output=True, text=True,
                             timeout=120, check=True).stdout
    summary = json.loads(subprocess.run([WANDB, "leet", "inspect", "--summary", "--json", str(run_dir)],
                                        capture_output=True, text=True, timeout=120, check=True).stdout)
    out: dict[str, Any] = {"config": summary.get("config", {}), "summary": summary.get("summary", {}),
                           "tags": summary.get("tags", []), "name": summary.get("name"),
                           "state": summary.get("state"), "history": []}
    for line in records.splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if record.get("type") == "run":
            run = record["run"]
            out.update(group=run.get("run_group"), job_type=run.get("job_type"), run_id=run.get("run_id"))
        elif record.get("type") == "history":
            out["history"].append(record["history"]["item"])
    return out


def wandb_table(run_dir: Path, key: str) -> dict[str, Any]:
    """A logged wandb.Table, from the run's files (media/table/<key>_*.table.json)."""
    root = run_dir / "files" / "media" / "table"
    files = sorted(root.rglob("*.table.json"))
    matches = [f for f in files if str(f.relative_to(root)).startswith(f"{key}_")]
    if not matches:
        raise FileNotFoundError(f"no table {key!r} in {run_dir} (have {[f.name for f in files]})")
    return json.loads(matches[-1].read_text())
