"""Is the configured model still served? The real Anthropic and OpenAI SDK clients list the models of an HTTP
server on 127.0.0.1 that answers like the documented `GET /v1/models`: Anthropic's `{data: [{type: "model", id,
display_name, created_at, lifecycle}], has_more, first_id, last_id}` (paged by `after_id`, aliases resolved by
`GET /v1/models/{id}`), OpenAI's `{object: "list", data: [{id, object: "model", created, owned_by}]}`. Checked:
the command (`python -m rag.llm.check_model`), the preflight (only with the key set, once per endpoint), and
one-line failures that name the setting and never the key. Live tests ask the real APIs when their keys are set."""

from __future__ import annotations

import os
import subprocess
import sys
from urllib.parse import parse_qs, urlsplit

import pytest

from rag import preflight
from rag.llm.anthropic_engine import AnthropicEngine, AnthropicEngineError
from rag.llm.check_model import check
from rag.llm.hosted import EndpointUnreachableError, ModelNotServedError
from rag.llm.openai_compat import OpenAICompatibleEngine
from rag.preflight import check_config
from tests.backends.conftest import Recorded, Reply
from tests.conftest import ROOT, compose_config

KEY = "sk-ant-test-never-log-me-4711"
OPENAI_KEY = "sk-openai-test-never-log-me-0815"
HAIKU = "claude-haiku-4-5-20251001"


def _anthropic_model(model_id: str, lifecycle: str = "active", retires_at: str | None = None) -> dict:
    return {"type": "model", "id": model_id, "display_name": model_id.replace("-", " ").title(),
            "created_at": "2025-10-01T00:00:00Z", "lifecycle": lifecycle, "retires_at": retires_at}


def _anthropic_catalogue(pages: list[list[dict]], catalogue: dict[str, dict] | None = None):
    """Answers `GET /v1/models` page by page (`after_id` = the previous page's `last_id`) and
    `GET /v1/models/{id}` from `catalogue` (aliases and retired models), 404 otherwise."""
    by_after = {None: 0, **{page[-1]["id"]: i + 1 for i, page in enumerate(pages[:-1])}}

    def respond(rec: Recorded) -> Reply:
        url = urlsplit(rec.path)
        if url.path == "/v1/models":
            after = parse_qs(url.query).get("after_id", [None])[0]
            i = by_after[after]
            page = pages[i]
            return Reply(200, {"data": page, "has_more": i + 1 < len(pages), "first_id": page[0]["id"],
                               "last_id": page[-1]["id"]})
        name = url.path.removeprefix("/v1/models/")
        if catalogue and name in catalogue:
            return Reply(200, catalogue[name])
        return Reply(404, {"type": "error", "error": {"type": "not_found_error", "message": f"model: {name}"}})

    return respond


