"""Agreement between evaluations: Kendall's tau-b and tau_ap, run-level and per topic, with bootstrap CIs.

The AutoNuggetizer paper (section 5) compares evaluations by Kendall's tau between the system rankings they
induce (run level) and by the mean over topics of per-topic tau. We do the same for per-answer evaluations read
from run folders (`rag.records.AnswerRecord.evaluation_values`: `judge/<judge>/<field>`, `nuggets/<metric>`,
`scores/<name>`), add the top-weighted AP correlation, and bootstrap all of them over topics for confidence
intervals.

AP correlation with ties follows Urbano & Marrero ("The Treatment of Ties in AP Correlation", ICTIR 2017):
tau_ap_a when a reference ("truth") ranking without ties is compared with a candidate that may tie, tau_ap_b
(symmetric, no reference) when both may tie. The reference is explicit (`--reference`, the sweep summary's
`agreement_reference`): by default a reference judge's values (nugget scores, as AutoNuggetizer compares its
automatic evaluations with the manual one; run folders carry no human labels: `python -m eval.meta` compares judges
with people); it is named in every output (CSV column `reference`, the matrix and
heatmap titles, the W&B key `.../tau_ap_a_ref_<side>`).

By default every judge field is paired with every nugget metric (the registry's per-answer kinds; counters
never take part): the judge x nugget-metric matrix. Only topics scored in every run enter (the others are counted
as dropped), so every run's mean is over the same topics. Where a side has no variance over the runs, or there are
fewer than `MIN_RUNS` runs, the coefficients are undefined: NaN with a `reason`, never a perfect 1.0.
Runs that answered different question files (`rag.sweep.question_sets`) share no question, so each question set
gets its own table (`per_question_set`), each pair naming its set (CSV column `questions`).

    python -m eval.agreement SWEEP_DIR_OR_RUN_DIRS... --out DIR [--rows 'judge/*'] [--cols 'nuggets/*']
    python -m eval.agreement ... --metrics 'scores/f1' 'nuggets/vital_strict'   # all pairs of these instead

A folder holding `answers.jsonl` is a run; any other folder is searched recursively for runs.
Writes DIR/agreement.csv (every pair), DIR/agreement.md (the matrix first; a section per question set) and the
heatmaps (agreement.png, or agreement@<set>.png per set), atomically.
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import io
import itertools
import logging
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import kendalltau

from rag.core.hashing import slug
from rag.core.io import atomic_write_text
from rag.folders import RunFolder
from rag.judge.nugget_sets import NuggetSetGate
from rag.judge.run import declare_saved_specs
from rag.metrics.registry import REGISTRY
from rag.metrics.stats import NAN2, percentile_ci, too_few_units
from rag.records import is_number, result_values
from rag.sweep.question_sets import run_question_sets

log = logging.getLogger(__name__)

#: a run-level tau over fewer runs says nothing (2 runs: +1 or -1 by construction)
MIN_RUNS = 3
CONSTANT = "constant"
FEW_RUNS = f"fewer than {MIN_RUNS} runs"
NO_TOPICS = "no topic scored by both in every run"


# -- correlation coefficients ---------------------------------------------------------------------------------
def _constant(x: Sequence[float]) -> bool:
    return len(set(np.asarray(x, dtype=float).tolist())) <= 1


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b (ties handled as in scipy); NaN when either side is constant or has < 2 items."""
    if len(x) < 2 or _constant(x) or _constant(y):
        return math.nan
    with np.errstate(invalid="ignore", divide="ignore"):
        result = kendalltau(np.asarray(x, dtype=float), np.asarray(y, dtype=float), variant="b")
    return float(result.statistic)


def tau_ap(reference: Sequence[float], candidate: Sequence[float]) -> float:
    """AP correlation tau_ap (Yilmaz, Aslam & Robertson, SIGIR 2008, eq. 2) of `candidate`'s ranking against
    `reference`'s, for rankings without ties; NaN where either side ties (use `tau_ap_a` or `tau_ap_b`).

        tau_ap = 2 / (N - 1) * sum_{i=2..N} C(i) / (i - 1)  -  1

    Items are taken in the candidate's order (highest score first); C(i) counts the items above rank i that the
    reference also places above the item at rank i. A swap near the top costs more than one near the bottom, and
    the coefficient is not symmetric: the reference is the "truth".
    """
    ref, cand = _pair_arrays(reference, candidate, "tau_ap")
    if ref is None or _has_ties(ref) or _has_ties(cand):
        return math.nan
    return tau_ap_a(ref, cand)


