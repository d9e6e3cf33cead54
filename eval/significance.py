"""Which differences between a sweep's cells are real: paired tests on every per-question score the cells share.

For each per-question evaluation with a quality direction (token F1 and EM, gold recall@k, every judge's
per-answer values, nugget, ARGUE and Crucible scores) and each split (all, single-hop, multi-hop), every compared
pair of complete cells is tested over the questions both answered (`rag.metrics.stats.paired_comparison`: the
paired randomization test of the mean difference, two-sided and seeded; a percentile bootstrap 95% interval of
the difference; the paired Cohen's d_z). Nugget-based scores are compared only over questions scored against
the same nugget set in both cells (`comparable_questions`).

Which pairs: cells that answered the same questions (a sweep over several datasets is tested within each of its
question sets, `rag.sweep.question_sets`, and each set has its own best and tied group), then `compare=all_pairs`
(every pair of cells) or `compare=baseline` (the baseline cell, named by its
overrides, against each other cell). The correction (Holm-Bonferroni by default, Benjamini-Hochberg as an
option) runs over one family per metric: every compared pair in every split, corrected together.

What it gives the summary: `significance.csv` (one row per comparison), `significance.json` (settings, the
marks, the smallest visible difference per metric), the "statistically tied with the best" group of every
column (the best cell and every cell whose difference from it is not significant after correction), and the
minimum detectable difference (MDD) per metric and split at the sweep's n with the observed paired variance, both
for one comparison alone (alpha) and at the family-wise level the marks are corrected to (alpha / m, m the
comparisons of the metric's family: Bonferroni's level, the threshold of Holm's first and most stringent step).

No marks where none can be read as a test: a column the sweep's comparability gate does not let rank (cells that
scored some topic against different nugget sets, `rag.judge.nugget_sets.NuggetSetGate`) gets its one-line notice
in `not_ranked` instead of a best and a tied group, and a column in which no comparison has a p-value (no shared
question left) is `not_tested`; where only some cells could not be tested against the best, they are listed as
`untested`, never counted as significantly worse.
Where the cells' judges were repeated (`judge.repeats`), a comparison also says how far re-judging alone would
move the difference (`judge_noise_sd`) and whether the difference is within that noise.

    python -m eval.summary SWEEP_DIR --compare baseline --baseline generator=simple --correction bh
"""

from __future__ import annotations

import csv
import io
import itertools
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rag.core.errors import ConfigError
from rag.core.io import atomic_write_json, atomic_write_text
from rag.judge.nugget_sets import NuggetSetGate, cell_sets, nugget_set_for, same_nugget_set_topics
from rag.metrics.marks import mark_of
from rag.metrics.registry import REGISTRY
from rag.metrics.stats import (
    CORRECTIONS,
    PairedComparison,
    adjust_pvalues,
    min_detectable_difference,
    paired_comparison,
)
from rag.records import AnswerRecord
from rag.sweep.cells import Cell, SweepFolder, split_override
from rag.sweep.gate import within_question_set
from rag.sweep.question_sets import question_sets as find_question_sets

log = logging.getLogger(__name__)

COMPARE = ("all_pairs", "baseline")
SPLITS = ("all", "single", "multi")
#: evaluations scored against nuggets: comparable only where both answers were scored with the same nugget set
#: the normal quantile used to call a difference "within judge noise" (a 95% range of re-judging alone)
JUDGE_NOISE_Z = 1.959964
CSV_FILE, JSON_FILE = "significance.csv", "significance.json"


@dataclass(frozen=True)
class Settings:
    """How the sweep's cells are compared (`hydra.callbacks.sweep_summary.significance`, `python -m
    eval.summary --compare ...`)."""

    compare: str = "all_pairs"
    #: the baseline cell's overrides (`generator=simple`, several for a cell of a larger grid)
    baseline: tuple[str, ...] = ()
    correction: str = "holm"
    alpha: float = 0.05
    power: float = 0.8
    permutations: int = 10000
    bootstrap: int = 2000
    seed: int = 0

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> Settings:
        values = dict(values or {})
        unknown = sorted(set(values) - set(cls.__dataclass_fields__))
        if unknown:
            raise ConfigError(f"significance.{unknown[0]}: unknown setting (known: "
                              f"{', '.join(cls.__dataclass_fields__)})")
        baseline = values.get("baseline") or ()
        values["baseline"] = (baseline,) if isinstance(baseline, str) else tuple(str(b) for b in baseline)
        settings = cls(**values)
        if settings.compare not in COMPARE:
            raise ConfigError(f"significance.compare={settings.compare!r}: expected one of {', '.join(COMPARE)}")
        if settings.correction not in CORRECTIONS:
            raise ConfigError(f"significance.correction={settings.correction!r}: expected one of "
                              f"{', '.join(CORRECTIONS)}")
        if settings.compare == "baseline" and not settings.baseline:
            raise ConfigError("significance.compare=baseline needs significance.baseline: the baseline cell's "
                              "overrides, e.g. generator=simple")
        return settings


