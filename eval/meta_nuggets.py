"""Nugget assignment against people: TREC RAG assignment files with human labels (`labels=trec_nuggets`).

Input: JSONL in castorini/nuggetizer's assign shape, as NIST's TREC 2024 RAG assessments are distributed, one
answer per line: `{qid, query, run_id, answer_text, nuggets: [{text, importance: vital|okay, assignment:
support|partial_support|not_support}]}` (`assignment` is the assessor's label). The composed nugget judge
(`judge=[nuggets]`, with its `assignment` mode and settings) assigns the same nuggets to the same answers, and the
two are compared as AutoNuggetizer's paper does (sections 5.2-5.3):

- per nugget: Cohen's kappa and raw agreement over the three labels (and over support vs not), the confusion matrix
  (assessor rows, judge columns; AutoNuggetizer Fig. 6), the agreement of always answering `not_support` as the
  floor; unreadable judge labels are scored as `not_support` (as nuggetizer scores them) and counted;
- per system: each nugget score (Vital Strict, All Strict, Vital, All, nuggetizer's formulas) per (run, topic)
  from the judge's labels against the same score from the assessors', as leaderboard correlations at run level,
  per topic and pooled (`eval.leaderboard`), with bootstrap intervals over topics.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from eval.leaderboard import LeaderboardRow, leaderboard_correlation
from eval.nuggets import ASSIGNMENTS, IMPORTANCE, SCORE_NAMES, AutoNuggetizer, nugget_scores
from rag.core.errors import ConfigError, DataError, MissingDataError
from rag.core.io import atomic_write_jsonl, atomic_write_text, iter_jsonl_numbered
from rag.judge.run import build_nuggetizer
from rag.llm.factory import EngineFactory


@dataclass(frozen=True)
class AssessedAnswer:
    qid: str
    query: str
    run_id: str
    answer: str
    #: [{text, importance, assignment (the assessor's)}]
    nuggets: tuple[Mapping[str, str], ...]


class NuggetAssignmentLabels:
    """Human nugget assignments in nuggetizer's assign JSONL shape (module docstring); every row checked."""

    def __init__(self, path: str | Path, limit: int | None = None):
        self.path = Path(path)
        self.limit = limit
        if limit is not None and limit < 1:
            raise ConfigError(f"labels.limit={limit}: must be at least 1 (or null for every answer)")

    def answers(self) -> list[AssessedAnswer]:
        if not self.path.is_file():
            raise MissingDataError(f"{self.path}: not found (labels.path names a JSONL file of assessed answers)")
        out: list[AssessedAnswer] = []
        seen: set[tuple[str, str]] = set()
        for line_no, row in iter_jsonl_numbered(self.path):
            out.append(self._row(row, line_no, seen))
            if self.limit is not None and len(out) == self.limit:
                break
        if not out:
            raise DataError(f"{self.path}: no assessed answers")
        return out

    def _row(self, row: dict[str, Any], line_no: int, seen: set[tuple[str, str]]) -> AssessedAnswer:
        at = f"{self.path}:{line_no}"
        missing = [k for k in ("qid", "query", "run_id", "answer_text", "nuggets") if k not in row]
        if missing:
            raise DataError(f"{at}: missing field(s) {', '.join(missing)}")
        empty = [k for k in ("qid", "run_id") if row[k] is None or not str(row[k]).strip()]
        if empty:  # `qid: null` would otherwise be read as a topic called "None"
            raise DataError(f"{at}: {' and '.join(empty)} {'is' if len(empty) == 1 else 'are'} null or empty")
        key = (str(row["run_id"]), str(row["qid"]))
        if key in seen:
            raise DataError(f"{at}: run {key[0]!r} has a second answer for topic {key[1]!r}")
        seen.add(key)
        if not isinstance(row["nuggets"], list) or not row["nuggets"]:
            raise DataError(f"{at}: nuggets must be a non-empty list")
        nuggets = []
        for k, n in enumerate(row["nuggets"]):
            if not isinstance(n, dict) or not isinstance(n.get("text"), str) or not n["text"].strip():
                raise DataError(f"{at}: nugget {k} has no text")
            if n.get("importance") not in IMPORTANCE:
                raise DataError(f"{at}: nugget {k} importance={n.get('importance')!r}, not one of {', '.join(IMPORTANCE)}")
            if n.get("assignment") not in ASSIGNMENTS:
                raise DataError(f"{at}: nugget {k} assignment={n.get('assignment')!r}, not one of "
                                f"{', '.join(ASSIGNMENTS)}")
            nuggets.append({"text": n["text"], "importance": n["importance"], "assignment": n["assignment"]})
        return AssessedAnswer(str(row["qid"]), str(row["query"]), str(row["run_id"]), str(row["answer_text"] or ""),
                              tuple(nuggets))

    def evaluate(self, cfg: DictConfig, factory: EngineFactory | None = None) -> NuggetMetaResult:
        """Assign every answer's nuggets with the composed nugget judge's settings (`judge.nuggetizer`) and compare
        with the assessors."""
        answers = self.answers()
        node = OmegaConf.select(cfg, "judge.nuggets", default=None)
        if node is None:
            raise ConfigError("labels=trec_nuggets compares the nugget judge with the assessors: compose it with "
                              "judge=[nuggets] (its assignment mode and settings are what is measured)")
        if OmegaConf.select(cfg, "llm", default=None) is None:
            raise ConfigError("judge: the nugget judge needs an engine; name it with llm=<conf/llm name>")
        nuggetizer = build_nuggetizer(cfg.judge, ["nuggets"])  # its assignment mode and settings are measured
        if not isinstance(nuggetizer, AutoNuggetizer):
            raise ConfigError("judge.nuggetizer._target_: labels=trec_nuggets measures eval.nuggets.AutoNuggetizer")
        cache_dir = Path(str(cfg.paths.cache_dir))
        own = factory is None
        engines = factory or EngineFactory(cache_dir, cache_enabled=bool(OmegaConf.select(
            cfg, "cache.llm_responses", default=True)))
        start = time.perf_counter()
        try:
            engine = engines.get(cfg.judge.nuggets.llm)
            before = engine.usage.calls
            assigned = nuggetizer.assign(engine, [(a.query, a.answer, list(a.nuggets)) for a in answers])
            calls = engine.usage.calls - before
        finally:
            if own:
                engines.close()
        leaderboard_cfg = cfg.get("leaderboard", {})
        return compare_assignments(answers, [a.nuggets for a in assigned], mode=nuggetizer.assignment,
                                   k=int(leaderboard_cfg.get("k", 5)), n_boot=int(leaderboard_cfg.get("n_boot", 1000)),
                                   seconds=time.perf_counter() - start, llm_calls=calls)


