"""Judges against people: any configured judge compared with human labels, per item, as a reviewer asks.

    python -m eval.meta                                            # RAGChecker's own scores: its Table 2 rows
    python -m eval.meta judge=[liverag,pairwise] llm=gemma3_270m   # + the embedded judges on the 280 pairs
    python -m eval.meta judge=[liverag] labels.limit=20 out_dir=/tmp/meta

Labels (`labels=ragchecker`, `eval.meta.RAGCheckerPairs`): RAGChecker's meta-evaluation set (Ru et al., NeurIPS
2024 D&B, amazon-science/RAGChecker `data/meta_evaluation/`): 280 pairs of RAG answers to one query, each pair
labelled by two annotators with how much better the second answer is (-2..2) in correctness, completeness and
overall. A judge scores both answers of a pair on its own scale; the comparison follows RAGChecker's
`meta_eval.py`: delta = score(answer 2) - score(answer 1), a NaN delta (a failed judgement) set to the median
delta, min-max scaled to [-2, 2], each pair's delta repeated for both annotators, then Pearson and Spearman
against the 2 x 280 human labels. The same code turns RAGChecker's own per-answer scores
(`baseline_ragchecker.json`) into its paper's Table 2 rows, and annotator 1 against annotator 2 into the
inter-annotator rows: the test suite asserts both to two decimals.

Writes `OUT/summary.md`, `OUT/correlations.csv`, `OUT/judged.jsonl` (every answer's judgement) and
`OUT/deltas.png` (judge delta against the mean human label per pair) atomically. The judges' LLM responses go to
the response cache, so a second run costs no LLM call.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hydra
import numpy as np
from hydra.errors import InstantiationException
from omegaconf import DictConfig, OmegaConf
from scipy.stats import pearsonr, spearmanr

from eval.leaderboard import LeaderboardRow, leaderboard_correlation
from rag.core.errors import ConfigError, DataError, MissingDataError, ServiceError
from rag.core.io import atomic_write_jsonl, atomic_write_text
from rag.judge.run import build_judges, evaluate_records
from rag.llm.factory import EngineFactory
from rag.records import AnswerRecord

log = logging.getLogger(__name__)
CLEAR_ERRORS = (ConfigError, DataError, MissingDataError, ServiceError)

LABEL_RANGE = (-2, 2)


@dataclass(frozen=True)
class HumanPair:
    """One pair of answers to a query and the annotators' labels: label > 0 says answer 2 is better."""

    pair_id: str
    dataset: str
    query: str
    gold_answer: str
    answers: tuple[str, str]
    systems: tuple[str, str]
    #: aspect -> one label per annotator
    labels: Mapping[str, tuple[int, ...]]


