"""UMBRELA's `mode: auto` against an OpenAI-compatible endpoint that returns no log-probabilities even when asked
(many proxies and hosted APIs): the class says it can, so `auto` tries logprobs; a batch with no alternatives at
all settles the engine on text mode, says so in one line, and grades that batch again in text mode, instead of
leaving every grade unreadable (issue 52). An endpoint that does return them stays in logprobs mode."""

from __future__ import annotations

import logging

from eval.umbrela import GradeItem, UmbrelaGrader
from rag.llm.openai_compat import OpenAICompatibleEngine
from tests.instant_endpoint import instant_endpoint

ITEMS = [GradeItem("q1", "p1", "who wrote hamlet", "Hamlet is a tragedy by William Shakespeare."),
         GradeItem("q1", "p2", "who wrote hamlet", "The Thames flows through London.")]


def _engine(url: str) -> OpenAICompatibleEngine:
    return OpenAICompatibleEngine(model="instant", base_url=url, api_key_env=None, concurrency=1)


def test_auto_falls_back_to_text_when_the_endpoint_returns_no_logprobs(tmp_path, caplog):
    with instant_endpoint(logprobs=False) as endpoint:
        grader = UmbrelaGrader(cache_dir=tmp_path, mode="auto")
        with caplog.at_level(logging.WARNING, logger="eval.umbrela"):
            grades = grader.grade(_engine(endpoint.url), ITEMS)
        asked = list(endpoint.requests)
    assert len(grades) == 2 and grader.resolved_mode(_engine("http://unused/v1")) == "text"
    probe, text = asked[:2], asked[2:]
    assert all(r.get("top_logprobs") for r in probe)  # the logprobs batch, answered without any
    assert text and not any(r.get("top_logprobs") or r.get("logprobs") for r in text)  # then the text prompt
    lines = [r.getMessage() for r in caplog.records if "no log-probabilities" in r.getMessage()]
    assert lines == ["umbrela: mode=auto: instant returned no log-probabilities for any of 2 requests; grading in "
                     "text mode (the published `##final score:` reply). Set umbrela.mode=text to skip the probe"]


def test_auto_keeps_logprobs_when_the_endpoint_returns_them(tmp_path):
    with instant_endpoint() as endpoint:
        grader = UmbrelaGrader(cache_dir=tmp_path, mode="auto")
        grader.grade(_engine(endpoint.url), ITEMS)
        asked = list(endpoint.requests)
    assert len(asked) == 2 and all(r.get("top_logprobs") for r in asked)
    assert grader.resolved_mode(_engine("http://unused/v1")) == "logprobs"