def tau_ap_a(reference: Sequence[float], candidate: Sequence[float]) -> float:
    """tau_AP,a of Urbano & Marrero ("The Treatment of Ties in AP Correlation", ICTIR 2017): the accuracy
    scenario, where the reference ranking has no ties and the candidate may tie items it cannot tell apart.

    It is the expected tau_ap over all orders that break the candidate's ties at random: an item of a tie group
    that starts at position p and holds t items takes each of the positions p..p+t-1 with probability 1/t (term
    I: the items of higher groups that the reference also ranks above it, weighted by the mean of 1/(position-1)),
    and each pair within a group is in the reference's order half of the time (term II). Equals `tau_ap` without
    ties. NaN for N < 2, a constant side, or ties in the reference (tau_AP,a is not defined there; `tau_ap_b` is).
    """
    ref, cand = _pair_arrays(reference, candidate, "tau_ap_a")
    if ref is None or _has_ties(ref):
        return math.nan
    n = len(ref)
    above = cand[None, :] > cand[:, None]  # above[i, j]: the candidate puts j strictly above i
    concordant = (above & (ref[None, :] > ref[:, None])).sum(axis=1)
    start = 1 + above.sum(axis=1)  # 1-based first position of i's tie group
    size = (cand[None, :] == cand[:, None]).sum(axis=1)
    total = 0.0
    for i in range(n):
        p, t = int(start[i]), int(size[i])
        if p > 1:  # term I: the top group has nothing above it
            total += concordant[i] * float(np.mean(1.0 / (np.arange(p, p + t) - 1)))
        k = np.arange(1, t)  # term II: the item at the group's (k+1)-th place has k group mates above it
        total += float(np.sum(k / (p + k - 1))) / (2 * t)
    return 2.0 * total / (n - 1) - 1.0


def _tau_ap_b_one_way(truth: np.ndarray, order: np.ndarray) -> float:
    """One direction of tau_AP,b: items are visited in `order`'s ranking, tie groups kept whole; an item counts the
    items of strictly higher groups that `truth` also ranks strictly above it, divided by how many there are."""
    above = order[None, :] > order[:, None]
    n_above = above.sum(axis=1)
    concordant = (above & (truth[None, :] > truth[:, None])).sum(axis=1)
    visited = n_above > 0  # the top group is skipped
    return 2.0 * float(np.mean(concordant[visited] / n_above[visited])) - 1.0


def tau_ap_b(x: Sequence[float], y: Sequence[float]) -> float:
    """tau_AP,b of Urbano & Marrero (ICTIR 2017): the agreement scenario, where both rankings may tie. Each
    direction visits one ranking's tie groups and divides by the number of items strictly above the group (p - 1
    instead of i - 1); the coefficient is the mean of both directions, so it is symmetric and has no reference.
    Equals the mean of tau_ap in both directions without ties. NaN for N < 2 or a constant side.
    """
    a, b = _pair_arrays(x, y, "tau_ap_b")
    if a is None:
        return math.nan
    return (_tau_ap_b_one_way(a, b) + _tau_ap_b_one_way(b, a)) / 2.0


def _has_ties(values: np.ndarray) -> bool:
    return len(np.unique(values)) < len(values)