# -- per-question scores of a cell ----------------------------------------------------------------------------
@dataclass
class CellScores:
    """One complete cell's per-question scores, by metric name (the run metric without its split)."""

    name: str
    label: str
    hops: dict[str, str] = field(default_factory=dict)
    #: metric -> question id -> value
    values: dict[str, dict[str, float]] = field(default_factory=dict)
    #: the cell's nugget sets: judge metric prefix -> topic (question id) -> set identity
    #: (`rag.judge.nugget_sets`: from metrics.json, else from the answers' own `nugget_set`)
    nugget_sets: dict[str, dict[str, str]] = field(default_factory=dict)
    #: metric -> question id -> the repeated verdicts (`judge.repeats`), NaN where a repeat failed
    repeats: dict[str, dict[str, list[float]]] = field(default_factory=dict)


def score_metric_names(cell: Cell) -> dict[str, str]:
    """`record.scores` key -> the run metric it averages into in this cell (`f1` -> `answer/f1`,
    `recall_rerank` -> `recall/rerank@5` at the cell's rerank.k), from the cell's own metric config."""
    from rag.metrics.base import AnswerMetric, RunShape, build_metrics
    from rag.metrics.qa import ExactMatch, TokenF1
    from rag.metrics.retrieval import GoldRecall

    folder = cell.run
    k_retrieval = int(folder.setting("retriever.k") or 0)
    shape = RunShape(k_retrieval=k_retrieval, k_rerank=int(folder.setting("rerank.k") or k_retrieval))
    config = folder.setting("metrics")
    metrics: list[AnswerMetric] = [TokenF1(), ExactMatch(), GoldRecall()]  # runs saved before metrics were a list
    if config is not None:
        try:
            metrics = build_metrics(config)
        except Exception as err:  # noqa: BLE001 - a foreign config: the cutoff scores still name themselves
            log.warning("%s: metrics config not buildable (%s); only recall@cutoff scores are named", cell.name, err)
            metrics = []
    if not k_retrieval:  # no saved config: a depth-dependent name would be a guess
        metrics = [m for m in metrics if not isinstance(m, GoldRecall)]
    return {key: name for metric in metrics for key, name in metric.run_metrics(shape).items()}


def _score_name(key: str, names: Mapping[str, str]) -> str | None:
    from rag.metrics.retrieval import _CUTOFF_SCORE

    if key in names:
        return names[key]
    match = _CUTOFF_SCORE.match(key)
    return f"recall/{match['stage']}@{match['k']}{match['kind'] or ''}" if match else None


def comparable_questions(metric: str, shared: list[str], a: CellScores, b: CellScores) -> list[str]:
    """The questions on which two cells' values of `metric` were measured with the same ruler: for a nugget-based
    metric (one whose judge recorded nugget sets), only the topics both scored against the same set
    (`rag.judge.nugget_sets.same_nugget_set_topics`, the one rule of the summary, the report and the agreement);
    every other metric, all of them."""
    set_a, set_b = nugget_set_for(metric, a.nugget_sets), nugget_set_for(metric, b.nugget_sets)
    if set_a is None and set_b is None:
        return shared
    same = set(same_nugget_set_topics(set_a or {}, set_b or {}))
    return [q for q in shared if q in same]


