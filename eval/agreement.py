"""Agreement between evaluations: Kendall's tau-b and tau_ap, run-level and per topic, with bootstrap CIs.

The AutoNuggetizer paper (section 5) compares evaluations by Kendall's tau between the system rankings they
induce (run level) and by the mean over topics of per-topic tau. We do the same for any two per-question
evaluations found in run folders (`scores/<metric>`, `judge/<judge>/<field>`, `nuggets/<score>`), add tau_ap
(top-weighted), and bootstrap both over topics for confidence intervals.

    python -m eval.agreement SWEEP_DIR_OR_RUN_DIRS... --out DIR [--metrics 'judge/*' 'nuggets/vital_strict']

A folder holding `answers.jsonl` is a run; any other folder is searched recursively for runs.
Writes DIR/agreement.csv and DIR/agreement.md (atomically).
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import io
import itertools
import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import kendalltau

from eval.nuggets import SCORE_NAMES
from rag.core.io import atomic_write_text, iter_jsonl

log = logging.getLogger(__name__)

#: judge result keys that are bookkeeping, not scores
_NOT_SCORES = {"attempts", "parse_failed"}


# -- correlation coefficients ---------------------------------------------------------------------------------
def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b (ties handled as in scipy); NaN when either side is constant or has < 2 items."""
    if len(x) < 2:
        return math.nan
    with np.errstate(invalid="ignore", divide="ignore"):
        result = kendalltau(np.asarray(x, dtype=float), np.asarray(y, dtype=float), variant="b")
    return float(result.statistic)


def tau_ap(reference: Sequence[float], candidate: Sequence[float]) -> float:
    """AP correlation tau_ap of the ranking by `candidate` scores against the ranking by `reference` scores.

    Source: E. Yilmaz, J. A. Aslam, S. Robertson, "A New Rank Correlation Coefficient for Information
    Retrieval", SIGIR 2008, eq. (2):

        tau_ap = 2 / (N - 1) * sum_{i=2..N} C(i) / (i - 1)  -  1

    where the items are taken in the candidate's order (highest score first) and C(i) is the number of items
    above rank i that the reference also places above the item at rank i. Unlike tau, a swap near the top costs
    more than a swap near the bottom; it is not symmetric (the reference is the "truth").

    Ties (the paper assumes none; our extension): a pair tied in both rankings counts as correct, a pair tied in
    exactly one counts 1/2; the candidate's ties are ordered by reference score so the result does not depend on
    input order. Without ties this is exactly the published formula. Returns NaN for N < 2.
    """
    ref = np.asarray(reference, dtype=float)
    cand = np.asarray(candidate, dtype=float)
    n = len(ref)
    if n != len(cand):
        raise ValueError("tau_ap: rankings of different lengths")
    if n < 2:
        return math.nan
    order = sorted(range(n), key=lambda k: (-cand[k], -ref[k]))
    total = 0.0
    for i in range(1, n):
        item = order[i]
        correct = 0.0
        for above in order[:i]:
            c_tie = cand[above] == cand[item]
            r_tie = ref[above] == ref[item]
            if c_tie and r_tie:
                correct += 1.0
            elif c_tie or r_tie:
                correct += 0.5
            elif ref[above] > ref[item]:
                correct += 1.0
        total += correct / i
    return 2.0 * total / (n - 1) - 1.0


# -- reading runs ---------------------------------------------------------------------------------------------
def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def question_values(record: Mapping[str, Any]) -> dict[str, float]:
    """Every per-question score of a record, by evaluation name; parse failures and skips are absent."""
    out: dict[str, float] = {}
    for name, value in (record.get("scores") or {}).items():
        if _is_number(value):
            out[f"scores/{name}"] = float(value)
    for judge, result in (record.get("judges") or {}).items():
        if not isinstance(result, Mapping) or result.get("parse_failed"):
            continue
        for name, value in result.items():
            if name not in _NOT_SCORES and _is_number(value):
                out[f"judge/{judge}/{name}"] = float(value)
    nuggets = record.get("nuggets")
    if isinstance(nuggets, Mapping) and not nuggets.get("parse_failed") and not nuggets.get("skipped"):
        for name in SCORE_NAMES:
            if _is_number(nuggets.get(name)):
                out[f"nuggets/{name}"] = float(nuggets[name])
    return out


@dataclass
class Run:
    name: str
    path: Path
    metrics: dict[str, Any] = field(default_factory=dict)
    #: question id -> evaluation -> value
    topics: dict[str, dict[str, float]] = field(default_factory=dict)


def find_run_dirs(paths: Sequence[Path]) -> list[Path]:
    """Run folders (holding answers.jsonl) named directly or found below sweep folders, sorted, unique."""
    out: list[Path] = []
    for path in paths:
        if (path / "answers.jsonl").is_file():
            out.append(path)
        elif path.is_dir():
            out.extend(sorted(p.parent for p in path.rglob("answers.jsonl")))
        else:
            raise FileNotFoundError(f"{path}: not a run folder or a sweep folder")
    return list(dict.fromkeys(p.resolve() for p in out))


