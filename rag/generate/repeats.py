"""Generation consistency: `generation.repeats=N` draws every answer N times and measures how much it moves.

The same question asked twice can get another answer, and another F1. With `generation.repeats=N` (N > 1), once a
run has its answers, the generator answers every question again N - 1 times: repeat r sends each request with its
seed moved by `r * REPEAT_SEED_STRIDE` and, where `generation.repeat_temperature` is set, at that temperature (a
local model at temperature 0 decodes greedily and repeats itself whatever the seed), as `judge.repeats` does for
judges (rag/judge/repeats.py, `ReseededEngine`). The ranked lists are the run's own (served from its stage cache),
so only generation varies. Repeat 0 is the folder's own answers; repeats 1..N-1 are journalled in
`generation_repeats/temperature=<t>/r<r>.jsonl` as they are made (keyed by the temperature: another one draws anew), so a killed run resumes them, and the response cache keys on the
seed, so a rerun draws nothing again.

Per per-answer score (F1, EM, the no-answer flag, ...) the run metrics say how stable the generation is:
`consistency/<score>/answer_sd` (mean over questions of the sd of their scores across repeats),
`/changed` (share of questions whose score changed), `/run_mean_sd` (sd over repeats of the run's mean) and
`/run_mean_cv` (that sd over the mean of the run means: the coefficient of variation); `consistency/answer_changed`
is the share of questions whose answer text (SQuAD-normalised) changed in any repeat, and `consistency/repeats` N.
The repeats' own LLM work is `consistency/llm_calls`, `.../prompt_tokens`, `.../completion_tokens`, apart from the
run's (its cost per answer stays the cost of its answers), kept in `generation_repeats/usage.json` as they are
drawn. A judged run judges every draw as it judged its own answers (`judge.repeats` and the report left out), so
every judge's per-answer values get the same figures (`consistency/judge/liverag/correctness/answer_sd`,
`consistency/nuggets/vital_strict/changed`, ...) beside the judges' own noise of `judge.repeats`
(`noise/...`); their work is `consistency/eval/<counter>`.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag.core.io import JsonlJournal, atomic_write_json
from rag.llm.reseed import REPEAT_SEED_STRIDE, ReseededEngine
from rag.metrics.qa import normalize_answer
from rag.metrics.stats import answer_spread
from rag.records import AnswerRecord, Question, is_number

log = logging.getLogger(__name__)

FOLDER = "generation_repeats"
USAGE = ("llm_calls", "prompt_tokens", "completion_tokens")
#: the judges' work on the draws, summed over them (`consistency/eval/<counter>`)
JUDGE_USAGE = ("llm_calls", "llm_cache_hits", "prompt_tokens", "completion_tokens")


def draws_dir(run_dir: Path, temperature: float | None) -> Path:
    """Where the extra draws at one temperature live: keyed by it, so a rerun at another temperature (not part of the
    folder's fingerprint) draws its own instead of reading these."""
    return run_dir / FOLDER / f"temperature={'llm' if temperature is None else f'{float(temperature):g}'}"


def repeat_journal(run_dir: Path, repeat: int, temperature: float | None = None) -> JsonlJournal:
    return JsonlJournal(draws_dir(run_dir, temperature) / f"r{repeat}.jsonl")


def draw_repeats(questions: Sequence[Question], run_dir: Path, repeats: int, chunk: int,
                 answer: Callable[[list[Question]], list[AnswerRecord]],
                 reseed: Callable[[ReseededEngine | None], None], engine: Any,
                 temperature: float | None) -> list[list[AnswerRecord]]:
    """Answers of repeats 1..N-1 (each a list in `questions`' order): journalled ones kept, the rest drawn with the
    reseeded engine, which `reseed` puts in place of the generator's (None puts the generator's own back). The LLM
    work of every chunk drawn is added to `generation_repeats/usage.json` with it, so the repeats' work is counted
    once, by whichever execution drew them."""
    drawn = []
    for r in range(1, repeats):
        journal = repeat_journal(run_dir, r, temperature)
        done = {row["id"]: AnswerRecord.from_json(row) for row in journal.read()}
        todo = [q for q in questions if q.id not in done]
        if todo:
            log.info("generation repeat %d of %d: %d answers to draw (seed + %d%s)", r, repeats - 1, len(todo),
                     r * REPEAT_SEED_STRIDE, "" if temperature is None else f", temperature {temperature}")
            reseed(ReseededEngine(engine, r, temperature))
            try:
                for offset in range(0, len(todo), chunk):
                    before = engine.usage.metrics()
                    rows = answer(todo[offset: offset + chunk])
                    journal.append([row.to_json() for row in rows])
                    add_usage(draws_dir(run_dir, temperature), before, engine.usage.metrics())
                    done.update({row.id: row for row in rows})
            finally:
                reseed(None)
        drawn.append([done[q.id] for q in questions])
    return drawn


def add_usage(draws: Path, before: dict[str, Any], after: dict[str, Any]) -> None:
    path = draws / "usage.json"
    total = repeats_usage(draws)
    atomic_write_json(path, {k: total.get(k, 0) + (after.get(k) or 0) - (before.get(k) or 0) for k in USAGE})


def repeats_usage(draws: Path) -> dict[str, Any]:
    """The LLM work every repeat drawn into `draws` cost, as `consistency/<counter>` figures use it."""
    path = draws / "usage.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {k: 0 for k in USAGE}


def consistency_metrics(runs: Sequence[Sequence[AnswerRecord]]) -> dict[str, Any]:
    """`consistency/...` over the repeats (`runs[0]`: the folder's own answers), see the module docstring."""
    out: dict[str, Any] = {"consistency/repeats": len(runs)}
    if len(runs) < 2:
        return out
    values = [[answer_values(r) for r in run] for run in runs]
    keys = sorted({k for run in values for v in run for k in v})
    for key in keys:
        matrix = np.array([[float(v.get(key, math.nan)) for v in run] for run in values], dtype=float)
        spread, changed = answer_spread(matrix)
        complete = matrix[:, ~np.isnan(matrix).any(axis=0)]
        means = complete.mean(axis=1) if complete.size else np.array([])
        sd = float(np.std(means, ddof=1)) if len(means) >= 2 else math.nan
        mean = float(np.mean(means)) if len(means) else math.nan
        for stat, value in (("answer_sd", spread), ("changed", changed), ("run_mean_sd", sd),
                            ("run_mean_cv", sd / mean if mean else math.nan)):
            if not math.isnan(value):
                out[f"consistency/{key}/{stat}"] = round(value, 6)
    texts = [[normalize_answer(r.answer) for r in run] for run in runs]
    out["consistency/answer_changed"] = float(np.mean([len({run[i] for run in texts}) > 1
                                                       for i in range(len(texts[0]))])) if texts[0] else 0.0
    return out


def answer_values(record: AnswerRecord) -> dict[str, float]:
    """One answer's per-answer figures: its scores by name (`f1`, `no_answer`) and, where judged, every judge's
    values by evaluation name (`judge/liverag/correctness`, `nuggets/vital_strict`; `AnswerRecord.judge_values`)."""
    scores = {k: float(v) for k, v in record.scores.items() if is_number(v)}
    return {**scores, **record.judge_values()}


def usage_metrics(run_dir: Path, temperature: float | None) -> dict[str, Any]:
    """The repeats' own LLM work, apart from the run's: `consistency/llm_calls`, ..."""
    return {f"consistency/{k}": v for k, v in repeats_usage(draws_dir(run_dir, temperature)).items() if k in USAGE}


def generation_consistency(questions: Sequence[Question], records: list[AnswerRecord], run_dir: Path,
                           generation: Any, answer: Callable[[list[Question]], list[AnswerRecord]],
                           reseed: Callable[[ReseededEngine | None], None], engine: Any,
                           rescore: Callable[[list[AnswerRecord]], None],
                           judge: Callable[[list[AnswerRecord], Path], dict[str, Any]] | None = None
                           ) -> dict[str, Any]:
    """`generation.repeats`: the extra draws (`draw_repeats`), each scored again by the record metrics (`rescore`)
    and, with `judge` (the run's judges, as `rag.judge.run.evaluate_records` runs them), judged like the run's own
    answers; the `consistency/...` figures over them and the run's own `records`, with the draws' LLM work (the
    judges' as `consistency/eval/<counter>`). Each draw is judged into its own folder,
    `generation_repeats/temperature=<t>/r<r>/` (the judges' files: nuggets/, argue/), never the run's; the draws'
    judgments are not kept in their records: a rerun asks the judges again, through the response cache."""
    temperature = None if generation.get("repeat_temperature") is None else float(generation.repeat_temperature)
    drawn = draw_repeats(questions, run_dir, int(generation.repeats), max(1, int(generation.chunk_size)), answer,
                         reseed, engine, temperature)
    judged: dict[str, Any] = {}
    for r, run in enumerate(drawn, start=1):
        rescore(run)
        if judge is not None:
            for key, value in judge(run, draws_dir(run_dir, temperature) / f"r{r}").items():
                if key.startswith("eval/") and key.removeprefix("eval/") in JUDGE_USAGE:
                    judged[f"consistency/{key}"] = judged.get(f"consistency/{key}", 0) + value
    return {**consistency_metrics([records, *drawn]), **usage_metrics(run_dir, temperature), **judged}
