"""Judge noise: `judge.repeats=N` judges every answer N times with different seeds and measures the spread.

The same answer judged twice can score differently. With `judge.repeats=N` (N > 1), every LLM judge judges
the run's answers N times: repeat r sends each of the judge's requests with its seed moved by
`r * REPEAT_SEED_STRIDE` (re-asks of unparsable outputs keep their own seed offsets below the stride), at the
temperature of the judge's own config, or at `judge.repeat_temperature` when that is set (a declared sampling
override: a judge at temperature 0 on a local model decodes greedily and repeats itself whatever the seed).
Without an override, repeat 0 is the judge's ordinary verdict; with one, all N repeats are extra draws and the
ordinary verdict stays as the judge's config made it. The response cache keys on every sampling parameter, the
seed included, so each repeat is its own cache entry and a rerun repeats nothing.

A repeat gets the judge's full context (`EvalContext`) with only its files moved: a nugget-based judge (nuggets,
ARGUE, Crucible: `uses_nuggets`) repeats its assignment over the run's one nugget set, the one its ordinary verdict
used, never a set made again per repeat.

Every verdict is stored with the answer, under `record.judges[<judge>]["repeats"]`: one entry per repeat, with
its seed offset, temperature and per-answer values (and, for a nugget-based judge, the `nugget_set` it was scored
against). Per judge and evaluation the run metrics say how well the
judge agrees with itself: `noise/<evaluation>/alpha` (Krippendorff's alpha over answers x repeats, at the level of
measurement of the judge's scale: `Judge.measurement`), `/answer_sd` (mean over answers of the sd of their
verdicts), `/changed` (share of answers whose verdict changed), `/run_mean_sd` (sd over repeats of the run's mean)
and `/repeats`. The sweep summary uses the stored verdicts to say when a cell difference is within the judge's
own noise (`eval.significance`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rag.judge.base import EvalContext, Judge
from rag.judge.nugget_sets import NUGGET_SET
from rag.llm.base import LLMEngine
from rag.llm.reseed import REPEAT_SEED_STRIDE, ReseededEngine
from rag.metrics.stats import answer_spread, self_agreement
from rag.records import AnswerRecord

log = logging.getLogger(__name__)

REPEATS_KEY = "repeats"
STATS = ("alpha", "answer_sd", "changed", "run_mean_sd", "repeats")


def judge_temperature(judge: Judge) -> float | None:
    """The judge's configured sampling temperature, where it declares one (`params.temperature`)."""
    params = getattr(judge, "params", None)
    value = params.get("temperature") if isinstance(params, Mapping) else None
    return float(value) if isinstance(value, (int, float)) else None


def repeat_judge(judge: Judge, records: Sequence[AnswerRecord], engine: LLMEngine, ctx: EvalContext, repeats: int,
                 temperature: float | None = None) -> None:
    """Judge `records` `repeats` times (after the ordinary verdict is stored) and store every verdict with it."""
    if repeats < 2:
        return
    if temperature is None and judge_temperature(judge) == 0.0:
        log.warning("judge %s samples at temperature 0: its %d repeats differ only by seed, and a local model "
                    "decodes greedily and repeats itself; set judge.repeat_temperature to measure its noise",
                    judge.name, repeats)
    stored: list[list[dict[str, Any]]] = [[] for _ in records]
    for r in range(repeats):
        if r == 0 and temperature is None:
            judged = list(records)  # repeat 0 is the ordinary verdict, already there
        else:
            judged = [record.model_copy(deep=True) for record in records]
            # the judge's full context, only its files elsewhere: a nugget-based judge repeats its assignment over
            # the run's one nugget set (`ctx.nuggets`), never a set made again per repeat
            where = dataclasses.replace(ctx, run_dir=ctx.run_dir / "judge_repeats" / judge.name / f"r{r}")
            judge.evaluate(judged, ReseededEngine(engine, r, temperature), where)  # type: ignore[arg-type]
        for i, copy in enumerate(judged):
            result = copy.judges.get(judge.name)
            entry: dict[str, Any] = {"repeat": r, "seed_offset": r * REPEAT_SEED_STRIDE, "temperature": temperature,
                                     "values": judge.answer_values(copy)}
            if isinstance(result, Mapping) and result.get("parse_failed"):
                entry["parse_failed"] = True
            if isinstance(result, Mapping) and result.get(NUGGET_SET):  # the set each repeat was scored against
                entry[NUGGET_SET] = result[NUGGET_SET]
            stored[i].append(entry)
    for record, entries in zip(records, stored):
        if isinstance(record.judges.get(judge.name), dict):
            record.judges[judge.name][REPEATS_KEY] = entries