class RAGCheckerPairs:
    """RAGChecker's pairwise human labels: `human_labeled_data.json` (records 2i and 2i+1 are the two annotators
    of pair i) and, for the reference rows, `baseline_ragchecker.json` (RAGChecker's own per-answer scores)."""

    ASPECTS = ("correctness", "completeness", "overall")
    LABELS_FILE = "human_labeled_data.json"
    BASELINE_FILE = "baseline_ragchecker.json"

    def __init__(self, path: str | Path, limit: int | None = None, annotators: int = 2):
        self.path = Path(path)
        self.limit = limit
        self.annotators = annotators
        if limit is not None and limit < 1:
            raise ConfigError(f"labels.limit={limit}: must be at least 1 (or null for all pairs)")

    def _read(self, name: str) -> list[Any]:
        path = self.path / name
        if not path.is_file():
            raise MissingDataError(f"{path}: not found (labels.path names RAGChecker's data/meta_evaluation folder)")
        try:
            rows = json.loads(path.read_text(encoding="utf-8-sig"))
        except json.JSONDecodeError as err:
            raise DataError(f"{path}: not JSON ({err})") from None
        if not isinstance(rows, list):
            raise DataError(f"{path}: expected a JSON list of records, got {type(rows).__name__}")
        return rows

    def pairs(self) -> list[HumanPair]:
        """The labelled pairs in file order (the first `limit`), every record checked."""
        rows = self._read(self.LABELS_FILE)
        where = self.path / self.LABELS_FILE
        if len(rows) % self.annotators:
            raise DataError(f"{where}: {len(rows)} records is not a multiple of {self.annotators} annotators")
        out: list[HumanPair] = []
        for start in range(0, len(rows), self.annotators):
            group = rows[start:start + self.annotators]
            first = group[0]
            for k, row in enumerate(group):
                self._check(row, where, start + k, first)
            labels = {a: tuple(int(row[f"{a}_label"]) for row in group) for a in self.ASPECTS}
            out.append(HumanPair(
                pair_id=str(first["instance_id"]), dataset=str(first.get("dataset", "")), query=first["query"],
                gold_answer=first.get("gt_answer") or "",
                answers=(first["model1"]["response"], first["model2"]["response"]),
                systems=(first["model1"].get("model_name", ""), first["model2"].get("model_name", "")),
                labels=labels))
            if self.limit is not None and len(out) == self.limit:
                break
        return out

    def _check(self, row: Any, where: Path, index: int, first: Mapping[str, Any]) -> None:
        at = f"{where}: record {index}"
        if not isinstance(row, Mapping):
            raise DataError(f"{at}: expected an object, got {type(row).__name__}")
        missing = [k for k in ("instance_id", "query", "model1", "model2", *(f"{a}_label" for a in self.ASPECTS))
                   if k not in row]
        if missing:
            raise DataError(f"{at}: missing field(s) {', '.join(missing)}")
        if row["instance_id"] != first["instance_id"]:
            raise DataError(f"{at}: instance_id {row['instance_id']!r} where its pair's first record has "
                            f"{first['instance_id']!r} (records of one pair must be consecutive)")
        for side in ("model1", "model2"):
            if not isinstance(row[side], Mapping) or not isinstance(row[side].get("response"), str):
                raise DataError(f"{at}: {side}.response is not text")
        for aspect in self.ASPECTS:
            value = row[f"{aspect}_label"]
            if isinstance(value, bool) or not isinstance(value, int) or not LABEL_RANGE[0] <= value <= LABEL_RANGE[1]:
                raise DataError(f"{at}: {aspect}_label={value!r} is not an integer in {LABEL_RANGE[0]}..{LABEL_RANGE[1]}")

    def reference_scores(self) -> dict[str, dict[str, tuple[float, float]]]:
        """RAGChecker's own scores: `ragchecker/<aspect>` -> pair id -> (answer 1, answer 2); NaN where missing."""
        rows = self._read(self.BASELINE_FILE)
        out: dict[str, dict[str, tuple[float, float]]] = {f"ragchecker/{a}": {} for a in self.ASPECTS}
        for index, row in enumerate(rows):
            try:
                pair_id = str(row["instance_id"])
                for aspect in self.ASPECTS:
                    s1, s2 = (row[m]["ragchecker"].get(f"{aspect}_label") for m in ("model1", "model2"))
                    out[f"ragchecker/{aspect}"][pair_id] = (_float(s1), _float(s2))
            except (KeyError, TypeError, AttributeError) as err:
                raise DataError(f"{self.path / self.BASELINE_FILE}: record {index}: no model1/model2.ragchecker "
                                f"scores ({err})") from None
        return out


