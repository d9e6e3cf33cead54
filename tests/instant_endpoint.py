"""A deterministic OpenAI-compatible endpoint on 127.0.0.1 that answers at once: for orchestration checks only.

Documented commands that run at full dataset scale (hundreds of questions, sweeps of many cells) use it in place of
a GPU model (tests/docs/table.py declares where): it lets the whole path run (composition, preflight, launchers,
stage caches, every strategy's steps, judges, summaries, reports) in seconds. Its replies are never a metric value
anyone reads: a test checks what a run promises (cells complete, answers non-empty, files written), not how good
the answers are.

What it answers, the same way every time for the same request:
- `GET /v1/models`: its models, in a list both OpenAI's and Anthropic's clients read (`max_model_len` included, as
  vLLM reports it).
- `POST /v1/chat/completions` and `/v1/completions`: with `response_format` `json_schema`, the smallest instance of
  the schema (first enum value, lowest allowed number, one list item, every required field); otherwise a short text
  made of the last line of the prompt. With `logprobs` / `top_logprobs`, alternatives at each position.
- `POST /v1/messages`: Anthropic's Messages API, the same reply in its response shape.
- `delay_s=S`: every completion answered S seconds late (a slow model: time to stop a run between its chunks).
- `reasoning_tokens=N`: a reasoning model's hidden tokens, spent out of `max_completion_tokens` (or `max_tokens`)
  before the visible reply: a limit of at most N returns an empty reply with `finish_reason` "length", as OpenAI's
  reasoning models do.
Every request body is kept in `requests` for assertions.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REPLY_WORDS = 12


def schema_instance(schema: dict[str, Any], salt: str = "x", defs: dict[str, Any] | None = None,
                    sentences: tuple[str, ...] = ()) -> Any:
    """The smallest value `schema` accepts (deterministic). A free string is a sentence of the prompt picked by
    `salt` (so answers, nuggets and questions are text the prompt holds, and different prompts get different
    ones), else `instant <salt>`."""
    defs = defs if defs is not None else {**schema.get("$defs", {}), **schema.get("definitions", {})}
    if "$ref" in schema:
        return schema_instance(defs[schema["$ref"].rsplit("/", 1)[-1]], salt, defs, sentences)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return schema_instance(schema[key][0], salt, defs, sentences)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {name: schema_instance(props.get(name, {}), f"{salt} {name}", defs, sentences)
                for name in schema.get("required", list(props))}
    if kind == "array":
        count = max(1, int(schema.get("minItems", 1)))
        return [schema_instance(schema.get("items", {}), f"{salt} {i}", defs, sentences) for i in range(count)]
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return float(schema.get("minimum", 0.0))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    pick = int(hashlib.sha256(salt.encode()).hexdigest()[:8], 16)
    text = sentences[pick % len(sentences)] if sentences else f"instant {salt}"
    low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
    text = text.ljust(low, "x")
    return text[: int(high)] if high is not None else text


def prompt_text(body: dict[str, Any]) -> str:
    if "prompt" in body:
        return str(body["prompt"])
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []))


def prompt_sentences(prompt: str) -> tuple[str, ...]:
    """Sentences of 5 to 30 words in the prompt (its passages, mostly), in order."""
    import re

    found = [" ".join(s.split()) for s in re.split(r"(?<=[.!?])\s+|\n+", prompt)]
    return tuple(s for s in found if 5 <= len(s.split()) <= 30)


def text_reply(prompt: str) -> str:
    """A short reply from the prompt's last question line (else its last line of three words or more, never a bare
    label such as `Answer:`, which a strategy's parser would strip to nothing): never empty."""
    lines = [line.replace("Question:", "").strip() for line in prompt.splitlines()]
    lines = [line for line in lines if len(line.split()) >= 3 and not line.endswith(":")]
    questions = [line for line in lines if "?" in line]
    words = (questions or lines or ["answer"])[-1].split()[:REPLY_WORDS]
    return "Final answer: " + " ".join(words)