def _openai_models(ids: list[str], owned_by: str = "openai"):
    def respond(rec: Recorded) -> Reply:
        if urlsplit(rec.path).path == "/v1/models":
            return Reply(200, {"object": "list", "data": [{"id": i, "object": "model", "created": 1_700_000_000,
                                                           "owned_by": owned_by} for i in ids]})
        return Reply(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    return respond


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def test_anthropic_model_listed_across_pages_is_served(fake_service, key):
    fake_service.responder = _anthropic_catalogue([[_anthropic_model("claude-opus-4-5-20251101")],
                                                   [_anthropic_model(HAIKU)]])
    line = AnthropicEngine(model=HAIKU, base_url=fake_service.url).check_model()
    assert line == f"llm.model={HAIKU}: served by {fake_service.url}"
    first, second = fake_service.requests
    assert (first.method, urlsplit(first.path).path) == ("GET", "/v1/models")
    assert parse_qs(urlsplit(first.path).query)["limit"] == ["1000"]
    assert parse_qs(urlsplit(second.path).query)["after_id"] == ["claude-opus-4-5-20251101"]
    assert KEY in (first.headers.get("x-api-key", ""), first.headers.get("authorization", "").removeprefix("Bearer "))
    assert first.headers.get("anthropic-version")


def test_anthropic_retired_model_fails_in_one_line_naming_the_setting_and_the_closest(fake_service, key):
    """RAGtifier's Claude 3.5 Haiku: no longer listed, still in the catalogue as retired."""
    old = "claude-3-5-haiku-20241022"
    fake_service.responder = _anthropic_catalogue(
        [[_anthropic_model(HAIKU), _anthropic_model("claude-sonnet-4-5-20250929")]],
        {old: _anthropic_model(old, lifecycle="retired")})
    with pytest.raises(ModelNotServedError) as err:
        AnthropicEngine(model=old, base_url=fake_service.url).check_model("judge.liverag.llm.model")
    line = str(err.value)
    assert line.startswith(f"judge.liverag.llm.model={old} is retired at {fake_service.url} (closest: ")
    assert HAIKU in line and "\n" not in line and KEY not in line
    assert [urlsplit(r.path).path for r in fake_service.requests] == ["/v1/models", f"/v1/models/{old}"]


def test_anthropic_unknown_model_is_not_served(fake_service, key):
    fake_service.responder = _anthropic_catalogue([[_anthropic_model(HAIKU)]])
    with pytest.raises(ModelNotServedError, match=r"^llm\.model=claude-haiku-9 is not served by .*closest: "
                                                  r"claude-haiku-4-5-20251001\); set llm\.model to a model it serves$"):
        AnthropicEngine(model="claude-haiku-9", base_url=fake_service.url).check_model()


def test_anthropic_alias_is_resolved_and_deprecated_models_are_said(fake_service, key):
    listed = [_anthropic_model(HAIKU, lifecycle="deprecated", retires_at="2027-10-01T00:00:00Z")]
    fake_service.responder = _anthropic_catalogue([listed], {"claude-haiku-4-5": listed[0]})
    engine = AnthropicEngine(model="claude-haiku-4-5", base_url=fake_service.url)
    assert engine.check_model() == f"llm.model=claude-haiku-4-5: served by {fake_service.url} as {HAIKU}"
    engine.model = HAIKU
    assert engine.check_model().endswith("(deprecated: retires 2027-10-01)")


def test_anthropic_refused_key_and_unreachable_endpoint_are_one_line(fake_service, key, closed_port_url):
    fake_service.replies = [Reply(401, {"type": "error", "error": {"type": "authentication_error",
                                                                    "message": "invalid x-api-key"}})]
    with pytest.raises(AnthropicEngineError) as err:
        AnthropicEngine(base_url=fake_service.url).check_model()
    assert "refused the key in ANTHROPIC_API_KEY (HTTP 401)" in str(err.value) and KEY not in str(err.value)
    assert len(fake_service.requests) == 1  # no retries for a check
    with pytest.raises(EndpointUnreachableError, match="cannot reach .* to list its models"):
        AnthropicEngine(base_url=closed_port_url).check_model()


def test_openai_compatible_models_list(fake_service, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    fake_service.responder = _openai_models(["gpt-5.4-mini", "gpt-5.4", "o3"])
    url = fake_service.url + "/v1"
    assert OpenAICompatibleEngine(model="gpt-5.4-mini", base_url=url).check_model() == \
        f"llm.model=gpt-5.4-mini: served by {url}"
    [rec] = fake_service.requests
    assert (rec.method, rec.path) == ("GET", "/v1/models")
    assert rec.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    with pytest.raises(ModelNotServedError) as err:
        OpenAICompatibleEngine(model="gpt-5.4-mimi", base_url=url).check_model()
    assert str(err.value) == (f"llm.model=gpt-5.4-mimi is not served by {url} (closest: gpt-5.4-mini, gpt-5.4); "
                              f"set llm.model to a model it serves")


def test_llamacpp_servers_answer_any_name_and_vllm_does_not(fake_service):
    url = fake_service.url + "/v1"
    fake_service.responder = _openai_models(["gemma-3-270m.gguf"], owned_by="llamacpp")
    assert "answers every model name" in OpenAICompatibleEngine(model="local-model", base_url=url).check_model()
    fake_service.responder = _openai_models(["tiiuae/Falcon3-10B-Instruct"], owned_by="vllm")
    with pytest.raises(ModelNotServedError, match=r"closest: tiiuae/Falcon3-10B-Instruct"):
        OpenAICompatibleEngine(model="tiiuae/Falcon3-7B-Instruct", base_url=url).check_model()


def test_openai_refused_key_names_the_variable(fake_service, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    fake_service.replies = [Reply(401, {"error": {"message": "Incorrect API key provided", "type":
                                                  "invalid_request_error", "code": "invalid_api_key"}})]
    with pytest.raises(Exception) as err:
        OpenAICompatibleEngine(model="o3", base_url=fake_service.url + "/v1").check_model()
    line = str(err.value)
    assert "refused the key in OPENAI_API_KEY (HTTP 401)" in line and OPENAI_KEY not in line and "\n" not in line


def _command(*overrides: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rag.llm.check_model", *overrides], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_command_says_served_or_fails_in_one_line(fake_service):
    fake_service.responder = _anthropic_catalogue([[_anthropic_model(HAIKU)]])
    env = {**os.environ, "ANTHROPIC_API_KEY": KEY}
    ok = _command("llm=claude_haiku", f"llm.base_url={fake_service.url}", env=env)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert ok.stdout.strip() == f"llm.model={HAIKU}: served by {fake_service.url}"
    bad = _command("llm=claude_haiku", f"llm.base_url={fake_service.url}", "llm.model=claude-3-5-haiku-20241022",
                   env=env)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        f"ModelNotServedError: llm.model=claude-3-5-haiku-20241022 is not served by {fake_service.url} "
        f"(closest: {HAIKU}); set llm.model to a model it serves"]
    assert KEY not in bad.stderr + ok.stdout


def test_the_default_config_passes_the_check_against_the_sdks_own_model_list(fake_service, key):
    """The ids the pinned SDK still lists, served as the API lists them: the default config's model is one."""
    from typing import get_args

    from anthropic.types.model import Model

    listed = [m for m in get_args(get_args(Model)[0])]
    fake_service.responder = _anthropic_catalogue([[_anthropic_model(m) for m in listed]])
    cfg = compose_config(["llm=claude_haiku", f"llm.base_url={fake_service.url}"])
    assert check(cfg) == f"llm.model={HAIKU}: served by {fake_service.url}"
    assert "claude-3-5-haiku-20241022" not in listed  # the id RAGtifier used, no longer listed


def test_preflight_asks_once_per_endpoint_and_only_with_the_key(fake_service, monkeypatch, tmp_path):
    monkeypatch.setattr(preflight, "_MODEL_CHECKS", {})
    fake_service.responder = _anthropic_catalogue([[_anthropic_model("claude-sonnet-4-5-20250929")]])
    cfg = compose_config(["llm=claude_haiku", f"llm.base_url={fake_service.url}"], tmp_path)

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert not [p for p in check_config(cfg) if "llm.model" in p] and fake_service.requests == []

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    assert not [p for p in check_config(cfg, environ={}) if "llm.model" in p] and fake_service.requests == []
    problems = [p for p in check_config(cfg) if "llm.model" in p]
    assert problems == [f"llm.model={HAIKU} is not served by {fake_service.url} (closest: "
                        f"claude-sonnet-4-5-20250929); set llm.model to a model it serves"]
    asked = len(fake_service.requests)  # the list, then the name looked up as an alias
    assert check_config(cfg) and len(fake_service.requests) == asked  # a sweep's cells ask once


def test_preflight_only_warns_when_the_endpoint_does_not_answer(closed_port_url, monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(preflight, "_MODEL_CHECKS", {})
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    cfg = compose_config(["llm=claude_haiku", f"llm.base_url={closed_port_url}"], tmp_path)
    with caplog.at_level("WARNING", logger="rag.preflight"):
        assert not [p for p in check_config(cfg) if "llm" in p]
    assert "cannot reach" in caplog.text and "the model was not checked" in caplog.text


@pytest.mark.live
@pytest.mark.skipif(not os.environ.get("ANTHROPIC_API_KEY"), reason="ANTHROPIC_API_KEY not set")
def test_live_claude_haiku_config_names_a_served_model():
    assert "served by" in check(compose_config(["llm=claude_haiku"]))


@pytest.mark.live
@pytest.mark.skipif(not os.environ.get("OPENAI_API_KEY"), reason="OPENAI_API_KEY not set")
def test_live_openai_reasoning_config_names_a_served_model():
    assert "served by" in check(compose_config(["llm=openai_reasoning"]))