def _float(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


# -- the comparison -------------------------------------------------------------------------------------------
def scaled_deltas(scores: Sequence[tuple[float, float]]) -> np.ndarray:
    """RAGChecker's per-pair delta: score 2 - score 1, NaN -> the median delta, min-max scaled to [-2, 2]."""
    delta = np.array([s2 - s1 for s1, s2 in scores], dtype=float)
    if np.isnan(delta).all():
        return delta
    delta[np.isnan(delta)] = np.nanmedian(delta)
    low, high = delta.min(), delta.max()
    if high == low:
        return np.zeros_like(delta)
    return (delta - low) / (high - low) * 4 - 2


@dataclass
class Correlation:
    """One evaluation against one human aspect (or annotator against annotator)."""

    evaluation: str
    aspect: str
    n_pairs: int
    pearson: float
    spearman: float
    #: pairs whose delta was NaN (a failed judgement on either answer), set to the median as the protocol does
    n_failed: int = 0
    per_annotator: list[tuple[float, float]] = field(default_factory=list)
    #: why a coefficient is undefined ("" when defined): a judge that gives every answer the same score
    reason: str = ""

    def row(self) -> dict[str, Any]:
        out = {"evaluation": self.evaluation, "aspect": self.aspect, "n_pairs": self.n_pairs,
               "n_failed": self.n_failed, "pearson": self.pearson, "spearman": self.spearman,
               "reason": self.reason}
        for k, (p, s) in enumerate(self.per_annotator, start=1):
            out[f"pearson_annotator{k}"], out[f"spearman_annotator{k}"] = p, s
        return out


def _corr(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    if len(x) < 3 or np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan, math.nan
    return float(pearsonr(x, y)[0]), float(spearmanr(x, y)[0])


#: a score given to at least this share of the answers makes a correlation rest on the few others: said per row
NEAR_CONSTANT_SHARE = 0.95


def near_constant(scored: Sequence[float]) -> str:
    """A note when one score covers nearly every answer: the coefficient is defined but rests on a handful."""
    if not scored:
        return ""
    value, count = Counter(scored).most_common(1)[0]
    if count < len(scored) and count / len(scored) >= NEAR_CONSTANT_SHARE:
        return f"near-constant: {count} of {len(scored)} answers scored {value:g}"
    return ""


def correlate(evaluation: str, scores: Mapping[str, tuple[float, float]], pairs: Sequence[HumanPair],
              aspect: str) -> Correlation:
    """An evaluation's scaled deltas against every annotator's labels of `aspect` (pooled, and per annotator)."""
    missing = [p.pair_id for p in pairs if p.pair_id not in scores]
    if missing:
        raise DataError(f"{evaluation}: no scores for pair(s) {', '.join(missing[:5])}")
    raw = [scores[p.pair_id] for p in pairs]
    failed = sum(1 for s1, s2 in raw if math.isnan(s1) or math.isnan(s2))
    delta = scaled_deltas(raw)
    labels = np.array([p.labels[aspect] for p in pairs], dtype=float)  # pairs x annotators
    pooled = _corr(np.repeat(delta, labels.shape[1]), labels.reshape(-1))
    per = [_corr(delta, labels[:, k]) for k in range(labels.shape[1])]
    scored = [v for s in raw for v in s if not math.isnan(v)]
    values = sorted(set(scored))
    reason = f"constant: every answer scored {values[0]:g}" if len(values) == 1 else (
        "constant: no pair's scores differ" if np.all(delta == delta[0]) else near_constant(scored))
    return Correlation(evaluation, aspect, len(pairs), *pooled, n_failed=failed, per_annotator=per, reason=reason)


def inter_annotator(pairs: Sequence[HumanPair], aspect: str) -> Correlation:
    labels = np.array([p.labels[aspect] for p in pairs], dtype=float)
    return Correlation("annotator 1 vs annotator 2", aspect, len(pairs), *_corr(labels[:, 0], labels[:, 1]))


# -- system level --------------------------------------------------------------------------------------------
def human_margins(pairs: Sequence[HumanPair], aspect: str, annotator: int | None = None
                  ) -> dict[tuple[str, str], float]:
    """(system, pair id) -> how much the humans preferred that system's answer in the pair: +label for answer 2's
    system, -label for answer 1's, averaged over the annotators (or one annotator's). A system's mean margin over
    its pairs is its human leaderboard score."""
    out = {}
    for p in pairs:
        labels = p.labels[aspect] if annotator is None else (p.labels[aspect][annotator],)
        margin = float(np.mean(labels))
        out[(p.systems[0], p.pair_id)] = -margin
        out[(p.systems[1], p.pair_id)] = margin
    return out


def answer_scores(scores: Mapping[str, tuple[float, float]], pairs: Sequence[HumanPair]
                  ) -> dict[tuple[str, str], float]:
    """(system, pair id) -> the evaluation's score of that system's answer (its pointwise leaderboard cells)."""
    return {(p.systems[k], p.pair_id): scores[p.pair_id][k] for p in pairs if p.pair_id in scores for k in (0, 1)}


def leaderboard_rows(evaluation: str, scores: Mapping[str, tuple[float, float]], pairs: Sequence[HumanPair],
                     aspect: str, k: int, n_boot: int) -> list[LeaderboardRow]:
    """The evaluation's system ranking (mean score of each system's answers) against the humans' (mean margin)."""
    return leaderboard_correlation(evaluation, f"human {aspect}", answer_scores(scores, pairs),
                                   human_margins(pairs, aspect), k=k, n_boot=n_boot)


def inter_annotator_leaderboard(pairs: Sequence[HumanPair], aspect: str, k: int, n_boot: int
                                ) -> list[LeaderboardRow]:
    return leaderboard_correlation("annotator 2", f"annotator 1 {aspect}", human_margins(pairs, aspect, 1),
                                   human_margins(pairs, aspect, 0), k=k, n_boot=n_boot)


def reference_rows(source: RAGCheckerPairs, pairs: Sequence[HumanPair]) -> list[Correlation]:
    """RAGChecker's own metrics against the humans (each on its own aspect), then the inter-annotator rows."""
    scores = source.reference_scores()
    rows = [correlate(name, scores[name], pairs, name.split("/", 1)[1]) for name in scores]
    return rows + [inter_annotator(pairs, a) for a in source.ASPECTS]


# -- judging the pairs ----------------------------------------------------------------------------------------
#: the row of an evaluation judged against retrieved passages (faithfulness), which the pairs do not carry
NO_PASSAGES_REASON = "undefined: judges the answer against its retrieved passages, which these pairs do not carry"


def pair_records(pairs: Sequence[HumanPair]) -> list[AnswerRecord]:
    """Two answer records per pair (`<pair id>:1`, `<pair id>:2`) with the query and the reference answer; the
    pairs carry no retrieved passages, so an evaluation judged against them (faithfulness: a judge's
    `context_evaluations`) is undefined here and its rows say so."""
    return [AnswerRecord(id=f"{p.pair_id}:{k + 1}", question=p.query, answer=p.answers[k], gold_answer=p.gold_answer,
                         generator=p.systems[k]) for p in pairs for k in range(2)]


def judge_scores(records: Sequence[AnswerRecord]) -> dict[str, dict[str, tuple[float, float]]]:
    """`judge/<j>/<field>` -> pair id -> (answer 1, answer 2) from judged records; NaN for a failed judgement."""
    by_id = {r.id: r.judge_values() for r in records}
    names = sorted({name for values in by_id.values() for name in values})
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for name in names:
        table: dict[str, tuple[float, float]] = {}
        for record_id in by_id:
            pair_id, k = record_id.rsplit(":", 1)
            s1, s2 = table.get(pair_id, (math.nan, math.nan))
            value = by_id[record_id].get(name, math.nan)
            table[pair_id] = (value, s2) if k == "1" else (s1, value)
        out[name] = table
    return out


@dataclass
class MetaResult:
    pairs: list[HumanPair]
    rows: list[Correlation]
    judged: list[AnswerRecord] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    #: system-level rows (every evaluation's leaderboard against the humans')
    leaderboard: list[LeaderboardRow] = field(default_factory=list)

    def markdown(self) -> str:
        return to_markdown(self)

    def write(self, out_dir: Path) -> None:
        write(self, out_dir)


def meta_evaluate(cfg: DictConfig, factory: EngineFactory | None = None) -> Any:
    """The comparison the label source defines (`labels=trec_nuggets`, `labels=qrels`: its own `evaluate`), or
    RAGChecker's pairs: reference rows, then every configured judge's fields against every human aspect, per pair
    and per system. The result has `markdown()` and `write(out_dir)`."""
    source = hydra.utils.instantiate(cfg.labels)
    if hasattr(source, "evaluate"):
        return source.evaluate(cfg, factory)
    pairs = source.pairs()
    k, n_boot = int(cfg.get("leaderboard", {}).get("k", 5)), int(cfg.get("leaderboard", {}).get("n_boot", 1000))
    result = MetaResult(pairs=pairs, rows=reference_rows(source, pairs))
    for name, scores in source.reference_scores().items():
        result.leaderboard += leaderboard_rows(name, scores, pairs, name.split("/", 1)[1], k, n_boot)
    for aspect in source.ASPECTS:
        result.leaderboard += inter_annotator_leaderboard(pairs, aspect, k, n_boot)
    judges = build_judges(cfg.judge) if cfg.get("judge") else []
    if not judges:
        return result
    if OmegaConf.select(cfg, "llm", default=None) is None:
        raise ConfigError("judge: the judges need an engine; name it with llm=<conf/llm name>")
    out_dir, cache_dir = Path(str(cfg.out_dir)), Path(str(cfg.paths.cache_dir))
    records = pair_records(pairs)
    own = factory is None
    engines = factory or EngineFactory(cache_dir, cache_enabled=bool(OmegaConf.select(
        cfg, "cache.llm_responses", default=True)))
    start = time.perf_counter()
    try:
        result.metrics = evaluate_records(cfg.judge, records, out_dir, cache_dir, engines)
    finally:
        if own:
            engines.close()
    result.seconds = time.perf_counter() - start
    result.judged = records
    undefined = [name for judge in judges for name in judge.context_evaluations()]
    systems = len({s for p in pairs for s in p.systems})
    for name in undefined:  # a faithfulness judge with no passages to judge against measures nothing here
        result.rows += [Correlation(name, aspect, len(pairs), math.nan, math.nan, reason=NO_PASSAGES_REASON)
                        for aspect in source.ASPECTS]
        result.leaderboard += [LeaderboardRow(name, f"human {aspect}", "run", systems, 0, {}, {}, NO_PASSAGES_REASON)
                               for aspect in source.ASPECTS]
    for name, scores in judge_scores(records).items():
        if name in undefined:
            continue
        result.rows += [correlate(name, scores, pairs, aspect) for aspect in source.ASPECTS]
        for aspect in source.ASPECTS:
            result.leaderboard += leaderboard_rows(name, scores, pairs, aspect, k, n_boot)
    return result


# -- output ---------------------------------------------------------------------------------------------------
def _pct(value: float) -> str:
    return "-" if math.isnan(value) else f"{100 * value:.2f}"


def to_csv(rows: Sequence[Correlation | LeaderboardRow]) -> str:
    buffer = io.StringIO()
    fields = list(dict.fromkeys(k for r in rows for k in r.row()))
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: ("" if isinstance(v, float) and math.isnan(v) else v) for k, v in r.row().items()})
    return buffer.getvalue()