class InstantEndpoint:
    """`with InstantEndpoint() as endpoint:` serves on `endpoint.url` (`http://127.0.0.1:<port>/v1`)."""

    def __init__(self, model: str = "instant", reasoning_tokens: int = 0, max_model_len: int = 32768,
                 models: tuple[str, ...] = (), logprobs: bool = True, delay_s: float = 0.0):
        self.model, self.reasoning_tokens, self.max_model_len = model, reasoning_tokens, max_model_len
        self.delay_s = delay_s
        #: False: never any log-probabilities, even when asked (as many proxies and hosted APIs answer)
        self.logprobs = logprobs
        #: the ids `GET /v1/models` lists (OpenAI's and Anthropic's list shapes at once)
        self.models_listed = tuple(models) or (model,)
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    # -- replies --------------------------------------------------------------------------------------------------
    def reply(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.requests.append({"path": path, **body})
        if self.delay_s:
            time.sleep(self.delay_s)
        limit = body.get("max_completion_tokens") or body.get("max_tokens") or 256
        prompt = prompt_text(body)
        prompt_tokens = max(1, len(prompt.split()))
        if self.reasoning_tokens and int(limit) <= self.reasoning_tokens:
            text, finish, spent = "", "length", int(limit)
        else:
            schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
            salt = hashlib.sha256(prompt.encode()).hexdigest()[:8]
            text = json.dumps(schema_instance(schema, salt, sentences=prompt_sentences(prompt))) if schema \
                else text_reply(prompt)
            finish, spent = "stop", len(text.split()) + self.reasoning_tokens
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": spent,
                 "total_tokens": prompt_tokens + spent,
                 "completion_tokens_details": {"reasoning_tokens": min(spent, self.reasoning_tokens)}}
        tokens = text.split(" ") if text else []
        top = int(body.get("top_logprobs") or (body.get("logprobs") if isinstance(body.get("logprobs"), int)
                                                and not isinstance(body.get("logprobs"), bool) else 0) or 0)
        wants_logprobs = self.logprobs and (bool(body.get("logprobs")) or top > 0)
        base = {"id": "instant", "created": 0, "model": self.model, "usage": usage}
        if "prompt" in body:
            choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": finish}
            if wants_logprobs:
                choice["logprobs"] = {"tokens": tokens, "token_logprobs": [-0.1] * len(tokens),
                                      "top_logprobs": [{t: -0.1} for t in tokens]}
            return {**base, "object": "text_completion", "choices": [choice]}
        message = {"role": "assistant", "content": text}
        choice = {"index": 0, "message": message, "finish_reason": finish}
        if wants_logprobs:
            choice["logprobs"] = {"content": [
                {"token": t, "logprob": -0.1, "bytes": None,
                 "top_logprobs": [{"token": t, "logprob": -0.1, "bytes": None}]} for t in tokens]}
        return {**base, "object": "chat.completion", "choices": [choice]}

    def message(self, body: dict[str, Any]) -> dict[str, Any]:
        """Anthropic's Messages API (`POST /v1/messages`): the same reply in its documented response shape (content
        blocks, stop_reason, input/output token usage). A system prompt comes as the top-level `system` field."""
        system = body.get("system")
        system_text = system if isinstance(system, str) else " ".join(
            str(b.get("text", "")) for b in system or [] if isinstance(b, dict))
        messages = [{"role": m.get("role"), "content": m.get("content") if isinstance(m.get("content"), str) else
                     " ".join(str(b.get("text", "")) for b in m.get("content") or [] if isinstance(b, dict))}
                    for m in body.get("messages", [])]
        chat = self.reply("/v1/messages", {**{k: v for k, v in body.items() if k not in ("messages", "system")},
                                            "messages": [{"role": "system", "content": system_text}] * bool(system_text)
                                            + messages})
        choice, usage = chat["choices"][0], chat["usage"]
        return {"id": "msg_instant", "type": "message", "role": "assistant", "model": body.get("model", self.model),
                "content": [{"type": "text", "text": choice["message"]["content"]}],
                "stop_reason": "max_tokens" if choice["finish_reason"] == "length" else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"]}}

    def models(self) -> dict[str, Any]:
        data = [{"id": name, "object": "model", "owned_by": "tests", "created": 0, "max_model_len": self.max_model_len,
                 "type": "model", "display_name": name, "created_at": "2025-10-01T00:00:00Z"}
                for name in self.models_listed]
        return {"object": "list", "data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]}

    # -- server ---------------------------------------------------------------------------------------------------
    def start(self) -> InstantEndpoint:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep the test output clean
                pass

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - the handler's API
                path = self.path.split("?", 1)[0].rstrip("/")
                if path.endswith("/models"):
                    self._send(200, endpoint.models())
                elif path.startswith("/v1/models/"):  # Anthropic's model lookup (aliases)
                    name = path.rsplit("/", 1)[-1]
                    listed = [m for m in endpoint.models()["data"] if m["id"] == name]
                    self._send(200 if listed else 404, listed[0] if listed else {"error": {"message": name}})
                elif path.endswith("/props"):  # llama.cpp's server: its context size
                    self._send(200, {"default_generation_settings": {"n_ctx": endpoint.max_model_len}})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path.split("?", 1)[0].rstrip("/").endswith(("/chat/completions", "/completions")):
                    self._send(200, endpoint.reply(self.path, body))
                elif self.path.split("?", 1)[0].rstrip("/").endswith("/messages"):
                    self._send(200, endpoint.message(body))
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> InstantEndpoint:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


@contextmanager
def instant_endpoint(**kwargs: Any) -> Iterator[InstantEndpoint]:
    with InstantEndpoint(**kwargs) as endpoint:
        yield endpoint
