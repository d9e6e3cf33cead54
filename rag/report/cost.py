"""Strategy cost: LLM requests, tokens and seconds per question for each generation strategy.

Two costs, named apart. What a strategy *needs* per question comes from its answers (`steps.llm_calls` of
multi-step strategies, else one request per answer that has a prompt): the same whether the answers were made
now, come from the response cache or were resumed from an earlier run. What producing the answers *measured*
comes from metrics.json (the generator's engine only; judges run afterwards and are not counted): requests are
fresh calls plus response-cache hits, tokens and LLM seconds fresh calls only. metrics.json keeps the work that
produced a folder's answers: a rerun that resumes them records its own (cache hits) in `work_history.jsonl`
(`rag.folders.measured_work`), so rebuilding the report after a rerun gives the same figures.
Generation seconds are the wall time of the generate stage. Work wasted (`wasted/...` in metrics.json: what
executions stopped before finishing did after their last kept answer) is a column of its own, never in the
per-question figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rag.records import AnswerRecord
from rag.report.data import LLMUsage, SweepData, stage_seconds


@dataclass
class StrategyCost:
    strategy: str
    runs: int
    questions: int
    requests: int
    fresh_calls: int
    #: LLM requests the answers needed (from the records, however they were obtained)
    needed_calls: int
    prompt_tokens: int
    completion_tokens: int
    llm_seconds: float
    generate_seconds: float
    #: LLM calls and generate-stage seconds of stopped executions that produced no kept answer
    wasted_calls: int = 0
    wasted_seconds: float = 0.0

    def per_question(self) -> dict[str, Any]:
        q = max(1, self.questions)
        fresh = max(1, self.fresh_calls)
        return {"strategy": self.strategy, "runs": self.runs, "questions": self.questions,
                "llm_requests_needed_per_q": round(self.needed_calls / q, 3),
                "llm_requests_measured_per_q": round(self.requests / q, 3),
                "fresh_calls_per_q": round(self.fresh_calls / q, 3),
                "prompt_tokens_per_call": round(self.prompt_tokens / fresh, 1) if self.fresh_calls else None,
                "completion_tokens_per_call": round(self.completion_tokens / fresh, 1) if self.fresh_calls else None,
                "tokens_per_q": round((self.prompt_tokens + self.completion_tokens) / q, 1),
                "llm_seconds_per_q": round(self.llm_seconds / q, 3),
                "generate_seconds_per_q": round(self.generate_seconds / q, 3),
                "wasted_llm_calls": self.wasted_calls, "wasted_generate_seconds": round(self.wasted_seconds, 3)}


def needed_calls(record: AnswerRecord) -> int:
    """LLM requests one answer needed: its strategy's own count, else one if a prompt was sent."""
    calls = (record.steps or {}).get("llm_calls")
    if isinstance(calls, int) and not isinstance(calls, bool):
        return calls
    return 1 if record.final_prompt else 0


def strategy_costs(sweep: SweepData) -> list[StrategyCost]:
    """Totals per strategy over every run of that strategy, in sweep order."""
    out: dict[str, StrategyCost] = {}
    for run in sweep.runs:
        usage = LLMUsage.from_metrics(run.metrics)
        cost = out.setdefault(run.strategy, StrategyCost(run.strategy, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0))
        cost.needed_calls += sum(needed_calls(r) for r in run.records)
        cost.runs += 1
        cost.questions += run.n_questions
        cost.requests += usage.calls + usage.cache_hits
        cost.fresh_calls += usage.calls
        cost.prompt_tokens += usage.prompt_tokens
        cost.completion_tokens += usage.completion_tokens
        cost.llm_seconds += usage.seconds
        cost.generate_seconds += stage_seconds(run.metrics, "generate") or 0.0
        cost.wasted_calls += int(run.metrics.get("wasted/llm_calls") or 0)
        cost.wasted_seconds += float(run.metrics.get("wasted/time/generate_s") or 0.0)
    return list(out.values())


def plot(costs: list[StrategyCost]):
    """Three bar panels per strategy: LLM requests, tokens (fresh calls) and seconds per question."""
    from matplotlib.figure import Figure

    rows = [c.per_question() for c in costs]
    names = [r["strategy"] for r in rows]
    fig = Figure(figsize=(12, 3.4), layout="constrained")
    axes = fig.subplots(1, 3)
    panels = (("llm_requests_needed_per_q", "LLM requests / question (needed)"),
              ("tokens_per_q", "tokens / question (fresh calls)"),
              ("generate_seconds_per_q", "generation seconds / question"))
    for ax, (key, title) in zip(axes, panels):
        values = [r[key] or 0 for r in rows]
        bars = ax.bar(range(len(names)), values, color="#4575b4")
        ax.bar_label(bars, fmt="%.3g", fontsize=7)
        ax.set_xticks(range(len(names)), names, rotation=20, ha="right", fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Strategy cost per question (generator engine only)", fontsize=10)
    return fig
