"""Agreement between evaluations: Kendall's tau-b and tau_ap, run-level and per topic, with bootstrap CIs.

The AutoNuggetizer paper (section 5) compares evaluations by Kendall's tau between the system rankings they
induce (run level) and by the mean over topics of per-topic tau. We do the same for per-answer evaluations read
from run folders (`rag.records.AnswerRecord.evaluation_values`: `judge/<judge>/<field>`, `nuggets/<metric>`,
`scores/<name>`), add tau_ap (top-weighted), and bootstrap both over topics for confidence intervals.

By default every judge field is paired with every nugget metric (the registry's per-answer kinds; counters
never take part): the judge x nugget-metric matrix. Where a side has no variance over the runs, or there are
fewer than `MIN_RUNS` runs, tau-b and tau_ap are undefined: NaN with a `reason`, never a perfect 1.0.

    python -m eval.agreement SWEEP_DIR_OR_RUN_DIRS... --out DIR [--rows 'judge/*'] [--cols 'nuggets/*']
    python -m eval.agreement ... --metrics 'scores/f1' 'nuggets/vital_strict'   # all pairs of these instead

A folder holding `answers.jsonl` is a run; any other folder is searched recursively for runs.
Writes DIR/agreement.csv (every pair) and DIR/agreement.md (the matrix first), atomically.
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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import kendalltau

from rag.core.io import atomic_write_text
from rag.metrics.registry import REGISTRY
from rag.records import load_answer_records

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
    """AP correlation tau_ap of the ranking by `candidate` scores against the ranking by `reference` scores.

    Source: E. Yilmaz, J. A. Aslam, S. Robertson, "A New Rank Correlation Coefficient for Information
    Retrieval", SIGIR 2008, eq. (2):

        tau_ap = 2 / (N - 1) * sum_{i=2..N} C(i) / (i - 1)  -  1

    where the items are taken in the candidate's order (highest score first) and C(i) is the number of items
    above rank i that the reference also places above the item at rank i. Unlike tau, a swap near the top costs
    more than a swap near the bottom; it is not symmetric (the reference is the "truth").

    Ties (the paper assumes none; our extension): a pair tied in both rankings counts as correct, a pair tied in
    exactly one counts 1/2; the candidate's ties are ordered by reference score so the result does not depend on
    input order. Without ties this is exactly the published formula. NaN for N < 2 or a constant side (a ranking
    without any order agrees with nothing; tau-b is undefined there too).
    """
    ref = np.asarray(reference, dtype=float)
    cand = np.asarray(candidate, dtype=float)
    n = len(ref)
    if n != len(cand):
        raise ValueError("tau_ap: rankings of different lengths")
    if n < 2 or _constant(ref) or _constant(cand):
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
    for record in load_answer_records(path / "answers.jsonl"):
        run.topics[record.id] = record.evaluation_values()
    return run


def _run_names(paths: Sequence[Path]) -> list[str]:
    """Short unique names: paths relative to their common folder."""
    if len(paths) == 1:
        return [paths[0].name]
    common = Path(*[parts[0] for parts in zip(*(p.parts for p in paths)) if len(set(parts)) == 1])
    return [str(p.relative_to(common)) if p != common else p.name for p in paths]


# -- agreement ------------------------------------------------------------------------------------------------
NAN2 = (math.nan, math.nan)


@dataclass
class PairAgreement:
    """Agreement of evaluation `a` (rows; tau_ap's reference) with `b` over the same runs and topics."""

    a: str
    b: str
    n_runs: int
    n_topics: int
    tau_b: float = math.nan
    tau_b_ci: tuple[float, float] = NAN2
    tau_ap: float = math.nan
    tau_ap_ci: tuple[float, float] = NAN2
    tau_topic: float = math.nan
    tau_topic_ci: tuple[float, float] = NAN2
    n_topics_defined: int = 0
    #: why the run-level tau is undefined ("" when it is defined)
    reason: str = ""

    def row(self) -> dict[str, Any]:
        return {"eval_a": self.a, "eval_b": self.b, "n_runs": self.n_runs, "n_topics": self.n_topics,
                "tau_b": self.tau_b, "tau_b_lo": self.tau_b_ci[0], "tau_b_hi": self.tau_b_ci[1],
                "tau_ap": self.tau_ap, "tau_ap_lo": self.tau_ap_ci[0], "tau_ap_hi": self.tau_ap_ci[1],
                "tau_topic": self.tau_topic, "tau_topic_lo": self.tau_topic_ci[0],
                "tau_topic_hi": self.tau_topic_ci[1], "n_topics_defined": self.n_topics_defined,
                "reason": self.reason}


def _ci(samples: Sequence[float], confidence: float) -> tuple[float, float]:
    values = np.asarray([s for s in samples if not math.isnan(s)], dtype=float)
    if len(values) == 0:
        return NAN2
    alpha = (1 - confidence) / 2
    return float(np.quantile(values, alpha)), float(np.quantile(values, 1 - alpha))


def _reason(ma: Sequence[float], mb: Sequence[float], a: str, b: str) -> str:
    sides = [name for name, values in ((a, ma), (b, mb)) if _constant(values)]
    return f"{CONSTANT}: {' and '.join(sides)}" if sides else ""


def pair_agreement(runs: Sequence[Run], a: str, b: str, n_boot: int = 1000, seed: int = 0,
                   confidence: float = 0.95, min_runs: int = MIN_RUNS) -> PairAgreement:
    """Agreement of evaluations `a` (reference for tau_ap) and `b` over the topics every run has both for.

    Run level: tau between the runs' means over those topics (needs `min_runs` runs and variance on both sides,
    else NaN with `reason`). Per topic: tau between the runs' scores on each topic, averaged over the topics
    where it is defined. CIs: percentile bootstrap over topics (resampled with replacement, `seed`ed), over the
    resamples where tau is defined.
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
            out.reason = _reason(ma, mb, a, b)
            if not out.reason:
                out.tau_b, out.tau_ap = kendall_tau(ma, mb), tau_ap(ma, mb)
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
        out.tau_b, out.tau_ap = kendall_tau(ma, mb), tau_ap(ma, mb)
    rng = np.random.default_rng(seed)
    boot_run, boot_ap, boot_topic = [], [], []
    for _ in range(n_boot):
        idx = rng.integers(0, len(topics), len(topics))
        if run_level:
            sa, sb = xa[:, idx].mean(axis=1), xb[:, idx].mean(axis=1)
            boot_run.append(kendall_tau(sa, sb))
            boot_ap.append(tau_ap(sa, sb))
        sample = per_topic[idx]
        sample = sample[~np.isnan(sample)]
        boot_topic.append(float(sample.mean()) if len(sample) else math.nan)
    if run_level:
        out.tau_b_ci, out.tau_ap_ci = _ci(boot_run, confidence), _ci(boot_ap, confidence)
    if defined.any():
        out.tau_topic_ci = _ci(boot_topic, confidence)
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
    present |= set.intersection(*[{k for k, v in r.metrics.items() if _is_number(v)} for r in runs])
    out: list[str] = []
    for pattern in patterns:
        out.extend(sorted(e for e in present if fnmatch.fnmatchcase(e, pattern) and e not in out))
    return out


def default_axes(runs: Sequence[Run]) -> tuple[list[str], list[str]]:
    """Matrix rows (judge fields) and columns (nugget metrics): per-answer kinds in the registry, never counters.

    Without nugget metrics the answer string metrics (scores/f1, scores/em) stand in as columns; without judge
    fields, rows are those answer metrics; so a sweep always gets the table its evaluations allow.
    """
    present = [e for e in present_evaluations(runs) if evaluation_kind(e) == "per_answer"]
    judges = [e for e in present if e.startswith("judge/")]
    nuggets = [e for e in present if e.startswith("nuggets/")]
    answers = [e for e in present if e.startswith("scores/")]
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

    def cell(self, a: str, b: str) -> PairAgreement | None:
        return next((p for p in self.pairs if p.a == a and p.b == b), None)

    @property
    def matrix_pairs(self) -> list[PairAgreement]:
        return [p for p in (self.cell(a, b) for a in self.rows for b in self.cols) if p is not None]


def agreement_matrix(runs: Sequence[Run], rows: Sequence[str] | None = None, cols: Sequence[str] | None = None,
                     n_boot: int = 1000, seed: int = 0, confidence: float = 0.95) -> Agreement:
    """Every row evaluation (tau_ap's reference) against every column evaluation."""
    if rows is None or cols is None:
        default_rows, default_cols = default_axes(runs)
        rows = default_rows if rows is None else rows
        cols = default_cols if cols is None else cols
    pairs = [pair_agreement(runs, a, b, n_boot=n_boot, seed=seed, confidence=confidence)
             for a in rows for b in cols if a != b]
    return Agreement(list(runs), list(rows), list(cols), pairs, confidence)


def agreement_table(runs: Sequence[Run], names: Sequence[str], reference: str | None = None, n_boot: int = 1000,
                    seed: int = 0, confidence: float = 0.95) -> list[PairAgreement]:
    """All pairs of `names` (first of a pair is tau_ap's reference), or `reference` against each other one."""
    if reference is not None:
        pairs = [(reference, n) for n in names if n != reference]
    else:
        pairs = list(itertools.combinations(names, 2))
    return [pair_agreement(runs, a, b, n_boot=n_boot, seed=seed, confidence=confidence) for a, b in pairs]


# -- output ---------------------------------------------------------------------------------------------------
def _fmt(value: float | None) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def _with_ci(value: float, ci: tuple[float, float]) -> str:
    if math.isnan(value):
        return "NaN"
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


def matrix_markdown(agreement: Agreement, heading: str = "##") -> str:
    """The judge x nugget-metric matrix: tau-b and tau_ap with CIs, runs and topics, and what is undefined."""
    if not agreement.rows or not agreement.cols or not agreement.pairs:
        return ""
    pct = f"{100 * agreement.confidence:.0f}%"
    n_runs = len(agreement.runs)
    lines = [f"{heading} Agreement: {' / '.join(sorted({r.split('/')[0] for r in agreement.rows}))} x "
             f"{' / '.join(sorted({c.split('/')[0] for c in agreement.cols}))}", "",
             f"Kendall tau-b and tau_ap (the row is tau_ap's reference) between the rankings of {n_runs} runs by "
             f"their mean per-answer scores, [{pct} bootstrap CI over topics]. A run-level tau needs at least "
             f"{MIN_RUNS} runs and variance on both sides; otherwise it is NaN, with the reason below.", ""]
    header = "| | " + " | ".join(short(c) for c in agreement.cols) + " |"
    sep = "|---|" + "---|" * len(agreement.cols)
    for title, get in (("tau-b", lambda p: _with_ci(p.tau_b, p.tau_b_ci)),
                       ("tau_ap", lambda p: _with_ci(p.tau_ap, p.tau_ap_ci)),
                       ("runs / topics", lambda p: f"{p.n_runs} / {p.n_topics}")):
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
    return "\n".join(lines)


def to_markdown(agreement: Agreement) -> str:
    runs = agreement.runs
    lines = ["# Agreement between evaluations", "",
             f"{len(runs)} runs: " + ", ".join(f"`{r.name}`" for r in runs), ""]
    matrix = matrix_markdown(agreement)
    if matrix:
        lines.append(matrix)
    in_matrix = {id(p) for p in agreement.matrix_pairs}
    extra = [p for p in agreement.pairs if id(p) not in in_matrix]
    if extra:
        lines += ["## Other pairs", "", "| eval A | eval B | runs | topics | tau-b | tau_ap | tau per topic | "
                  "reason |", "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {p.a} | {p.b} | {p.n_runs} | {p.n_topics} | {_with_ci(p.tau_b, p.tau_b_ci)} | "
                  f"{_with_ci(p.tau_ap, p.tau_ap_ci)} | {_with_ci(p.tau_topic, p.tau_topic_ci)} | {p.reason} |"
                  for p in extra]
        lines.append("")
    lines.append("Every pair, with per-topic tau: `agreement.csv`.")
    return "\n".join(lines) + "\n"


def scalars(agreement: Agreement) -> dict[str, float | int]:
    """`agreement/<judge>/<field>/<nugget metric>/<stat>` for the matrix's defined judge x nugget cells."""
    out: dict[str, float | int] = {}
    for p in agreement.matrix_pairs:
        if not (p.a.startswith("judge/") and p.b.startswith("nuggets/")):
            continue
        prefix = f"agreement/{short(p.a)}/{short(p.b)}/"
        out[prefix + "n_runs"] = p.n_runs
        out[prefix + "n_topics"] = p.n_topics
        for stat, value, ci in (("tau_b", p.tau_b, p.tau_b_ci), ("tau_ap", p.tau_ap, p.tau_ap_ci),
                                ("tau_topic", p.tau_topic, p.tau_topic_ci)):
            if not math.isnan(value):
                out[prefix + stat] = value
                if not math.isnan(ci[0]):
                    out[prefix + stat + "_lo"], out[prefix + stat + "_hi"] = ci
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
    ax.set_title(f"Agreement over {len(agreement.runs)} runs")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.agreement", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", type=Path, help="run folders or sweep folders")
    parser.add_argument("--out", type=Path, required=True, help="folder for agreement.csv and agreement.md")
    parser.add_argument("--rows", nargs="*", default=None, help="glob patterns of row evaluations (judges)")
    parser.add_argument("--cols", nargs="*", default=None, help="glob patterns of column evaluations (nuggets)")
    parser.add_argument("--metrics", nargs="*", default=[], help="all pairs of these evaluations instead")
    parser.add_argument("--reference", default=None, help="with --metrics: only this one against each other")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples over topics")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--confidence", type=float, default=0.95)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    dirs = find_run_dirs(args.paths)
    if not dirs:
        parser.error("no run folders (with answers.jsonl) found")
    runs = [load_run(p, n) for p, n in zip(dirs, _run_names(dirs))]
    if len(runs) < MIN_RUNS:
        log.warning("only %d runs: a run-level tau needs at least %d and is NaN", len(runs), MIN_RUNS)
    if args.metrics:
        names = evaluations(runs, args.metrics)
        if args.reference is not None and args.reference not in names:
            parser.error(f"--reference {args.reference!r} is not an evaluation present in every run")
        if len(names) < 2:
            parser.error(f"need at least two evaluations present in every run, found {names}")
        pairs = agreement_table(runs, names, reference=args.reference, n_boot=args.bootstrap, seed=args.seed,
                                confidence=args.confidence)
        agreement = Agreement(runs, [], [], pairs, args.confidence)
    else:
        rows = evaluations(runs, args.rows) if args.rows else None
        cols = evaluations(runs, args.cols) if args.cols else None
        agreement = agreement_matrix(runs, rows, cols, n_boot=args.bootstrap, seed=args.seed,
                                     confidence=args.confidence)
        if not agreement.pairs:
            parser.error("no pair of per-answer evaluations present in every run (judges x nuggets by default)")
    atomic_write_text(args.out / "agreement.csv", to_csv(agreement.pairs))
    atomic_write_text(args.out / "agreement.md", to_markdown(agreement))
    heatmap_png(agreement, args.out / "agreement.png")
    print(to_markdown(agreement))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