def repeated_verdicts(record: AnswerRecord) -> dict[str, list[float]]:
    """Evaluation -> the verdicts of `judge.repeats` (`rag.judge.repeats`), NaN for a failed repeat."""
    out: dict[str, list[float]] = {}
    for result in record.judges.values():
        repeats = result.get("repeats") if isinstance(result, Mapping) else None
        if not isinstance(repeats, list):
            continue
        names = sorted({k for r in repeats if isinstance(r, Mapping) for k in (r.get("values") or {})})
        for name in names:
            out[name] = [float((r.get("values") or {}).get(name, math.nan)) if isinstance(r, Mapping) else math.nan
                         for r in repeats]
    return out


def load_cell(cell: Cell, label: str) -> CellScores:
    names = score_metric_names(cell)
    out = CellScores(name=cell.name, label=label)
    records = cell.run.records()
    out.nugget_sets = cell_sets(cell.metrics, lambda: records)
    for record in records:
        qid = record.id
        out.hops[qid] = record.hop or ""
        for key, value in record.scores.items():
            metric = _score_name(key, names)
            if metric is not None:
                out.values.setdefault(metric, {})[qid] = float(value)
        for evaluation, value in record.judge_values().items():
            out.values.setdefault(evaluation, {})[qid] = float(value)
        for evaluation, verdicts in repeated_verdicts(record).items():
            out.repeats.setdefault(evaluation, {})[qid] = verdicts
    return out


def tested_metric(metric: str) -> bool:
    """A per-answer quality metric (the registry's per_answer kind with a direction) is tested."""
    column = f"{metric}/all"
    return REGISTRY.kind(column) == "per_answer" and REGISTRY.direction(column) != 0


# -- comparisons ----------------------------------------------------------------------------------------------
@dataclass
class Comparison:
    a: str
    b: str
    metric: str
    split: str
    result: PairedComparison
    #: shared questions left out because the two answers were scored against different nugget sets
    dropped_nugget_set: int = 0
    p_adjusted: float = math.nan
    family_size: int = 0
    #: sd of the difference that re-judging alone produces (`judge.repeats`), NaN without repeats
    judge_noise_sd: float = math.nan

    @property
    def column(self) -> str:
        return f"{self.metric}/{self.split}"

    def significant(self, alpha: float) -> bool:
        return not math.isnan(self.p_adjusted) and self.p_adjusted < alpha

    @property
    def within_judge_noise(self) -> bool | None:
        if math.isnan(self.judge_noise_sd):
            return None
        return abs(self.result.difference) < JUDGE_NOISE_Z * self.judge_noise_sd


def judge_noise_sd(a: CellScores, b: CellScores, metric: str, questions: Sequence[str]) -> float:
    """The sd of the difference of the two cells' means that re-judging alone would produce: per answer the
    variance of its repeated verdicts (ddof 1), summed over both cells and divided by n^2. NaN unless both cells
    have at least two verdicts for every question."""
    variances = []
    for cell in (a, b):
        per_question = cell.repeats.get(metric, {})
        for qid in questions:
            verdicts = [v for v in per_question.get(qid, []) if not math.isnan(v)]
            if len(verdicts) < 2:
                return math.nan
            variances.append(float(np.var(verdicts, ddof=1)))
    n = len(questions)
    return math.sqrt(sum(variances)) / n if n else math.nan


def compare_pair(a: CellScores, b: CellScores, metric: str, split: str, settings: Settings) -> Comparison | None:
    """One pair on one metric and split, over the questions both answered (same ruler); None when neither
    cell has the metric in that split."""
    va, vb = a.values.get(metric, {}), b.values.get(metric, {})
    shared = [q for q in va if q in vb and (split == "all" or a.hops.get(q) == split)]
    if not shared:
        return None
    questions = comparable_questions(metric, shared, a, b)
    result = paired_comparison([va[q] for q in questions], [vb[q] for q in questions],
                               permutations=settings.permutations, bootstrap=settings.bootstrap, seed=settings.seed,
                               alpha=settings.alpha, power=settings.power)
    return Comparison(a.name, b.name, metric, split, result, dropped_nugget_set=len(shared) - len(questions),
                      judge_noise_sd=judge_noise_sd(a, b, metric, questions))


def baseline_cell(cells: Sequence[Cell], overrides: Sequence[str]) -> Cell:
    """The one cell whose overrides include every `key=value` of `overrides`; a ConfigError naming the setting
    and the cells otherwise."""
    wanted = dict(split_override(o) for o in overrides)
    matches = [c for c in cells if all(c.values.get(k) == v for k, v in wanted.items())]
    if len(matches) != 1:
        listing = "; ".join(" ".join(c.overrides) for c in cells)
        what = "no complete cell" if not matches else f"{len(matches)} cells"
        raise ConfigError(f"significance.baseline={' '.join(overrides)}: {what} of the sweep match "
                          f"(complete cells: {listing})")
    return matches[0]