def _pair_arrays(x: Sequence[float], y: Sequence[float], what: str) -> tuple[np.ndarray | None, np.ndarray]:
    """Both sides as float arrays, or (None, _) where no ranking correlation is defined (N < 2, a constant side)."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(a) != len(b):
        raise ValueError(f"{what}: rankings of different lengths ({len(a)} and {len(b)})")
    if len(a) < 2 or _constant(a) or _constant(b):
        return None, b
    return a, b


# -- reading runs ---------------------------------------------------------------------------------------------
def evaluation_metric(name: str) -> str:
    """The registry name of a per-answer evaluation's run mean: judge/j/f -> judge/j/f/all, scores/f1 ->
    answer/f1/all, nuggets/m -> nuggets/m/all."""
    if name.startswith("scores/"):
        return "answer/" + name.removeprefix("scores/") + "/all"
    return name + "/all"


def evaluation_kind(name: str) -> str | None:
    return REGISTRY.kind(evaluation_metric(name))


@dataclass
class Run:
    name: str
    path: Path | None
    metrics: dict[str, Any] = field(default_factory=dict)
    #: question id -> evaluation -> value
    topics: dict[str, dict[str, float]] = field(default_factory=dict)
    #: evaluations from reference judges (declared by the judge: AutoNuggetizer's nugget scores)
    references: set[str] = field(default_factory=set)
    #: the question set the run answered when a sweep holds several (`rag.sweep.question_sets`); its topics are
    #: then keyed `<set>: <id>`, so two files that number their questions alike never share a topic
    question_set: str = ""


def within_question_sets(runs: Sequence[Run], labels: Mapping[str, str]) -> None:
    """Key each run's topics within its question set (`labels`: run name -> set label, "" for a sweep of one set),
    after anything that matches topics by their plain ids (the battles) has been attached: topics shared across
    sets are then never paired, so a pair of evaluations is compared over one set's topics or, with none in
    every run, says so."""
    for run in runs:
        label = labels.get(run.name, "")
        if label and not run.question_set:
            run.question_set = label
            run.topics = {f"{label}: {topic}": values for topic, values in run.topics.items()}


def find_run_dirs(paths: Sequence[Path]) -> list[Path]:
    """Run folders (holding answers.jsonl) named directly or found below sweep folders, sorted, unique."""
    out: list[Path] = []
    for path in paths:
        if RunFolder(path).has_answers:
            out.append(path)
        elif path.is_dir():
            out.extend(sorted(p.parent for p in path.rglob(RunFolder.ANSWERS)))
        else:
            raise FileNotFoundError(f"{path}: not a run folder or a sweep folder")
    return list(dict.fromkeys(p.resolve() for p in out))


def load_run(path: Path, name: str | None = None) -> Run:
    folder = RunFolder(path)
    for problem in declare_saved_specs(folder.saved_config):  # the run's judges name their metrics here too
        log.warning("%s: %s", path, problem)
    run = Run(name=name or path.name, path=path, metrics=folder.metrics())
    for record in folder.records():
        run.topics[record.id] = record.evaluation_values()
        run.references |= record.reference_evaluations()
    return run


def attach_battles(runs: Sequence[Run], paths: Sequence[Path]) -> None:
    """The battle ranking of every sweep folder in `paths` that has one (`eval.battles`: SWEEP/battles/) as one
    more per-topic evaluation of its runs, `battles/score`."""
    from eval.battle_files import attach

    for path in paths:
        if Path(path).is_dir():
            attach(runs, path)


def _run_names(paths: Sequence[Path]) -> list[str]:
    """Short unique names: paths relative to their common folder."""
    if len(paths) == 1:
        return [paths[0].name]
    common = Path(*[parts[0] for parts in zip(*(p.parts for p in paths)) if len(set(parts)) == 1])
    return [str(p.relative_to(common)) if p != common else p.name for p in paths]


# -- one yardstick per topic ----------------------------------------------------------------------------------
#: makes one nugget set per topic for a sweep and re-scores its cells against it (`eval.pool`)
POOL_COMMAND = "python -m eval.pool sweep_dir=<SWEEP>"


class NuggetSetMismatch(ValueError):
    """Runs were scored against different nugget sets on a topic: their nugget scores are different rulers."""


def nugget_sets(run: Run) -> dict[str, dict[str, str]]:
    """Evaluation -> topic -> the `nugget_set` hash its judge result recorded (read from the run's answers);
    results without one (files written before the hash existed) are left out: unknown, not checked."""
    out: dict[str, dict[str, str]] = {}
    if run.path is None or not RunFolder(run.path).has_answers:
        return out
    for record in RunFolder(run.path).records():
        for name, result in record.judges.items():
            value = result.get("nugget_set") if isinstance(result, Mapping) else None
            if isinstance(value, str):
                topic = f"{run.question_set}: {record.id}" if run.question_set else record.id
                for evaluation in result_values(name, result):
                    out.setdefault(evaluation, {})[topic] = value
    return out


def check_nugget_sets(runs: Sequence[Run], evaluations: Sequence[str]) -> None:
    """Refuse to pair runs whose results for one of `evaluations` were scored against different nugget sets on
    some topic (the comparability gate every consumer of a sweep asks, `rag.judge.nugget_sets.NuggetSetGate`):
    one NuggetSetMismatch, one line, naming the topic and how many sets (AutoNuggetizer scores every run against one
    set per topic). Any nugget-based judge's values count: nuggets, ARGUE, Crucible."""
    if len(runs) < 2:
        return
    sets = [nugget_sets(run) for run in runs]
    gate = NuggetSetGate({str(i): s for i, s in enumerate(sets)})
    for evaluation in sorted({e for s in sets for e in s} & set(evaluations)):
        if not gate.rankable(evaluation):
            comparison = gate.comparison(evaluation)
            first = next(iter(comparison.differing))
            raise NuggetSetMismatch(
                f"{evaluation}: topic {first!r} was scored against {comparison.n_sets[first]} distinct nugget "
                f"sets across {len(runs)} runs ({len(comparison.differing)} of {comparison.n_topics} topics differ), "
                f"so the runs' nugget scores do not compare; make one nugget set per topic and re-score the cells: "
                f"{POOL_COMMAND}")


# -- agreement ------------------------------------------------------------------------------------------------
#: which side of a pair is the reference ("truth") of tau_ap_a: a reference judge's values (the judge declares
#: itself one: AutoNuggetizer's nugget scores, which it compares with the manual ones the same way), else the
#: column side of the matrix (`b`). Run folders carry no human labels (`python -m eval.meta` compares with people).
#: the nugget judge's prefix, taken as the reference only for runs that carry no declarations (built in code)
UNDECLARED_REFERENCE_PREFIX = "nuggets/"


def references_of(runs: Sequence[Run]) -> set[str] | None:
    """The evaluations the runs' judges declared as references; None when no run carries a declaration."""
    declared = set().union(*(r.references for r in runs)) if runs else set()
    return declared or None


def is_reference(name: str, references: set[str] | None) -> bool:
    return name in references if references is not None else name.startswith(UNDECLARED_REFERENCE_PREFIX)


def choose_reference(a: str, b: str, reference: str = "auto", references: set[str] | None = None) -> str:
    """The reference of pair (a, b): `auto` takes a reference judge's values (`references`, declared by the
    judges; without declarations, nugget scores by name); any other value is a glob or prefix (`nuggets`,
    `judge/liverag/*`, an evaluation's full name) that one side must match; no match: `b`."""
    if reference == "auto":
        return next((side for side in (b, a) if is_reference(side, references)), b)
    patterns = [reference, reference.rstrip("/") + "/*"]
    for pattern in patterns:
        for side in (b, a):
            if fnmatch.fnmatchcase(side, pattern):
                return side
    return b


@dataclass
class PairAgreement:
    """Agreement of evaluations `a` and `b` over the same runs and topics; `reference` (a or b) is tau_ap_a's
    truth. tau-b and tau_ap_b are symmetric and do not depend on it."""

    a: str
    b: str
    n_runs: int
    n_topics: int
    reference: str = ""
    #: topics scored in some run but not in every run: left out, so every run's mean is over the same topics
    n_topics_dropped: int = 0
    tau_b: float = math.nan
    tau_b_ci: tuple[float, float] = NAN2
    tau_ap_a: float = math.nan
    tau_ap_a_ci: tuple[float, float] = NAN2
    tau_ap_b: float = math.nan
    tau_ap_b_ci: tuple[float, float] = NAN2
    tau_topic: float = math.nan
    tau_topic_ci: tuple[float, float] = NAN2
    n_topics_defined: int = 0
    #: the reference's run means tie: tau_ap_a is undefined there (Urbano & Marrero's tau_ap_b applies)
    reference_ties: bool = False
    #: why the run-level tau is undefined ("" when it is defined)
    reason: str = ""
    #: why no bootstrap interval exists (`rag.metrics.stats.too_few_units`: one topic), "" when intervals exist
    ci_reason: str = ""
    #: the question set whose runs were ranked (`per_question_set`); "" for a sweep of one set
    questions: str = ""

    @property
    def candidate(self) -> str:
        return self.a if self.reference == self.b else self.b

    def row(self) -> dict[str, Any]:
        return {"eval_a": self.a, "eval_b": self.b, "reference": self.reference, "n_runs": self.n_runs,
                "n_topics": self.n_topics, "n_topics_dropped": self.n_topics_dropped,
                "tau_b": self.tau_b, "tau_b_lo": self.tau_b_ci[0], "tau_b_hi": self.tau_b_ci[1],
                "tau_ap_a": self.tau_ap_a, "tau_ap_a_lo": self.tau_ap_a_ci[0], "tau_ap_a_hi": self.tau_ap_a_ci[1],
                "tau_ap_b": self.tau_ap_b, "tau_ap_b_lo": self.tau_ap_b_ci[0], "tau_ap_b_hi": self.tau_ap_b_ci[1],
                "tau_topic": self.tau_topic, "tau_topic_lo": self.tau_topic_ci[0],
                "tau_topic_hi": self.tau_topic_ci[1], "n_topics_defined": self.n_topics_defined,
                "reference_ties": self.reference_ties, "ci_note": self.ci_reason, "reason": self.reason,
                "questions": self.questions}


def _reason(ma: Sequence[float], mb: Sequence[float], a: str, b: str) -> str:
    sides = [name for name, values in ((a, ma), (b, mb)) if _constant(values)]
    return f"{CONSTANT}: {' and '.join(sides)}" if sides else ""


def _run_level(out: PairAgreement, ma: np.ndarray, mb: np.ndarray) -> tuple[float, float, float]:
    """tau-b, tau_ap_a (the reference side as truth) and tau_ap_b of the runs' means."""
    ref, cand = (ma, mb) if out.reference == out.a else (mb, ma)
    return kendall_tau(ma, mb), tau_ap_a(ref, cand), tau_ap_b(ma, mb)


def pair_agreement(runs: Sequence[Run], a: str, b: str, n_boot: int = 1000, seed: int = 0,
                   confidence: float = 0.95, min_runs: int = MIN_RUNS, reference: str = "auto") -> PairAgreement:
    """Agreement of evaluations `a` and `b` over the topics every run has both for.

    Run level: tau between the runs' means over those topics (needs `min_runs` runs and variance on both sides,
    else NaN with `reason`); topics missing from some run are dropped and counted (`n_topics_dropped`), so a run
    with more failures is never averaged over other topics. Per topic: tau between the runs' scores on each
    topic, averaged over the topics where it is defined. CIs: percentile bootstrap over topics (resampled with
    replacement, `seed`ed), over the resamples where tau is defined. `reference`: see `choose_reference`.
    """
    scored = [{t for t, v in r.topics.items() if a in v and b in v} for r in runs]
    topics = sorted(set.intersection(*scored)) if runs else []
    out = PairAgreement(a=a, b=b, n_runs=len(runs), n_topics=len(topics),
                        reference=choose_reference(a, b, reference, references_of(runs)),
                        n_topics_dropped=len(set().union(*scored)) - len(topics) if runs else 0)
    if not topics:
        if len(runs) >= min_runs and all(is_number(r.metrics.get(a)) and is_number(r.metrics.get(b))
                                         for r in runs):
            # run-level only metrics (e.g. retrieval recall in metrics.json): no topics, so no CI
            ma = np.array([float(r.metrics[a]) for r in runs])
            mb = np.array([float(r.metrics[b]) for r in runs])
            out.reason = _reason(ma, mb, a, b)
            if not out.reason:
                out.tau_b, out.tau_ap_a, out.tau_ap_b = _run_level(out, ma, mb)
                out.reference_ties = math.isnan(out.tau_ap_a)
        else:
            out.reason = FEW_RUNS if len(runs) < min_runs else NO_TOPICS
        return out
    xa = np.array([[r.topics[t][a] for t in topics] for r in runs])  # runs x topics
    xb = np.array([[r.topics[t][b] for t in topics] for r in runs])
    per_topic = np.array([kendall_tau(xa[:, j], xb[:, j]) for j in range(len(topics))]) if len(runs) >= 2 \
        else np.full(len(topics), math.nan)
    defined = ~np.isnan(per_topic)
    out.n_topics_defined = int(defined.sum())
    if defined.any():
        out.tau_topic = float(per_topic[defined].mean())
    ma, mb = xa.mean(axis=1), xb.mean(axis=1)
    out.reason = FEW_RUNS if len(runs) < min_runs else _reason(ma, mb, a, b)
    run_level = not out.reason
    if run_level:
        out.tau_b, out.tau_ap_a, out.tau_ap_b = _run_level(out, ma, mb)
        out.reference_ties = math.isnan(out.tau_ap_a)
    out.ci_reason = too_few_units(len(topics), "topic")
    if out.ci_reason:  # one topic resampled gives the same tau every time: no interval, and the reason
        return out
    rng = np.random.default_rng(seed)
    boot: list[tuple[float, float, float]] = []
    boot_topic = []
    for _ in range(n_boot):
        idx = rng.integers(0, len(topics), len(topics))
        if run_level:
            boot.append(_run_level(out, xa[:, idx].mean(axis=1), xb[:, idx].mean(axis=1)))
        sample = per_topic[idx]
        sample = sample[~np.isnan(sample)]
        boot_topic.append(float(sample.mean()) if len(sample) else math.nan)
    if run_level:
        out.tau_b_ci, out.tau_ap_a_ci, out.tau_ap_b_ci = (percentile_ci([s[k] for s in boot], confidence) for k in range(3))
        if out.reference_ties:
            out.tau_ap_a_ci = NAN2
    if defined.any():
        out.tau_topic_ci = percentile_ci(boot_topic, confidence)
    return out


def present_evaluations(runs: Sequence[Run]) -> list[str]:
    """Per-answer evaluations present in every run (on at least one topic)."""
    if not runs:
        return []
    return sorted(set.intersection(*[set().union(*r.topics.values()) if r.topics else set() for r in runs]))


def evaluations(runs: Sequence[Run], patterns: Sequence[str] = ()) -> list[str]:
    """Evaluations present in every run, filtered by glob patterns, in pattern order.

    With patterns, numeric keys of every run's metrics.json match too (e.g. a retrieval recall that has no
    per-question value); those pairs get a run-level tau only.
    """
    present = set(present_evaluations(runs))
    if not patterns:
        return sorted(present)
    present |= set.intersection(*[{k for k, v in r.metrics.items() if is_number(v)} for r in runs])
    out: list[str] = []
    for pattern in patterns:
        out.extend(sorted(e for e in present if fnmatch.fnmatchcase(e, pattern) and e not in out))
    return out


def default_axes(runs: Sequence[Run]) -> tuple[list[str], list[str]]:
    """Matrix rows (judge values) and columns (reference values: nugget scores): per-answer kinds in the registry.

    Without nugget metrics the answer string metrics (scores/f1, scores/em) stand in as columns; without judge
    fields, rows are those answer metrics; so a sweep always gets the table its evaluations allow.
    """
    present = [e for e in present_evaluations(runs) if evaluation_kind(e) == "per_answer"]
    references = references_of(runs)
    answers = [e for e in present if e.startswith("scores/")]
    nuggets = [e for e in present if e not in answers and is_reference(e, references)]
    judges = [e for e in present if e not in answers and e not in nuggets]
    if judges and nuggets:
        return judges, nuggets
    if judges:
        return judges, answers
    if nuggets:
        return answers, nuggets
    return answers[:1], answers[1:]


@dataclass
class Agreement:
    """The matrix (rows x cols) and the full pair list of one set of runs."""

    runs: list[Run]
    rows: list[str]
    cols: list[str]
    pairs: list[PairAgreement]
    confidence: float = 0.95
    #: the question set its runs answered (`per_question_set`); "" for a sweep of one set
    questions: str = ""

    def cell(self, a: str, b: str) -> PairAgreement | None:
        return next((p for p in self.pairs if p.a == a and p.b == b), None)

    @property
    def matrix_pairs(self) -> list[PairAgreement]:
        return [p for p in (self.cell(a, b) for a in self.rows for b in self.cols) if p is not None]


def agreement_matrix(runs: Sequence[Run], rows: Sequence[str] | None = None, cols: Sequence[str] | None = None,
                     n_boot: int = 1000, seed: int = 0, confidence: float = 0.95,
                     reference: str = "auto") -> Agreement:
    """Every row evaluation against every column evaluation; `reference` picks tau_ap_a's truth per pair
    (`choose_reference`: nugget scores, else the column)."""
    if rows is None or cols is None:
        default_rows, default_cols = default_axes(runs)
        rows = default_rows if rows is None else rows
        cols = default_cols if cols is None else cols
    check_nugget_sets(runs, [*rows, *cols])
    pairs = [pair_agreement(runs, a, b, n_boot=n_boot, seed=seed, confidence=confidence, reference=reference)
             for a in rows for b in cols if a != b]
    return Agreement(list(runs), list(rows), list(cols), pairs, confidence)


def agreement_table(runs: Sequence[Run], names: Sequence[str], reference: str | None = None, n_boot: int = 1000,
                    seed: int = 0, confidence: float = 0.95) -> list[PairAgreement]:
    """All pairs of `names` (tau_ap_a's reference chosen by `choose_reference`), or `reference` (an evaluation's
    name, then the reference of every pair) against each other one."""
    check_nugget_sets(runs, names)
    if reference is not None:
        pairs = [(reference, n) for n in names if n != reference]
    else:
        pairs = list(itertools.combinations(names, 2))
    return [pair_agreement(runs, a, b, n_boot=n_boot, seed=seed, confidence=confidence,
                           reference=reference or "auto") for a, b in pairs]



@dataclass
class SetAgreements:
    """One agreement per question set (`per_question_set`), and the sets with a single run, which rank nothing."""

    tables: list[Agreement]
    alone: dict[str, str] = field(default_factory=dict)


def per_question_set(runs: Sequence[Run], build: Callable[[list[Run]], Agreement]) -> SetAgreements:
    """`build` over each question set's runs (`Run.question_set`; a sweep of one set is one unlabelled table).

    A tau ranks runs by their scores on the same questions: runs that answered different question files share no
    topic, so pooling them gives "no topic in every run" for every pair. Each set is ranked on its own; a set
    answered by a single run ranks nothing and is listed in `alone` (set -> its run).
    """
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.question_set, []).append(run)
    if len(groups) == 1:
        return SetAgreements([build(list(runs))])
    out = SetAgreements([])
    for label, members in groups.items():
        if len(members) < 2:
            out.alone[label] = members[0].name
            continue
        table = build(members)
        table.questions = label
        for pair in table.pairs:
            pair.questions = label
        out.tables.append(table)
    return out