@dataclass
class NuggetMetaResult:
    answers: list[AssessedAnswer]
    judged: list[list[dict[str, Any]]]
    mode: str
    labels: dict[str, Any]
    leaderboard: list[LeaderboardRow] = field(default_factory=list)
    seconds: float = 0.0
    llm_calls: int = 0

    def markdown(self) -> str:
        lab = self.labels
        lines = [f"# Nugget assignment against assessors ({lab['n_nuggets']} nuggets of {len(self.answers)} answers, "
                 f"assignment mode `{self.mode}`)", "",
                 "| labels | Cohen's kappa | agreement | always not_support |", "|---|---|---|---|",
                 f"| support / partial_support / not_support | {lab['kappa']:.3f} | {lab['agreement']:.3f} | "
                 f"{lab['floor']:.3f} |",
                 f"| support vs not | {lab['kappa_binary']:.3f} | {lab['agreement_binary']:.3f} | "
                 f"{lab['floor_binary']:.3f} |", "",
                 f"Unreadable judge labels (scored as not_support): {lab['failed']}.", "",
                 "Confusion matrix (rows: assessor, columns: judge):", "",
                 "| assessor \\ judge | " + " | ".join(ASSIGNMENTS) + " |", "|---|" + "---|" * len(ASSIGNMENTS)]
        for name, row in zip(ASSIGNMENTS, lab["confusion"]):
            lines.append(f"| {name} | " + " | ".join(str(v) for v in row) + " |")
        if self.leaderboard:
            lines += ["", "## Systems: nugget scores from the judge's labels against the assessors'", "",
                      "| score | level | systems | topics | tau-b | Spearman | tau_ap_b | Kendall@k | undefined because / note |",
                      "|---|---|---|---|---|---|---|---|---|"]
            for r in self.leaderboard:
                kname = next((n for n in r.values if n.startswith("kendall_at_")), "")
                lines.append(f"| {r.evaluation} | {r.level} | {r.n_systems} | {r.n_topics} | {_num(r, 'tau_b')} | "
                             f"{_num(r, 'spearman')} | {_num(r, 'tau_ap_b')} | {_num(r, kname)} | {r.reason} |")
        n = max(len(self.answers), 1)
        lines += ["", f"{self.llm_calls} LLM calls ({self.llm_calls / n:.2f} per answer), {self.seconds:.1f} s "
                      f"({self.seconds / n:.2f} s per answer)."]
        return "\n".join(lines) + "\n"

    def write(self, out_dir: Path) -> None:
        from eval.meta import to_csv

        atomic_write_text(out_dir / "summary.md", self.markdown())
        atomic_write_text(out_dir / "labels.json", json.dumps(self.labels, indent=2) + "\n")
        if self.leaderboard:
            atomic_write_text(out_dir / "leaderboard.csv", to_csv(self.leaderboard))
        atomic_write_jsonl(out_dir / "judged.jsonl", [
            {"qid": a.qid, "run_id": a.run_id, "nuggets": [{**h, "judge": j["assignment"]}
                                                           for h, j in zip(a.nuggets, judged)]}
            for a, judged in zip(self.answers, self.judged)])
        confusion_png(self.labels["confusion"], out_dir / "confusion.png", f"assignment mode {self.mode}")