@dataclass
class Significance:
    """Every comparison of a sweep, the marks they give each column, and the smallest visible differences."""

    settings: Settings
    cells: list[CellScores]
    comparisons: list[Comparison]
    baseline: str | None = None
    #: column (metric/split) -> {"best": [...], "tied": [...], and "untested": [...] when some cell could not be
    #: tested against the best} (all_pairs) or {"baseline", "better": [...], "worse": [...]} (baseline)
    marks: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    #: column -> {"n", "sd_difference", "pairs", "alike", "alpha", "mdd", "family_size", "alpha_familywise",
    #: "mdd_familywise", "familywise_level"}
    mdd: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the comparability gate (the summary's, else one over these cells): which columns may be marked at all
    gate: NuggetSetGate = field(default_factory=lambda: NuggetSetGate({}))
    #: cell -> its question set's label (all "" for one set): marks are given within each set
    question_sets: dict[str, str] = field(default_factory=dict)
    #: column -> the gate's notice: no marks (cells scored some topic against different nugget sets)
    not_ranked: dict[str, str] = field(default_factory=dict)
    #: column -> why no marks although rankable: no comparison of the column had a p-value
    not_tested: dict[str, str] = field(default_factory=dict)

    @property
    def columns(self) -> list[str]:
        return list(dict.fromkeys(c.column for c in self.comparisons))

    def label(self, cell: str) -> str:
        return next((c.label for c in self.cells if c.name == cell), cell)


def compare_cells(sweep: SweepFolder, settings: Settings, best: Mapping[str, Sequence[str]] | None = None,
                  swept: Sequence[str] = (), gate: NuggetSetGate | None = None,
                  question_sets: Mapping[str, str] | None = None) -> Significance:
    """Test the sweep's complete cells (see the module docstring). `best`: column -> the best cells as the
    summary ranks them (its metrics.json values; one or more per question set); without it the best is the
    highest (or lowest) mean of the per-question scores within each set. `gate`: the summary's comparability
    gate (its notices name cells as summary.md does); without it, one over the tested cells' own nugget sets.
    `question_sets`: the summary's (`rag.sweep.question_sets`); without it, computed here."""
    cells = [c for c in sweep.cells if c.complete and c.run.has_answers]
    sets = dict(question_sets) if question_sets is not None else find_question_sets(cells)
    scores = [load_cell(c, " ".join(f"{k}={c.values.get(k, '')}" for k in swept) or c.name) for c in cells]
    by_name = {s.name: s for s in scores}
    baseline = None
    if settings.compare == "baseline":
        baseline = baseline_cell(cells, settings.baseline).name
        pairs = [(baseline, s.name) for s in scores if s.name != baseline]
    else:
        pairs = [(a.name, b.name) for a, b in itertools.combinations(scores, 2)]
    pairs = [(a, b) for a, b in pairs if sets.get(a, "") == sets.get(b, "")]  # no shared question across sets
    metrics = sorted({m for s in scores for m in s.values if tested_metric(m)})
    comparisons: list[Comparison] = []
    for metric in metrics:
        family = [c for a, b in pairs for split in SPLITS
                  if (c := compare_pair(by_name[a], by_name[b], metric, split, settings)) is not None]
        for comparison, adjusted in zip(family, adjust_pvalues([c.result.p_value for c in family],
                                                               settings.correction)):
            comparison.p_adjusted = adjusted
            comparison.family_size = sum(not math.isnan(c.result.p_value) for c in family)
        comparisons += family
    out = Significance(settings, scores, comparisons, baseline,
                       gate=gate or NuggetSetGate({s.name: within_question_set(s.nugget_sets, sets.get(s.name, ""))
                                                   for s in scores}, {s.name: s.label for s in scores}),
                       question_sets=sets)
    out.not_ranked = {c: out.gate.notice(c) or "" for c in out.columns if not out.gate.rankable(c)}
    out.not_tested = {c: "no comparison of the column has a p-value (no shared question to test)"
                      for c in out.columns if c not in out.not_ranked
                      and not any(_tested(x) for x in comparisons if x.column == c)}
    out.marks = marks(out, best or {})
    out.mdd = smallest_differences(out)
    return out


def _mean(cell: CellScores, metric: str, split: str) -> float:
    values = [v for q, v in cell.values.get(metric, {}).items() if split == "all" or cell.hops.get(q) == split]
    return float(np.mean(values)) if values else math.nan


def _tested(comparison: Comparison) -> bool:
    """A comparison with a p-value (NaN: no question left to test, e.g. every one scored with another set)."""
    return not math.isnan(comparison.result.p_value)


def marks(sig: Significance, best: Mapping[str, Sequence[str]]) -> dict[str, dict[str, list[str]]]:
    """Per column: the best cells and the cells statistically tied with them (all_pairs), or the cells
    significantly better / worse than the baseline (baseline). No entry for a column in `sig.not_ranked` (the
    gate's notice stands instead) or `sig.not_tested`; a cell whose comparison with the best has no p-value is
    `untested`, neither tied nor worse."""
    alpha = sig.settings.alpha
    out: dict[str, dict[str, list[str]]] = {}
    for column in sig.columns:
        if column in sig.not_ranked or column in sig.not_tested:
            continue
        found = [c for c in sig.comparisons if c.column == column]
        metric, split = found[0].metric, found[0].split
        direction = REGISTRY.direction(column)
        if sig.baseline is not None:
            better = [c.b for c in found if c.significant(alpha) and direction * c.result.difference < 0]
            worse = [c.b for c in found if c.significant(alpha) and direction * c.result.difference > 0]
            out[column] = {"baseline": [sig.baseline], "better": better, "worse": worse}
            continue
        all_leaders, tied, untested = [], [], []
        for label in dict.fromkeys(sig.question_sets.get(c.name, "") for c in sig.cells):
            members = [c for c in sig.cells if sig.question_sets.get(c.name, "") == label]
            leaders = [name for name in best.get(column) or [] if name in {c.name for c in members}]
            if not leaders:
                means = {c.name: _mean(c, metric, split) for c in members}
                means = {k: v for k, v in means.items() if not math.isnan(v)}
                if not means:
                    continue
                top = (max if direction > 0 else min)(means.values())
                leaders = [k for k, v in means.items() if v == top]
            all_leaders += leaders
            for cell in members:
                if cell.name in leaders or math.isnan(_mean(cell, metric, split)):  # no value in this column
                    continue
                against = [c for c in found if {c.a, c.b} == {cell.name, leaders[0]}]
                if not against or not _tested(against[0]):
                    untested.append(cell.name)
                elif not against[0].significant(alpha):
                    tied.append(cell.name)
        if all_leaders:
            out[column] = {"best": all_leaders, "tied": tied, **({"untested": untested} if untested else {})}
    return out


#: how significance.json and summary.md name the family-wise level of the MDD
FAMILYWISE_LEVEL = "alpha / m (Bonferroni; the threshold of Holm's first, most stringent step), m = family_size"


def smallest_differences(sig: Significance) -> dict[str, dict[str, Any]]:
    """Per column: the MDD at the median n of its comparisons with the pooled sd of their paired differences
    (root mean square of the pairs' sds), at the settings' power (`min_detectable_difference`), at two levels:
    `mdd` at alpha (one comparison alone, before correction) and `mdd_familywise` at alpha / m, m the
    comparisons with a p-value in the metric's family (every compared pair and split): the level the marks are
    corrected to, since Holm compares the smallest p-value with alpha / m (BH too). Pairs that score every question
    alike (sd 0) are left out of the pool; a column of only such pairs has no MDD."""
    out: dict[str, dict[str, Any]] = {}
    alpha, power = sig.settings.alpha, sig.settings.power
    for column in sig.columns:
        found = [c.result for c in sig.comparisons if c.column == column and c.result.n >= 2
                 and not math.isnan(c.result.sd_difference)]
        varying = [r for r in found if r.sd_difference > 0]
        if not found:
            continue
        pool = varying or found
        n = int(np.median([r.n for r in pool]))
        sd = float(np.sqrt(np.mean([r.sd_difference ** 2 for r in pool])))
        family = max([c.family_size for c in sig.comparisons if c.column == column] or [1]) or 1
        out[column] = {"n": n, "sd_difference": sd, "pairs": len(varying), "alike": len(found) - len(varying),
                       "alpha": alpha, "mdd": min_detectable_difference(sd, n, alpha, power),
                       "family_size": family, "alpha_familywise": alpha / family,
                       "mdd_familywise": min_detectable_difference(sd, n, alpha / family, power),
                       "familywise_level": FAMILYWISE_LEVEL}
    return out


# -- output ---------------------------------------------------------------------------------------------------
COLUMNS = ["cell_a", "cell_b", "label_a", "label_b", "metric", "split", "n", "mean_a", "mean_b", "difference",
           "ci_low", "ci_high", "ci_note", "p", "p_adjusted", "significant", "correction", "family_size", "test",
           "effect_size_dz", "sd_difference", "mdd", "dropped_other_nugget_set", "judge_noise_sd",
           "within_judge_noise"]


def _num(value: float) -> float | str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else round(float(value), 6)


def rows(sig: Significance) -> list[dict[str, Any]]:
    out = []
    for c in sig.comparisons:
        r = c.result
        noise = c.within_judge_noise
        out.append({"cell_a": c.a, "cell_b": c.b, "label_a": sig.label(c.a), "label_b": sig.label(c.b),
                    "metric": c.metric, "split": c.split, "n": r.n, "mean_a": _num(r.mean_a),
                    "mean_b": _num(r.mean_b), "difference": _num(r.difference), "ci_low": _num(r.interval.low),
                    "ci_high": _num(r.interval.high), "ci_note": r.interval.reason or r.reason,
                    "p": _num(r.p_value), "p_adjusted": _num(c.p_adjusted),
                    "significant": c.significant(sig.settings.alpha), "correction": sig.settings.correction,
                    "family_size": c.family_size, "test": r.test, "effect_size_dz": _num(r.effect_size),
                    "sd_difference": _num(r.sd_difference), "mdd": _num(r.mdd),
                    "dropped_other_nugget_set": c.dropped_nugget_set, "judge_noise_sd": _num(c.judge_noise_sd),
                    "within_judge_noise": "" if noise is None else noise})
    return out


def to_csv(sig: Significance) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows(sig))
    return buffer.getvalue()