# -- output ---------------------------------------------------------------------------------------------------
def _fmt(value: float | None) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def _with_ci(value: float, ci: tuple[float, float]) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isnan(ci[0]) or math.isnan(ci[1]):
        return f"{_fmt(value)} [no interval]"
    return f"{_fmt(value)} [{_fmt(ci[0])}, {_fmt(ci[1])}]"


def short(name: str) -> str:
    """judge/liverag/correctness -> liverag/correctness; nuggets/vital_strict -> vital_strict."""
    for prefix in ("judge/", "nuggets/"):
        if name.startswith(prefix):
            return name.removeprefix(prefix)
    return name


def to_csv(rows: Sequence[PairAgreement]) -> str:
    buffer = io.StringIO()
    fields = list(PairAgreement("", "", 0, 0).row())
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if isinstance(v, float) and math.isnan(v) else v) for k, v in row.row().items()})
    return buffer.getvalue()


def references(pairs: Sequence[PairAgreement]) -> str:
    """The reference sides of some pairs in words: `nuggets/*`, or several joined by ", "."""
    sides = sorted({p.reference.split("/")[0] + "/*" for p in pairs if p.reference})
    return ", ".join(sides) or "-"


def matrix_markdown(agreement: Agreement, heading: str = "##") -> str:
    """The judge x nugget-metric matrix: tau-b, tau_ap_a (naming its reference) and tau_ap_b with CIs, runs and
    topics, and what is undefined."""
    if not agreement.rows or not agreement.cols or not agreement.pairs:
        return ""
    pct = f"{100 * agreement.confidence:.0f}%"
    n_runs = len(agreement.runs)
    within = f" (questions: {agreement.questions})" if agreement.questions else ""
    lines = [f"{heading} Agreement: {' / '.join(sorted({r.split('/')[0] for r in agreement.rows}))} x "
             f"{' / '.join(sorted({c.split('/')[0] for c in agreement.cols}))}{within}", "",
             f"Kendall tau-b, tau_ap_a (reference: {references(agreement.matrix_pairs)}) and tau_ap_b (symmetric; "
             f"Urbano & Marrero 2017) between the rankings of {n_runs} runs by their mean per-answer scores over the "
             f"topics every run scored, [{pct} bootstrap CI over topics]. A run-level tau needs at least {MIN_RUNS} "
             f"runs and variance on both sides; otherwise it is NaN, with the reason below.", ""]
    header = "| | " + " | ".join(short(c) for c in agreement.cols) + " |"
    sep = "|---|" + "---|" * len(agreement.cols)
    for title, get in (("tau-b", lambda p: _with_ci(p.tau_b, p.tau_b_ci)),
                       (f"tau_ap_a (reference: {references(agreement.matrix_pairs)})",
                        lambda p: _with_ci(p.tau_ap_a, p.tau_ap_a_ci)),
                       ("tau_ap_b", lambda p: _with_ci(p.tau_ap_b, p.tau_ap_b_ci)),
                       ("runs / topics (dropped: not scored in every run)",
                        lambda p: f"{p.n_runs} / {p.n_topics} ({p.n_topics_dropped})")):
        lines += [f"**{title}**", "", header, sep]
        for a in agreement.rows:
            cells = []
            for b in agreement.cols:
                p = agreement.cell(a, b)
                cells.append(get(p) if p else "")
            lines.append(f"| {short(a)} | " + " | ".join(cells) + " |")
        lines.append("")
    undefined = [p for p in agreement.matrix_pairs if p.reason]
    if undefined:
        lines += [f"Undefined ({len(undefined)} of {len(agreement.matrix_pairs)} cells):", ""]
        lines += [f"- {short(p.a)} x {short(p.b)}: {p.reason}" for p in undefined]
        lines.append("")
    no_interval = sorted({p.ci_reason for p in agreement.matrix_pairs if p.ci_reason})
    if no_interval:
        lines += [f"No bootstrap intervals: {'; '.join(no_interval)}.", ""]
    tied = [p for p in agreement.matrix_pairs if p.reference_ties]
    if tied:
        lines += [f"tau_ap_a undefined in {len(tied)} of {len(agreement.matrix_pairs)} cells: the reference's run "
                  f"means tie (tau_ap_a needs a reference without ties; tau_ap_b takes ties on both sides).", ""]
    return "\n".join(lines)