def load_run(path: Path, name: str | None = None) -> Run:
    metrics = {}
    if (path / "metrics.json").is_file():
        metrics = json.loads((path / "metrics.json").read_text(encoding="utf-8"))
    run = Run(name=name or path.name, path=path, metrics=metrics)
    for line_no, record in enumerate(iter_jsonl(path / "answers.jsonl"), start=1):
        qid = str(record.get("id", line_no))
        run.topics[qid] = question_values(record)
    return run


def _run_names(paths: Sequence[Path]) -> list[str]:
    """Short unique names: paths relative to their common folder."""
    if len(paths) == 1:
        return [paths[0].name]
    common = Path(*[parts[0] for parts in zip(*(p.parts for p in paths)) if len(set(parts)) == 1])
    return [str(p.relative_to(common)) if p != common else p.name for p in paths]


# -- agreement ------------------------------------------------------------------------------------------------
@dataclass
class PairAgreement:
    a: str
    b: str
    n_runs: int
    n_topics: int
    tau_run: float = math.nan
    tau_run_ci: tuple[float, float] = (math.nan, math.nan)
    tau_ap_run: float = math.nan
    tau_ap_run_ci: tuple[float, float] = (math.nan, math.nan)
    tau_topic: float = math.nan
    tau_topic_ci: tuple[float, float] = (math.nan, math.nan)
    n_topics_defined: int = 0

    def row(self) -> dict[str, Any]:
        return {"eval_a": self.a, "eval_b": self.b, "n_runs": self.n_runs, "n_topics": self.n_topics,
                "tau_run": self.tau_run, "tau_run_lo": self.tau_run_ci[0], "tau_run_hi": self.tau_run_ci[1],
                "tau_ap_run": self.tau_ap_run, "tau_ap_run_lo": self.tau_ap_run_ci[0],
                "tau_ap_run_hi": self.tau_ap_run_ci[1], "tau_topic": self.tau_topic,
                "tau_topic_lo": self.tau_topic_ci[0], "tau_topic_hi": self.tau_topic_ci[1],
                "n_topics_defined": self.n_topics_defined}


def _ci(samples: Sequence[float], confidence: float) -> tuple[float, float]:
    values = np.asarray([s for s in samples if not math.isnan(s)], dtype=float)
    if len(values) == 0:
        return (math.nan, math.nan)
    alpha = (1 - confidence) / 2
    return float(np.quantile(values, alpha)), float(np.quantile(values, 1 - alpha))


def pair_agreement(runs: Sequence[Run], a: str, b: str, n_boot: int = 1000, seed: int = 0,
                   confidence: float = 0.95, min_runs: int = 3) -> PairAgreement:
    """Agreement of evaluations `a` (reference for tau_ap) and `b` over the topics every run has both for.

    Run level: tau between the runs' means over those topics (needs `min_runs` runs). Per topic: tau between
    the runs' scores on each topic, averaged over the topics where it is defined (not constant). CIs: percentile
    bootstrap over topics (resampled with replacement, `seed`ed).
    """
    topics = sorted(set.intersection(*[{t for t, v in r.topics.items() if a in v and b in v} for r in runs])
                    if runs else set())
    out = PairAgreement(a=a, b=b, n_runs=len(runs), n_topics=len(topics))
    if not topics:
        if len(runs) >= min_runs and all(_is_number(r.metrics.get(a)) and _is_number(r.metrics.get(b))
                                         for r in runs):
            # run-level only metrics (e.g. retrieval recall in metrics.json): no topics, so no CI
            ma = [float(r.metrics[a]) for r in runs]
            mb = [float(r.metrics[b]) for r in runs]
            out.tau_run, out.tau_ap_run = kendall_tau(ma, mb), tau_ap(ma, mb)
        return out
    xa = np.array([[r.topics[t][a] for t in topics] for r in runs])  # runs x topics
    xb = np.array([[r.topics[t][b] for t in topics] for r in runs])
    per_topic = np.array([kendall_tau(xa[:, j], xb[:, j]) for j in range(len(topics))]) if len(runs) >= 2 \
        else np.full(len(topics), math.nan)
    defined = ~np.isnan(per_topic)
    out.n_topics_defined = int(defined.sum())
    if defined.any():
        out.tau_topic = float(per_topic[defined].mean())
    run_level = len(runs) >= min_runs
    if run_level:
        ma, mb = xa.mean(axis=1), xb.mean(axis=1)
        out.tau_run, out.tau_ap_run = kendall_tau(ma, mb), tau_ap(ma, mb)
    rng = np.random.default_rng(seed)
    boot_run, boot_ap, boot_topic = [], [], []
    for _ in range(n_boot):
        idx = rng.integers(0, len(topics), len(topics))
        if run_level:
            ma, mb = xa[:, idx].mean(axis=1), xb[:, idx].mean(axis=1)
            boot_run.append(kendall_tau(ma, mb))
            boot_ap.append(tau_ap(ma, mb))
        sample = per_topic[idx]
        sample = sample[~np.isnan(sample)]
        boot_topic.append(float(sample.mean()) if len(sample) else math.nan)
    if run_level:
        out.tau_run_ci, out.tau_ap_run_ci = _ci(boot_run, confidence), _ci(boot_ap, confidence)
    if defined.any():
        out.tau_topic_ci = _ci(boot_topic, confidence)
    return out