def verdict_matrix(records: Sequence[AnswerRecord], judge: str, evaluation: str) -> np.ndarray:
    """(repeats x answers) of one evaluation's stored repeated verdicts; NaN where a repeat has no value."""
    columns = []
    for record in records:
        result = record.judges.get(judge)
        entries = result.get(REPEATS_KEY) if isinstance(result, Mapping) else None
        if isinstance(entries, list) and entries:
            columns.append([float((e.get("values") or {}).get(evaluation, math.nan)) for e in entries])
    if not columns:
        return np.empty((0, 0))
    width = max(len(c) for c in columns)
    return np.array([c + [math.nan] * (width - len(c)) for c in columns], dtype=float).T


@dataclasses.dataclass
class Noise:
    """One evaluation's self-agreement over the repeats (the values behind `noise/<evaluation>/<stat>`)."""

    evaluation: str
    level: str
    repeats: int
    alpha: float
    #: why alpha is undefined ("" when it is defined)
    reason: str
    answer_sd: float
    changed: float
    run_mean_sd: float

    def metrics(self) -> dict[str, Any]:
        p = f"noise/{self.evaluation}/"

        def value(x: float) -> float | None:
            return None if math.isnan(x) else x

        return {p + "alpha": value(self.alpha), p + "answer_sd": value(self.answer_sd),
                p + "changed": value(self.changed), p + "run_mean_sd": value(self.run_mean_sd),
                p + "repeats": self.repeats}


def judge_noise(judge: Judge, records: Sequence[AnswerRecord]) -> list[Noise]:
    """Self-agreement of every evaluation the judge's stored repeats hold (see the module docstring)."""
    evaluations = sorted({name for r in records for e in ((r.judges.get(judge.name) or {}).get(REPEATS_KEY) or [])
                          if isinstance(e, Mapping) for name in (e.get("values") or {})})
    out = []
    for evaluation in evaluations:
        matrix = verdict_matrix(records, judge.name, evaluation)
        level, domain = judge.measurement(evaluation)
        alpha, reason = self_agreement(matrix, level, domain)
        spread, changed = answer_spread(matrix)
        complete = matrix[:, ~np.isnan(matrix).any(axis=0)]
        run_means = complete.mean(axis=1) if complete.size else np.array([])
        out.append(Noise(evaluation, level, int(matrix.shape[0]), alpha, reason, spread, changed,
                         float(np.std(run_means, ddof=1)) if len(run_means) >= 2 else math.nan))
    return out


def noise_report(noise: Sequence[Noise]) -> str:
    """The judge-noise section of eval_report.md (empty without repeats)."""
    if not noise:
        return ""

    def num(value: float) -> str:
        return "-" if math.isnan(value) else f"{value:.3f}"

    lines = ["## Judge noise (`judge.repeats`)", "",
             "Every answer judged again with other seeds. alpha: Krippendorff's alpha over answers x repeats at the "
             "scale's level of measurement (1: the judge always repeats itself, 0: no better than chance); answer "
             "sd: mean over answers of the sd of their verdicts; changed: share of answers whose verdict changed; "
             "run mean sd: sd over repeats of the run's mean.", "",
             "| evaluation | repeats | level | alpha | answer sd | changed | run mean sd |",
             "|---|---|---|---|---|---|---|"]
    for n in noise:
        alpha = num(n.alpha) if not n.reason else f"- ({n.reason})"
        lines.append(f"| {n.evaluation} | {n.repeats} | {n.level} | {alpha} | {num(n.answer_sd)} | "
                     f"{num(n.changed)} | {num(n.run_mean_sd)} |")
    return "\n".join(lines) + "\n"