def to_json(sig: Significance) -> dict[str, Any]:
    s = sig.settings
    return {"settings": {"compare": s.compare, "baseline": list(s.baseline), "correction": s.correction,
                         "alpha": s.alpha, "power": s.power, "permutations": s.permutations,
                         "bootstrap": s.bootstrap, "seed": s.seed},
            "baseline": sig.baseline, "cells": {c.name: c.label for c in sig.cells}, "marks": sig.marks,
            "not_ranked": sig.not_ranked, "not_tested": sig.not_tested, "mdd": sig.mdd,
            "n_comparisons": len(sig.comparisons)}


def write(sig: Significance, folder: Path) -> dict[str, Path]:
    files = {"significance_csv": folder / CSV_FILE, "significance_json": folder / JSON_FILE}
    atomic_write_text(files["significance_csv"], to_csv(sig))
    atomic_write_json(files["significance_json"], to_json(sig))
    return files


def _fmt(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.3g}"


def caption(sig: Significance) -> str:
    """What the marks in summary.md mean (one paragraph)."""
    s = sig.settings
    correction = {"holm": "Holm-Bonferroni", "bh": "Benjamini-Hochberg"}[s.correction]
    test = (f"paired randomization test of the mean difference over the questions both cells answered "
            f"(two-sided, {s.permutations} resamples or exact, seed {s.seed}), {correction}-corrected per metric over "
            f"every compared pair and split, alpha {s.alpha}; `significance.csv` has every comparison")
    if sig.baseline is not None:
        return (f"Tested columns: ▲ significantly better, ▼ significantly worse than the baseline "
                f"({sig.label(sig.baseline)}; {test}). No bold: the best of a column is only compared with the "
                f"baseline (`compare=all_pairs` marks the cells tied with the best).")
    return (f"Tested columns (per-answer quality metrics): **bold** marks the best value and every value not "
            f"significantly different from it, the group statistically tied with the best ({test}); a lone bold "
            f"is significantly better than every other cell it was tested against. Other columns: the best value "
            f"in bold, not tested; no mark where cells used different nugget sets.")