def evaluations(runs: Sequence[Run], patterns: Sequence[str] = ()) -> list[str]:
    """Evaluations present in every run (on at least one topic), filtered by glob patterns, in pattern order.

    With patterns, numeric keys of every run's metrics.json match too (e.g. a retrieval recall that has no
    per-question value); those pairs get a run-level tau only.
    """
    if not runs:
        return []
    present = set.intersection(*[set().union(*r.topics.values()) if r.topics else set() for r in runs])
    if not patterns:
        return sorted(present)
    # named explicitly, run-level numbers from metrics.json take part too (run-level tau only)
    present |= set.intersection(*[{k for k, v in r.metrics.items() if _is_number(v)} for r in runs])
    out: list[str] = []
    for pattern in patterns:
        out.extend(sorted(e for e in present if fnmatch.fnmatchcase(e, pattern) and e not in out))
    return out


def agreement_table(runs: Sequence[Run], names: Sequence[str], reference: str | None = None, n_boot: int = 1000,
                    seed: int = 0, confidence: float = 0.95) -> list[PairAgreement]:
    """All pairs of `names` (first of a pair is tau_ap's reference), or `reference` against each other one."""
    if reference is not None:
        pairs = [(reference, n) for n in names if n != reference]
    else:
        pairs = list(itertools.combinations(names, 2))
    return [pair_agreement(runs, a, b, n_boot=n_boot, seed=seed, confidence=confidence) for a, b in pairs]


def _fmt(value: float) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def to_csv(rows: Sequence[PairAgreement]) -> str:
    buffer = io.StringIO()
    fields = list(PairAgreement("", "", 0, 0).row())
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if isinstance(v, float) and math.isnan(v) else v) for k, v in row.row().items()})
    return buffer.getvalue()


def to_markdown(rows: Sequence[PairAgreement], runs: Sequence[Run], confidence: float) -> str:
    pct = f"{100 * confidence:.0f}%"
    lines = ["# Agreement between evaluations", "",
             f"{len(runs)} runs: " + ", ".join(f"`{r.name}`" for r in runs), "",
             f"Kendall tau-b and tau_ap (first column = reference) between run rankings by mean score; per-topic "
             f"tau averaged over topics where defined; [{pct} bootstrap CI over topics].", "",
             "| eval A | eval B | runs | topics | tau (run) | tau_ap (run) | tau (per topic) | topics defined |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r.a} | {r.b} | {r.n_runs} | {r.n_topics} | {_fmt(r.tau_run)} [{_fmt(r.tau_run_ci[0])}, "
            f"{_fmt(r.tau_run_ci[1])}] | {_fmt(r.tau_ap_run)} [{_fmt(r.tau_ap_run_ci[0])}, "
            f"{_fmt(r.tau_ap_run_ci[1])}] | {_fmt(r.tau_topic)} [{_fmt(r.tau_topic_ci[0])}, "
            f"{_fmt(r.tau_topic_ci[1])}] | {r.n_topics_defined} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.agreement", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", type=Path, help="run folders or sweep folders")
    parser.add_argument("--out", type=Path, required=True, help="folder for agreement.csv and agreement.md")
    parser.add_argument("--metrics", nargs="*", default=[], help="glob patterns of evaluations (default: all)")
    parser.add_argument("--reference", default=None, help="compare only this evaluation with each other one")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples over topics")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--confidence", type=float, default=0.95)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    dirs = find_run_dirs(args.paths)
    if not dirs:
        parser.error("no run folders (with answers.jsonl) found")
    runs = [load_run(p, n) for p, n in zip(dirs, _run_names(dirs))]
    names = evaluations(runs, args.metrics)
    if args.reference is not None and args.reference not in names:
        names = [args.reference, *names] if args.reference in evaluations(runs) else names
        if args.reference not in names:
            parser.error(f"--reference {args.reference!r} is not an evaluation present in every run")
    if len(names) < 2:
        parser.error(f"need at least two evaluations present in every run, found {names}")
    if len(runs) < 3:
        log.warning("only %d runs: run-level tau needs at least 3 and is left empty", len(runs))
    rows = agreement_table(runs, names, reference=args.reference, n_boot=args.bootstrap, seed=args.seed,
                           confidence=args.confidence)
    atomic_write_text(args.out / "agreement.csv", to_csv(rows))
    atomic_write_text(args.out / "agreement.md", to_markdown(rows, runs, args.confidence))
    print(to_markdown(rows, runs, args.confidence))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