def _with_ci(row: LeaderboardRow, name: str) -> str:
    value = row.values.get(name, math.nan)
    if math.isnan(value):
        return "-"
    lo, hi = row.intervals.get(name, (math.nan, math.nan))
    return f"{100 * value:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]" if not math.isnan(lo) else f"{100 * value:.1f}"


def to_markdown(result: MetaResult) -> str:
    lines = ["# Judges against human labels (RAGChecker pairwise protocol)", "",
             f"{len(result.pairs)} pairs, two annotators each. Pearson and Spearman x 100 of the judge's scaled score "
             "delta (answer 2 - answer 1, NaN to the median, min-max to [-2, 2]) against every annotator's label; "
             "`failed`: pairs with a failed judgement.", "",
             "| evaluation | human label | pairs | failed | Pearson | Spearman | undefined because / note |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r.evaluation} | {r.aspect} | {r.n_pairs} | {r.n_failed} | {_pct(r.pearson)} | {_pct(r.spearman)} "
              f"| {r.reason} |" for r in result.rows]
    if result.leaderboard:
        lines += ["", "## Leaderboard: systems ranked by each evaluation against the humans", "",
                  f"{len({s for p in result.pairs for s in p.systems})} systems. An evaluation's leaderboard is "
                  "the mean of its scores of each system's answers; the humans' is each system's mean margin "
                  "(+label when its answer was preferred, averaged over annotators). Run level: tau-b, Spearman, "
                  "tau_ap_b and Kendall@k (tau-b over the humans' top k) of the two system rankings; per topic: "
                  "mean tau-b over topics with at least 3 systems; pooled: tau-b over every (system, topic) cell. "
                  "x 100, with 95% bootstrap intervals over topics.", "",
                  "| evaluation | reference | level | tau-b | Spearman | tau_ap_b | Kendall@k | undefined because / note |",
                  "|---|---|---|---|---|---|---|---|"]
        hidden = [r for r in result.leaderboard if r.level == "topic" and r.reason.startswith("no topic has")]
        if hidden:
            lines[-2:-2] = [f"Per-topic rows are left out here ({len(hidden)} in leaderboard.csv, undefined): every "
                            "topic has two systems, one pair of answers.", ""]
        for r in result.leaderboard:
            if r in hidden:
                continue
            kat = next((v for name, v in r.values.items() if name.startswith("kendall_at_")), math.nan)
            kname = next((name for name in r.values if name.startswith("kendall_at_")), "")
            lines.append(f"| {r.evaluation} | {r.reference} | {r.level} | {_with_ci(r, 'tau_b')} | "
                         f"{_with_ci(r, 'spearman')} | {_with_ci(r, 'tau_ap_b')} | "
                         f"{_with_ci(r, kname) if kname else _pct(kat)} | {r.reason} |")
    if result.judged:
        calls = result.metrics.get("eval/llm_calls", 0) or 0
        hits = result.metrics.get("eval/llm_cache_hits", 0) or 0
        n = len(result.judged)
        lines += ["", f"Judged {n} answers in {result.seconds:.1f} s ({result.seconds / n:.2f} s per answer): "
                      f"{calls} LLM calls ({calls / n:.2f} per answer), {hits} answered from the response cache."]
    return "\n".join(lines) + "\n"