def _num(row: LeaderboardRow, name: str) -> str:
    value = row.values.get(name, math.nan)
    if not name or math.isnan(value):
        return "-"
    lo, hi = row.intervals.get(name, (math.nan, math.nan))
    return f"{value:.3f} [{lo:.3f}, {hi:.3f}]" if not math.isnan(lo) else f"{value:.3f}"


def label_agreement(human: list[str], judge: list[str]) -> dict[str, Any]:
    """Kappa (scikit-learn's Cohen's kappa), raw agreement and the confusion matrix of two label lists; a judge's
    unreadable label ("failed") counts as not_support, as it is scored."""
    scored = ["not_support" if j not in ASSIGNMENTS else j for j in judge]
    binary_h = [h == "support" for h in human]
    binary_j = [j == "support" for j in scored]

    def kappa(a: list[Any], b: list[Any]) -> float:
        if len(set(a) | set(b)) < 2:
            return math.nan
        return float(cohen_kappa_score(a, b))

    return {"n_nuggets": len(human), "kappa": kappa(human, scored),
            "agreement": float(np.mean([h == j for h, j in zip(human, scored)])),
            "floor": float(np.mean([h == "not_support" for h in human])),
            "kappa_binary": kappa(binary_h, binary_j),
            "agreement_binary": float(np.mean([h == j for h, j in zip(binary_h, binary_j)])),
            "floor_binary": float(np.mean([not h for h in binary_h])),
            "failed": sum(j not in ASSIGNMENTS for j in judge),
            "confusion": confusion_matrix(human, scored, labels=list(ASSIGNMENTS)).tolist()}


def compare_assignments(answers: list[AssessedAnswer], judged: list[list[dict[str, Any]]], mode: str = "list",
                        k: int = 5, n_boot: int = 1000, seconds: float = 0.0, llm_calls: int = 0) -> NuggetMetaResult:
    """Per-nugget agreement and per-system leaderboard correlation of the judge's labels with the assessors'."""
    human = [n["assignment"] for a in answers for n in a.nuggets]
    judge = [n["assignment"] for labels in judged for n in labels]
    result = NuggetMetaResult(answers, judged, mode, label_agreement(human, judge), seconds=seconds,
                              llm_calls=llm_calls)
    human_scores = [nugget_scores(a.nuggets) for a in answers]
    judge_scores = [nugget_scores(labels) for labels in judged]
    for name in SCORE_NAMES:
        hcells = {(a.run_id, a.qid): s[name] for a, s in zip(answers, human_scores)}
        jcells = {(a.run_id, a.qid): s[name] for a, s in zip(answers, judge_scores)}
        result.leaderboard += leaderboard_correlation(f"nuggets/{name}", f"assessors' nuggets/{name}", jcells,
                                                      hcells, k=k, n_boot=n_boot)
    return result


def confusion_png(confusion: list[list[int]], path: Path, title: str, labels: tuple[str, ...] = ASSIGNMENTS
                  ) -> Path:
    """The confusion matrix as a heatmap with counts (rows: assessor, columns: judge)."""
    from matplotlib.figure import Figure

    matrix = np.asarray(confusion)
    fig = Figure(figsize=(4.6, 3.8), layout="constrained")
    ax = fig.subplots()
    ax.imshow(matrix, cmap="Blues")
    ax.set_xticks(range(len(labels)), [str(x) for x in labels], rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(labels)), [str(x) for x in labels], fontsize=8)
    ax.set_xlabel("judge")
    ax.set_ylabel("assessor")
    ax.set_title(title, fontsize=9)
    for (i, j), value in np.ndenumerate(matrix):
        ax.text(j, i, str(value), ha="center", va="center", fontsize=8,
                color="white" if value > matrix.max() / 2 else "black")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    tmp.replace(path)
    return path