def _section(agreement: Agreement, heading: str) -> list[str]:
    """One table's runs, matrix and other pairs (`heading` is the matrix's level)."""
    runs = agreement.runs
    lines = [f"{len(runs)} runs: " + ", ".join(f"`{r.name}`" for r in runs), ""]
    matrix = matrix_markdown(agreement, heading)
    if matrix:
        lines.append(matrix)
    in_matrix = {id(p) for p in agreement.matrix_pairs}
    extra = [p for p in agreement.pairs if id(p) not in in_matrix]
    if extra:
        lines += [f"{heading} Other pairs", "", "| eval A | eval B | reference | runs | topics (dropped) | tau-b | "
                  "tau_ap_a | tau_ap_b | tau per topic | reason |", "|---|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {p.a} | {p.b} | {p.reference} | {p.n_runs} | {p.n_topics} ({p.n_topics_dropped}) | "
                  f"{_with_ci(p.tau_b, p.tau_b_ci)} | {_with_ci(p.tau_ap_a, p.tau_ap_a_ci)} | "
                  f"{_with_ci(p.tau_ap_b, p.tau_ap_b_ci)} | {_with_ci(p.tau_topic, p.tau_topic_ci)} | "
                  f"{'; '.join(r for r in (p.reason, p.ci_reason) if r)} |"
                  for p in extra]
        lines.append("")
    return lines