def deltas_png(result: MetaResult, path: Path) -> Path | None:
    """Scatter of each judge field's scaled delta against the pair's mean human label (overall)."""
    scores = judge_scores(result.judged)
    judged = [r for r in result.rows if r.evaluation in scores and r.aspect == "overall"]
    if not judged:
        return None
    from matplotlib.figure import Figure

    human = np.array([np.mean(p.labels["overall"]) for p in result.pairs])
    fig = Figure(figsize=(4 * len(judged), 3.6), layout="constrained")
    for ax, row in zip(fig.subplots(1, len(judged), squeeze=False)[0], judged):
        delta = scaled_deltas([scores[row.evaluation][p.pair_id] for p in result.pairs])
        ax.scatter(human, delta, s=10, alpha=0.5)
        ax.set_xlabel("mean human overall label (answer 2 better > 0)")
        ax.set_ylabel("judge delta, scaled")
        ax.set_title(f"{row.evaluation}\nPearson {_pct(row.pearson)}, Spearman {_pct(row.spearman)}", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    tmp.replace(path)
    return path


def write(result: MetaResult, out_dir: Path) -> None:
    atomic_write_text(out_dir / "summary.md", to_markdown(result))
    atomic_write_text(out_dir / "correlations.csv", to_csv(result.rows))
    if result.leaderboard:
        atomic_write_text(out_dir / "leaderboard.csv", to_csv(result.leaderboard))
    if result.judged:
        atomic_write_jsonl(out_dir / "judged.jsonl", [r.to_json() for r in result.judged])
        deltas_png(result, out_dir / "deltas.png")


def scalars(result: Any) -> dict[str, float]:
    """W&B summary scalars: per-item coefficients `meta/<evaluation>/<aspect>/{pearson,spearman}`, per-system ones
    `meta/leaderboard/<evaluation>/<reference>/<level>/<coefficient>` and, for label files, `meta/labels/<stat>`."""
    out: dict[str, float] = {}
    for r in getattr(result, "rows", []):
        out.update({f"meta/{r.evaluation}/{r.aspect}/pearson": r.pearson, f"meta/{r.evaluation}/{r.aspect}/spearman":
                    r.spearman})
    for r in getattr(result, "leaderboard", []):
        out.update({f"meta/leaderboard/{r.evaluation}/{r.reference}/{r.level}/{name}": value
                    for name, value in r.values.items()})
    for source in (getattr(result, "labels", None), getattr(result, "stats", None)):
        out.update({f"meta/labels/{k}": v for k, v in (source or {}).items() if isinstance(v, (int, float))})
    return {k.replace(" ", "_"): float(v) for k, v in out.items() if not math.isnan(float(v))}


def _labels_choice() -> str:
    """The `labels` option the command composed (ragchecker, trec_nuggets, qrels); "labels" outside Hydra."""
    from hydra.core.hydra_config import HydraConfig

    return str(HydraConfig.get().runtime.choices.get("labels")) if HydraConfig.initialized() else "labels"


def log_wandb(result: Any, cfg: DictConfig, out_dir: Path) -> str:
    """One W&B run (the `logger` node's project, entity, mode; offline by default) with the scalars, the tables of
    `out_dir` (*.csv) and its figures (*.png); returns the run id, also written to `out_dir/wandb_run.json`."""
    import os

    import wandb

    from rag.core.secrets import redact

    node = OmegaConf.to_container(cfg.logger, resolve=True)
    os.environ.setdefault("WANDB_SILENT", "true")
    run = wandb.init(project=node.get("project") or "ragtifier", entity=node.get("entity"),
                     mode=node.get("mode") or "offline", dir=str(node.get("dir") or out_dir), job_type="meta",
                     name=f"meta-{_labels_choice()}",
                     config=redact(OmegaConf.to_container(cfg, resolve=False)), reinit="finish_previous")
    try:
        values = scalars(result)
        run.summary.update(values)
        payload: dict[str, Any] = {}
        for table in sorted(out_dir.glob("*.csv")):
            reader = list(csv.reader(io.StringIO(table.read_text(encoding="utf-8"))))
            if len(reader) > 1:
                payload[f"meta/{table.stem}"] = wandb.Table(columns=reader[0], data=reader[1:])
        payload.update({f"meta/{png.stem}": wandb.Image(str(png)) for png in sorted(out_dir.glob("*.png"))})
        run.log(payload)
        atomic_write_text(out_dir / "wandb_run.json", json.dumps({"id": run.id, "mode": node.get("mode") or "offline"}) + "\n")
        return run.id
    finally:
        run.finish()


@hydra.main(version_base="1.3", config_path="../conf", config_name="meta")
def main(cfg: DictConfig) -> None:
    try:
        try:
            result = meta_evaluate(cfg)
        except InstantiationException as err:  # a constructor refused its config: its own one-line error
            raise (err.__cause__ if isinstance(err.__cause__, CLEAR_ERRORS) else err) from None
        result.write(Path(str(cfg.out_dir)))
        if str(OmegaConf.select(cfg, "logger._target_", default="")).endswith("WandbLogger"):  # logger=wandb
            log.info("W&B run %s", log_wandb(result, cfg, Path(str(cfg.out_dir))))
    except CLEAR_ERRORS as err:
        log.error("%s: %s", type(err).__name__, err)
        raise SystemExit(2) from None
    print(result.markdown(), flush=True)


if __name__ == "__main__":
    from rag.core.entry import guard_command_line

    guard_command_line("meta")
    main()
