"""The session's shared parts of the documented-commands tests (main and vLLM sessions): one store that runs each
row once, on demand, the instant endpoint, the tiny BGE model and the local services rows read."""

from __future__ import annotations

import hashlib
import os
import re
import string
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.conftest import DATA_DIR, ROOT
from tests.docs import runner
from tests.docs.checks import Ran
from tests.docs.fixtures import FIXTURES, IMPORTS, build_tiny_bge, close_services
from tests.docs.table import ROWS, Run, Smoke, swap
from tests.instant_endpoint import InstantEndpoint

LOCAL_CONF = Path(__file__).resolve().parent  # tests/docs/local/default.yaml: CI's SLURM as `cluster:`


class Store:
    """Runs each row once per session, on demand (a row's folder may be another row's input)."""

    def __init__(self, base: Path, cache: Path, endpoint: InstantEndpoint, tiny_bge: Path):
        self.base, self.cache, self.endpoint, self.tiny_bge = base, cache, endpoint, tiny_bge
        self.ran: dict[str, Ran] = {}
        self.lock = threading.RLock()

    def env(self, home: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB_RUN", "SLURM_", "SUBMITIT_"))}
        env.update(RAG_DATA_DIR=str(DATA_DIR), RAG_CACHE_DIR=str(self.cache), RAG_OUTPUT_DIR=str(home / "outputs"),
                   WANDB_MODE="offline", WANDB_SILENT="true", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
                   PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}",
                   OPENAI_BASE_URL=self.endpoint.url, OPENAI_MODEL=self.endpoint.model,
                   OPENAI_API_KEY="instant-endpoint-accepts-any-key", ANTHROPIC_BASE_URL=self.endpoint.url.rsplit(
                       "/v1", 1)[0], ANTHROPIC_API_KEY="instant-endpoint-accepts-any-key",
                   PYTHONPATH=f"{ROOT}:{self.base / 'inputs' / IMPORTS}", OPENSEARCH_ACCESS="basic", OPENSEARCH_USER="docs-test",
                   OPENSEARCH_PASSWORD="docs-test-password", PINECONE_API_KEY="docs-test-pinecone-key")
        return env

    def folder(self, name: str) -> Any:
        """The folder (or file) a row or fixture made, made first if needed."""
        if name in FIXTURES:
            return FIXTURES[name](self)
        producer = next((t for t, r in ROWS.items() if isinstance(r, Run) and r.makes == name), None)
        assert producer is not None, f"no row makes {name!r}"
        ran = self.run(producer, ROWS[producer])
        assert ran.result.returncode == ROWS[producer].status, ran.result.tail()
        return ran.made[name]

    def run(self, doc: str, row: Run) -> Ran:
        with self.lock:
            if doc in self.ran:
                return self.ran[doc]
            name = re.sub(r"[^\w.-]+", "_", doc)
            # two long commands may share their first 80 characters: the rest is told apart by a hash
            home = self.base / (name if len(name) <= 80 else f"{name[:80]}_{hashlib.sha1(doc.encode()).hexdigest()[:8]}")
            home.mkdir(parents=True, exist_ok=True)
            if getattr(row, "venv", "main") == "vllm":  # one cluster: the served models' endpoint files are shared
                served = home / "outputs" / "served"
                served.parent.mkdir(exist_ok=True)
                (self.base / "served").mkdir(exist_ok=True)
                if not served.exists():
                    served.symlink_to(self.base / "served", target_is_directory=True)
            command = doc
            inputs: dict[str, Path] = {}
            fields = {"tiny_bge": str(self.tiny_bge), "local_conf": str(LOCAL_CONF), "tmp": str(home),
                      "repo_root": str(ROOT)}
            for text, template in row.fills.items():  # a template names other rows' folders: "{demo_run}/x"
                names = [name for _, name, _, _ in string.Formatter().parse(template) if name]
                inputs.update({name: self.folder(name) for name in names if name not in fields})
                values = {n: fields[n] if n in fields else str(inputs[n]) for n in names}
                command = command.replace(text, template.format(**values))
            if isinstance(row, Smoke):
                for pattern, replacement in row.reduce:
                    command = re.sub(pattern, lambda m, r=replacement: m.expand(r.format(**fields)), command)
            command = swap(command, fields, row.model)
            if row.extra:
                command += " " + row.extra.format(**fields)
            result = runner.run(command, cwd=ROOT if not row.cwd_home else home, env=self.env(home),
                                log_dir=home / "log", timeout=row.timeout, isolated=row.isolated)
            ran = Ran(doc, command, result, home, inputs=inputs, env=self.env(home))
            if row.makes and result.returncode == row.status:
                if row.made_at and row.made_at.startswith("printed:"):  # the path the command printed after a label
                    label = row.made_at.removeprefix("printed:")
                    printed = [line.split(label, 1)[1].strip() for line in result.stdout.splitlines()
                               if line.startswith(label)]
                    assert printed, f"the command printed no {label!r} line\n{result.tail()}"
                    ran.made[row.makes] = Path(printed[-1])
                elif row.made_at:
                    ran.made[row.makes] = home / row.made_at
                else:
                    ran.made[row.makes] = ran.sweep_dir() if " -m " in f" {doc} " else ran.run_dir()
            self.ran[doc] = ran
            return ran


@contextmanager
def session_store(base: Path, cache: Path) -> Iterator[Store]:
    """The store of one test session, with the instant endpoint serving and the local services closed at the end."""
    with InstantEndpoint(model="instant", models=("instant", "claude-haiku-4-5-20251001")) as endpoint:
        try:
            yield Store(base, cache, endpoint, build_tiny_bge(base / "tiny-bge"))
        finally:
            close_services()