def alone_line(alone: Mapping[str, str]) -> str:
    """The sets a single run answered, in one line ("" when none)."""
    if not alone:
        return ""
    named = "; ".join(f"{label} (`{run}`)" for label, run in alone.items())
    return f"Not ranked, one run in its question set: {named}."


def to_markdown(agreement: Agreement | SetAgreements) -> str:
    """agreement.md: one table, or one section per question set."""
    sets = agreement if isinstance(agreement, SetAgreements) else SetAgreements([agreement])
    lines = ["# Agreement between evaluations", ""]
    if len(sets.tables) == 1 and not sets.tables[0].questions and not sets.alone:
        lines += _section(sets.tables[0], "##")
    else:
        lines += ["Each question set's runs are ranked apart: runs of different sets answered different questions.",
                  ""]
        for table in sets.tables:
            lines += [f"## Questions: {table.questions}", "", *_section(table, "###")]
        if sets.alone:
            lines += [alone_line(sets.alone), ""]
    lines.append("Every pair, with per-topic tau: `agreement.csv`.")
    return "\n".join(lines) + "\n"


def scalars(agreement: Agreement) -> dict[str, float | int]:
    """`agreement/<judge>/<field>/<nugget metric>/<stat>` for the matrix's defined judge x nugget cells;
    tau_ap_a's key names its reference side (`tau_ap_a_ref_nuggets`, `..._ref_judge`)."""
    out: dict[str, float | int] = {}
    references = references_of(agreement.runs)
    within = f"@{agreement.questions}" if agreement.questions else ""  # as the summary's `best/<metric>@<set>`
    for p in agreement.matrix_pairs:
        if p.a.startswith("scores/") or is_reference(p.a, references) or not is_reference(p.b, references):
            continue
        prefix = f"agreement/{short(p.a)}/{short(p.b)}/"
        out[prefix + "n_runs" + within] = p.n_runs
        out[prefix + "n_topics" + within] = p.n_topics
        out[prefix + "n_topics_dropped" + within] = p.n_topics_dropped
        tau_ap_a_key = "tau_ap_a_ref_" + p.reference.split("/")[0]
        for stat, value, ci in (("tau_b", p.tau_b, p.tau_b_ci), (tau_ap_a_key, p.tau_ap_a, p.tau_ap_a_ci),
                                ("tau_ap_b", p.tau_ap_b, p.tau_ap_b_ci), ("tau_topic", p.tau_topic, p.tau_topic_ci)):
            if not math.isnan(value):
                out[prefix + stat + within] = value
                if not math.isnan(ci[0]):
                    out[prefix + stat + "_lo" + within], out[prefix + stat + "_hi" + within] = ci
    return out


