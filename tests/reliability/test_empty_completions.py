"""Issue 25, fault 1: an endpoint that returns "" (a crashed server behind a proxy, a model that stops at once)
gave answers '' with parse_failures 0, and the response cache kept '' for the rerun against a healthy server.
Now an empty completion is re-asked and never cached, and an empty answer of an LLM generator is a counted
failure that a resumed run generates again."""

from __future__ import annotations

from collections.abc import Sequence

from omegaconf import OmegaConf

from rag.core.io import read_jsonl
from rag.llm.base import Completion, LLMEngine, LLMRequest, SamplingParams
from rag.llm.cache import ResponseCache
from rag.pipeline import Pipeline
from tests.conftest import compose_config

#: what the engines of this module answer, by model name (a test sets it; the pipeline builds engines itself)
REPLIES: dict[str, list[str]] = {}


class QueueEngine(LLMEngine):
    """A real engine (cache, usage, re-asks of the base class) whose backend pops its replies from `REPLIES`;
    the last reply repeats."""

    #: as the engines behind a network (an empty reply is a server fault, asked again once)
    empty_retries = 1

    def __init__(self, model: str = "queue", cache: ResponseCache | None = None):
        super().__init__(model=model, chat_format="chat", cache=cache)
        self.asked = 0

    def _generate(self, requests: Sequence[LLMRequest], desc: str) -> list[Completion]:
        replies = REPLIES[self.model]
        out = []
        for _ in requests:
            self.asked += 1
            out.append(Completion(text=replies.pop(0) if len(replies) > 1 else replies[0], prompt_tokens=3,
                                  completion_tokens=1))
        return out


def _request(text: str = "hi") -> LLMRequest:
    return LLMRequest(messages=[{"role": "user", "content": text}], params=SamplingParams(max_tokens=4))


def test_an_empty_completion_is_reasked_and_never_cached(tmp_path):
    cache = ResponseCache(tmp_path / "llm")
    REPLIES["flaky"] = ["", "Paris"]
    engine = QueueEngine("flaky", cache=cache)
    [completion] = engine.generate([_request()])
    assert completion.text == "Paris" and engine.asked == 2 and engine.usage.empty_completions == 0
    REPLIES["dead"] = ["  \n"]
    dead = QueueEngine("dead", cache=cache)
    [empty] = dead.generate([_request()])
    assert empty.finish_reason == "empty" and dead.usage.empty_completions == 1 and dead.asked == 2
    # nothing empty was stored: the same request against a healthy backend is asked, not answered from cache
    REPLIES["dead"] = ["Rome"]
    [healed] = dead.generate([_request()])
    assert healed.text == "Rome" and not healed.cached and dead.asked == 3
    again = QueueEngine("dead", cache=cache)
    assert again.generate([_request()])[0].cached


def _run(cfg, run_dir):
    pipeline = Pipeline(cfg)
    try:
        metrics = pipeline.run(run_dir)
    finally:
        pipeline.close()
    return metrics, read_jsonl(run_dir / "answers.jsonl")


def test_empty_answers_are_counted_failures_and_generated_again_on_resume(hotpot_data, shared_cache, tmp_path):
    cfg = compose_config([f"paths.cache_dir={shared_cache}", "dataset=hotpotqa", "dataset.limit=2",
                          "retriever.k=5", "rerank.k=2", "logger=none", "generator=simple"])
    cfg.llm = OmegaConf.create({"_target_": f"{__name__}.QueueEngine", "model": "proxy-down"})
    cfg.cache = OmegaConf.merge(cfg.get("cache") or {}, {"llm_responses": True})
    run_dir = tmp_path / "run"
    REPLIES["proxy-down"] = [""]
    metrics, rows = _run(cfg, run_dir)
    assert [r["answer"] for r in rows] == ["", ""] and all(r["failure"] == "empty_answer" for r in rows)
    assert metrics["empty_answers"] == 2 and metrics["llm_empty_completions"] == 2
    assert metrics["answer/f1/all"] == 0.0  # scored as they are: a failure lowers the mean
    # the server is healthy again: the resumed folder generates both answers, none comes from the cache
    REPLIES["proxy-down"] = ["Yes"]
    metrics, rows = _run(cfg, run_dir)
    assert [r["answer"] for r in rows] == ["Yes", "Yes"] and not any("failure" in r for r in rows)
    assert metrics["empty_answers"] == 0
    from rag.folders import RunFolder

    resumed = RunFolder(run_dir).work_history()[-1]  # this execution's own counters (issue 36)
    assert resumed["answered"] == 2 and resumed["llm_cache_hits"] == 0 and resumed["llm_calls"] == 2
