"""Issue 25, fault 7: an LLM request that timed out ended in a 148-line `APITimeoutError` traceback naming no URL
and no setting; a judge endpoint failing every request mid-run in a 97-line one. Now one line naming the endpoint
(credentials masked) and the setting to change, exit 2, the run's answers journalled for the resume. A real HTTP
server on 127.0.0.1 that is slow or fails."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rag.core.errors import ServiceError
from rag.core.io import read_jsonl
from rag.llm.base import LLMRequest, SamplingParams
from rag.llm.openai_compat import OpenAICompatibleEngine
from tests.cluster.helpers import CHEAP, rag_env, rag_main


class FaultyServer(BaseHTTPRequestHandler):
    """`/v1/models` answers; completions are slow (`mode = "slow"`), fail with HTTP 500 (`"fail"`) or are refused
    with HTTP 400 (`"bad_request"`); `server.posts` counts the completion requests received."""

    mode = "slow"

    def log_message(self, *args) -> None:  # keep the test output clean
        pass

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - the handler's API
        self._send(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.posts += 1
        if self.server.mode == "slow":
            time.sleep(1.5)
            return
        if self.server.mode in ("html", "html_as_json"):  # a proxy's page, answered with HTTP 200
            page = b"<!DOCTYPE html>\n<html><head><title>Sign in to the proxy</title></head><body>...</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html" if self.server.mode == "html" else "application/json")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
            return
        if self.server.mode == "no_choices":
            self._send(200, {"object": "chat.completion", "model": "m"})
            return
        if self.server.mode == "bad_request":
            self._send(400, {"error": {"message": "max_tokens is too large", "type": "invalid_request_error"}})
            return
        self._send(500, {"error": {"message": "the model worker crashed", "type": "server_error"}})


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FaultyServer)
    httpd.daemon_threads = True
    httpd.mode = "slow"
    httpd.posts = 0
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _url(httpd: ThreadingHTTPServer, credentials: str = "") -> str:
    return f"http://{credentials}127.0.0.1:{httpd.server_address[1]}/v1"


def test_a_timeout_is_one_line_naming_the_endpoint_and_the_setting(server):
    engine = OpenAICompatibleEngine(model="m", base_url=_url(server, "user:s3cret@"), api_key_env=None,
                                    timeout_s=0.3, max_retries=1)
    request = LLMRequest(messages=[{"role": "user", "content": "hi"}], params=SamplingParams(max_tokens=4))
    with pytest.raises(ServiceError) as err:
        engine.generate([request])
    line = str(err.value)
    assert "\n" not in line and "llm.timeout_s=0.3 s after 2 attempts" in line
    assert f"127.0.0.1:{server.server_address[1]}" in line and "s3cret" not in line and "***@" in line
    server.mode = "fail"
    with pytest.raises(ServiceError, match=r"HTTP 500 after 2 attempts: .*the model worker crashed"):
        engine.generate([request])


def test_a_refused_request_says_the_one_attempt_it_made(server):
    """Issue 36: an HTTP 400 is not retried, yet its line said "after 5 attempt(s)" (the configured maximum)."""
    server.mode = "bad_request"
    engine = OpenAICompatibleEngine(model="m", base_url=_url(server), api_key_env=None, max_retries=4)
    request = LLMRequest(messages=[{"role": "user", "content": "hi"}], params=SamplingParams(max_tokens=4))
    with pytest.raises(ServiceError) as err:
        engine.generate([request])
    assert server.posts == 1
    assert "HTTP 400 after 1 attempt: " in str(err.value) and "max_tokens is too large" in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("mode", ["html", "html_as_json", "no_choices"])
def test_an_answer_that_is_no_completion_is_one_line_naming_the_endpoint_and_what_came_back(server, mode):
    """Issue 52: an HTTP 200 whose body is a proxy's HTML page ended in a 103-line `JSONDecodeError` (or an
    `AttributeError`) naming no endpoint. Now it is retried (the page of a restarting gateway goes away), then one
    line naming the endpoint and the first bytes of the body."""
    server.mode = mode
    engine = OpenAICompatibleEngine(model="m", base_url=_url(server), api_key_env=None, max_retries=1)
    request = LLMRequest(messages=[{"role": "user", "content": "hi"}], params=SamplingParams(max_tokens=4))
    with pytest.raises(ServiceError) as err:
        engine.generate([request])
    line = str(err.value)
    assert "\n" not in line and server.posts == 2, line
    assert line.startswith(f"llm endpoint http://127.0.0.1:{server.server_address[1]}/v1 (model m): HTTP 200 after "
                           f"2 attempts, but "), line
    if mode == "no_choices":
        assert line.endswith("""the JSON holds no choices (a proxy's page, or llm.base_url not the API's /v1 root?); """
                             """it began: '{"model": "m", "object": "chat.completion"}'"""), line
    else:
        assert " the body is not JSON " in line and "it began: '<!DOCTYPE html> <html><head><title>Sign in" in line


@pytest.mark.slow
def test_a_judge_endpoint_failing_mid_run_is_one_line_and_the_answers_resume(hotpot_data, server, tmp_path):
    server.mode = "fail"
    judge_llm = (f"{{_target_:rag.llm.openai_compat.OpenAICompatibleEngine,model:m,base_url:'{_url(server)}',"
                 f"api_key_env:null,max_retries:0}}")
    run_dir = tmp_path / "run"
    proc = rag_main([*CHEAP, "dataset.limit=2", "logger=none", "judge=[liverag]", f"judge.llm={judge_llm}",
                     f"hydra.run.dir={run_dir}"], rag_env(tmp_path), timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert "Traceback" not in out
    [line] = [ln for ln in out.splitlines() if "ServiceError" in ln]
    assert f"127.0.0.1:{server.server_address[1]}" in line and "HTTP 500 after 1 attempt:" in line
    # issue 36: the judges' engine is named by its own setting, not the generator's llm.*
    assert "ServiceError: judge.llm endpoint http://127.0.0.1:" in line
    assert len(read_jsonl(run_dir / "answers.partial.jsonl")) == 2  # both answers journalled for the resume