def heatmap_png(agreement: Agreement, path: Path) -> Path | None:
    """A heatmap of the tau-b matrix (NaN cells grey, labelled with the value or "NaN"); None without a matrix."""
    if not agreement.rows or not agreement.cols:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    values = np.array([[getattr(agreement.cell(a, b), "tau_b", math.nan) for b in agreement.cols]
                       for a in agreement.rows], dtype=float)
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(agreement.cols), 1.2 + 0.6 * len(agreement.rows)))
    cmap = matplotlib.colormaps["RdBu"].with_extremes(bad="#cccccc")
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=-1, vmax=1, aspect="auto")
    ax.set_xticks(range(len(agreement.cols)), [short(c) for c in agreement.cols], rotation=30, ha="right")
    ax.set_yticks(range(len(agreement.rows)), [short(r) for r in agreement.rows])
    for i in range(len(agreement.rows)):
        for j in range(len(agreement.cols)):
            ax.text(j, i, "NaN" if math.isnan(values[i, j]) else f"{values[i, j]:.2f}", ha="center", va="center",
                    fontsize=8)
    fig.colorbar(image, ax=ax, label="Kendall tau-b (run level)")
    within = f" of {agreement.questions}" if agreement.questions else ""
    ax.set_title(f"Agreement over {len(agreement.runs)} runs{within} (tau_ap_a reference: "
                 f"{references(agreement.matrix_pairs)})", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)
    return path


