"""The served model's endpoint file, its liveness and its leases (rag/llm/served.py): fast, real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rag.core.errors import ConfigError, ServiceError
from rag.llm.served import (
    ENDPOINT_VERSION,
    hostname,
    owner_gone,
    pid_alive,
    read_endpoint,
    stop_server,
    write_endpoint,
)


def sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])


def ready(path: Path, **fields) -> Path:
    record = {"state": "ready", "url": "http://127.0.0.1:9/v1", "model": "m", "request_model": "m",
              "model_id": {"name": "m"}, "engine": {"backend": "vllm"}, "rendering": "chat", "tokenizer": "t",
              "llm": {}, "host": hostname(), "heartbeat_at": time.time(), "lease_s": 120, **fields}
    write_endpoint(path, record)
    return path


def test_a_missing_endpoint_file_is_one_line_naming_the_setting_and_the_command(tmp_path):
    ready(tmp_path / "judge.json")
    with pytest.raises(ServiceError) as err:
        read_endpoint(tmp_path / "gemma.json")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"llm.endpoint_file={tmp_path / 'gemma.json'}: no served model there")
    assert "python -m rag.llm.serve" in message and "holds: judge" in message


@pytest.mark.parametrize("text, words", [
    ('{"version": 1, "state": "rea', "invalid JSON at line 1"),
    (json.dumps({"version": ENDPOINT_VERSION + 1, "state": "ready"}), f"found version {ENDPOINT_VERSION + 1}"),
    (json.dumps({"version": ENDPOINT_VERSION, "state": "ready", "url": "http://x"}), "lacks model, request_model"),
])
def test_a_file_that_is_not_an_endpoint_file_is_one_line(tmp_path, text, words):
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        read_endpoint(path, "judge.llm.endpoint_file")
    assert "\n" not in str(err.value) and str(err.value).startswith(f"judge.llm.endpoint_file={path}")
    assert words in str(err.value)


def test_liveness_on_this_host_follows_the_processes(tmp_path):
    server = sleeper()
    try:
        endpoint = read_endpoint(ready(tmp_path / "e.json", pid=os.getpid(), server_pid=server.pid))
        assert endpoint.liveness() is None
        server.send_signal(signal.SIGKILL)
        time.sleep(0.5)  # killed, not yet reaped: a zombie counts as gone
        assert pid_alive(server.pid) is False
        assert endpoint.liveness() == f"its vLLM server process {server.pid} on {hostname()} is gone"
    finally:
        server.kill()
        server.wait()


def test_liveness_on_another_host_follows_the_heartbeat(tmp_path):
    fresh = read_endpoint(ready(tmp_path / "a.json", host="gpu-node-7", heartbeat_at=time.time() - 30, lease_s=60))
    assert fresh.liveness() is None
    stale = read_endpoint(ready(tmp_path / "b.json", host="gpu-node-7", heartbeat_at=time.time() - 300, lease_s=60))
    assert stale.liveness() == "no heartbeat from gpu-node-7 for 300 s (lease 60 s)"


def test_a_stopped_server_says_why(tmp_path):
    endpoint = read_endpoint(ready(tmp_path / "e.json", state="stopped", reason="vLLM exited with status -9"))
    assert endpoint.liveness() == "it is stopped: vLLM exited with status -9"
    assert stop_server(endpoint.path, "test") == f"{endpoint.describe()} was already stopped"
    assert stop_server(tmp_path / "none.json", "test") == f"{tmp_path / 'none.json'}: no endpoint file, nothing to stop"


def test_the_owner_lease(tmp_path):
    owner = sleeper()
    try:
        now = time.time()
        assert owner_gone(None) is None
        held = {"pid": owner.pid, "host": hostname(), "sweep_dir": "/s", "renewed_at": now, "lease_s": 60}
        assert owner_gone(held) is None
        elsewhere = {**held, "host": "login-1", "renewed_at": now - 61}
        assert "has not renewed its lease for 61 s (lease 60 s)" in owner_gone(elsewhere)
        owner.kill()
        owner.wait()
        assert owner_gone(held) == f"sweep /s (pid {owner.pid} on {hostname()}) is gone"
    finally:
        owner.kill()
        owner.wait()


def test_a_failed_server_is_reported_by_its_logs_exception(tmp_path):
    from rag.llm.serve import _last_error

    log = tmp_path / "served.log"
    log.write_text("INFO starting\nTraceback (most recent call last):\n  File x\n"
                   "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
                   "  Value error, User-specified max_model_len (999999) is greater than the derived max_model_len\n"
                   "    For further information visit https://errors.pydantic.dev\n")
    assert _last_error(str(log)) == ("pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig "
                                     "Value error, User-specified max_model_len (999999) is greater than the derived "
                                     "max_model_len")
    log.write_text("loading\nKilled\n")
    assert _last_error(str(log)) == "Killed"