def mark(sig: Significance | None, column: str, cell: str) -> str | None:
    """How summary.md marks `cell` in `column`: a mark of `rag.metrics.marks` ("best", "tied", "better",
    "worse"), "" (tested and unmarked; or no mark at all: not ranked by the gate, or no comparison had a p-value),
    or None when the column was not tested (the summary's own best-value rule applies: cost, time)."""
    if sig is not None and (column in sig.not_ranked or column in sig.not_tested):
        return ""
    if sig is None or column not in sig.marks:
        return None
    return mark_of(sig.marks[column], cell) or ""


def markdown(sig: Significance) -> str:
    """The section under the summary's tables: the tied groups and the smallest visible differences."""
    lines = ["## Which differences are real", "", caption(sig), ""]
    if sig.baseline is None and sig.marks:
        alike, table = [], []
        for column, group in sig.marks.items():
            if not column.endswith("/all"):
                continue
            if len(group["best"]) + len(group["tied"]) == len(sig.cells):
                alike.append(column.removesuffix("/all"))
                continue
            untested = group.get("untested") or []
            tied = ", ".join(sig.label(c) for c in group["tied"]) or (
                "none" if untested else "none: significantly better than every other cell")
            if untested:
                tied += f"; not tested against {', '.join(sig.label(c) for c in untested)} (no p-value)"
            table.append(f"| {column} | {', '.join(sig.label(c) for c in group['best'])} | {tied} |")
        if table:
            lines += ["| column | best | statistically tied with the best |", "|---|---|---|", *table, ""]
        if alike:
            lines += [f"Every cell statistically tied with the best (no difference the tests can tell): "
                      f"{', '.join(alike)}.", ""]
        lines += ["Single- and multi-hop columns are tested too (`significance.csv`, `significance.json`).", ""]
    unmarked = [f"- {notice}" for column, notice in sig.not_ranked.items() if column.endswith("/all")]
    unmarked += [f"- {column}: not tested; {why}" for column, why in sig.not_tested.items() if column.endswith("/all")]
    if unmarked:
        lines += ["No best and no tied group (`not_ranked` / `not_tested` in significance.json):", "", *unmarked, ""]
    noisy = [c for c in sig.comparisons if c.within_judge_noise and c.split == "all"]
    if noisy:
        lines += [f"Within the judges' own noise ({len(noisy)} comparisons, split all): the difference is smaller "
                  f"than {JUDGE_NOISE_Z:.2f} x the sd that re-judging alone gives it (`judge.repeats`; "
                  f"`within_judge_noise` in significance.csv): "
                  + "; ".join(f"{c.metric} {sig.label(c.a)} vs {sig.label(c.b)}" for c in noisy[:8])
                  + (" ..." if len(noisy) > 8 else ""), ""]
    if sig.mdd:
        s = sig.settings
        lines += ["### The smallest difference this sweep can see", "",
                  f"Minimum detectable difference: the mean paired difference a two-sided paired t-test finds with "
                  f"power {s.power}, at the median number of shared questions and the pooled sd of the observed "
                  f"paired differences (root mean square over the compared pairs; d_z from the noncentral t, "
                  f"statsmodels TTestPower), at two levels: family-wise, at {FAMILYWISE_LEVEL} (the comparisons "
                  f"of the metric's family, every compared pair and split: the level of the marks), and at alpha "
                  f"{s.alpha} for one comparison alone (before correction).", ""]
        for column, m in sig.mdd.items():
            if not column.endswith("/all"):
                continue
            if math.isnan(m["mdd"]):
                lines.append(f"- {column.removesuffix('/all')}: the compared cells score each of the {m['n']} "
                             f"questions alike: no spread of paired differences to estimate it from")
            else:
                lines.append(f"- {column.removesuffix('/all')}: with {m['n']} questions, differences below "
                             f"{_fmt(m['mdd_familywise'])} at the family-wise alpha {s.alpha}/{m['family_size']} = "
                             f"{_fmt(m['alpha_familywise'])} ({_fmt(m['mdd'])} at alpha {s.alpha} uncorrected) "
                             f"cannot be told from noise (sd of paired differences {_fmt(m['sd_difference'])} over "
                             f"{m['pairs']} pairs)")
        lines.append("")
    return "\n".join(lines)