def heatmap_name(agreement: Agreement) -> str:
    """agreement.png, or `agreement@<set>.png` for one question set's table."""
    return f"agreement@{slug(agreement.questions)}.png" if agreement.questions else "agreement.png"


def write(sets: SetAgreements, folder: Path) -> dict[str, Path]:
    """agreement.csv (every pair of every set, each naming its set), agreement.md and a heatmap per table, written
    atomically; heatmaps an earlier table left beside them are removed. Returns name -> path
    (`agreement_png@<set>` for a set's heatmap)."""
    files = {"agreement_csv": folder / "agreement.csv", "agreement_md": folder / "agreement.md"}
    atomic_write_text(files["agreement_csv"], to_csv([p for table in sets.tables for p in table.pairs]))
    atomic_write_text(files["agreement_md"], to_markdown(sets))
    drawn = set()
    for table in sets.tables:
        png = heatmap_png(table, folder / heatmap_name(table))
        if png is not None:
            files["agreement_png" + (f"@{table.questions}" if table.questions else "")] = png
            drawn.add(png.name)
    for old in folder.glob("agreement*.png"):
        if old.name not in drawn:
            old.unlink(missing_ok=True)
    return files


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.agreement", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", type=Path, help="run folders or sweep folders")
    parser.add_argument("--out", type=Path, required=True, help="folder for agreement.csv and agreement.md")
    parser.add_argument("--rows", nargs="*", default=None, help="glob patterns of row evaluations (judges)")
    parser.add_argument("--cols", nargs="*", default=None, help="glob patterns of column evaluations (nuggets)")
    parser.add_argument("--metrics", nargs="*", default=[], help="all pairs of these evaluations instead")
    parser.add_argument("--reference", default=None,
                        help="tau_ap_a's reference: an evaluation's name or a glob/prefix (`nuggets`, `judge/x/*`); "
                             "default: nugget scores, else the column. With --metrics and a full "
                             "name: only that one against each other")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples over topics")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--confidence", type=float, default=0.95)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    dirs = find_run_dirs(args.paths)
    if not dirs:
        parser.error("no run folders (with answers.jsonl) found")
    runs = [load_run(p, n) for p, n in zip(dirs, _run_names(dirs))]
    attach_battles(runs, args.paths)
    within_question_sets(runs, run_question_sets({r.name: (RunFolder(r.path), "") for r in runs if r.path}))
    if len(runs) < MIN_RUNS:
        log.warning("only %d runs: a run-level tau needs at least %d and is NaN", len(runs), MIN_RUNS)
    try:
        sets = per_question_set(runs, lambda group: _agreement(parser, args, group))
    except NuggetSetMismatch as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    write(sets, args.out)
    print(to_markdown(sets))
    return 0


def _agreement(parser: argparse.ArgumentParser, args: argparse.Namespace, runs: list[Run]) -> Agreement:
    """The command line's pairs: every pair of `--metrics`, else the (filtered) matrix."""
    if args.metrics:
        names = evaluations(runs, args.metrics)
        if args.reference is not None and args.reference not in names:
            parser.error(f"--reference {args.reference!r} is not an evaluation present in every run (with "
                         f"--metrics it names one of them: {names})")
        if len(names) < 2:
            parser.error(f"need at least two evaluations present in every run, found {names}")
        pairs = agreement_table(runs, names, reference=args.reference, n_boot=args.bootstrap, seed=args.seed,
                                confidence=args.confidence)
        agreement = Agreement(runs, [], [], pairs, args.confidence)
    else:
        rows = evaluations(runs, args.rows) if args.rows else None
        cols = evaluations(runs, args.cols) if args.cols else None
        agreement = agreement_matrix(runs, rows, cols, n_boot=args.bootstrap, seed=args.seed,
                                     confidence=args.confidence, reference=args.reference or "auto")
        if not agreement.pairs:
            parser.error("no pair of per-answer evaluations present in every run (judges x nuggets by default)")
    return agreement


if __name__ == "__main__":
    raise SystemExit(main())
