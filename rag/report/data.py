"""The one place that reads a sweep's files for the report: cells, answer records, metrics, agreement, latency.

Every other module of `rag.report` reads answer records and metrics only through the accessors below, so a
change of the record shape (answers.jsonl) or of the metric names (metrics.json) is adapted here alone.

A "sweep" here is any folder the report can read: a Hydra multirun folder (cells with `.hydra/`), a single run
folder (holding `answers.jsonl`), or a folder of run folders (found recursively).
"""

from __future__ import annotations

import csv
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from rag.core.errors import DataError
from rag.folders import RunFolder, read_json_file
from rag.judge.nugget_sets import POOL_HINT, NuggetSetComparison, NuggetSetGate, cell_sets
from rag.metrics.marks import mark_of
from rag.records import AnswerRecord, is_number

log = logging.getLogger(__name__)

AGREEMENT_FILE = "agreement.csv"
#: what `python -m eval.battles` writes into the sweep folder (eval/battle_files.py reads and writes through these)
BATTLES_DIR = "battles"
BATTLE_RATINGS = "ratings.json"
#: the sweep summary's paired tests between cells (eval/significance.py): the tied-with-best marks
SIGNIFICANCE_FILE = "significance.json"
#: benchmark output files the report picks up from the sweep folder (see benchmarks/latency_at_k.py)
LATENCY_GLOB = "latency_at_k*.json"

#: RAGtifier Table 1: the judge fields reported as shares of each value (LiveRAG prompt, Fig. 2), best first
TABLE1_FIELDS: dict[str, tuple[int, ...]] = {"correctness": (2, 1, 0, -1), "faithfulness": (1, 0, -1)}
HOPS = ("single", "multi")


# -- answer records (answers.jsonl) ---------------------------------------------------------------------------
def record_id(record: AnswerRecord) -> str:
    return record.id


def record_hop(record: AnswerRecord) -> str | None:
    """"single" or "multi" (DataMorgana single-doc vs two-doc), None when the dataset does not say."""
    return record.hop if record.hop in HOPS else None


def record_strategy(record: AnswerRecord) -> str | None:
    return record.generator


def judge_results(record: AnswerRecord) -> dict[str, Mapping[str, Any]]:
    """Judge name -> that judge's result for this answer (scores, or a parse-failure / skip marker)."""
    return {str(name): result for name, result in record.judges.items() if isinstance(result, Mapping)}


def judge_field(result: Mapping[str, Any], name: str) -> Any:
    """A judge's value for one field, or None when it failed to parse, skipped the field or lacks it."""
    if result.get("parse_failed"):
        return None
    if name in (result.get("skipped") or ()):
        return None
    return result.get(name)


def judge_failed(result: Mapping[str, Any]) -> bool:
    return bool(result.get("parse_failed"))


def gold_doc_ids(record: AnswerRecord) -> list[str]:
    return [str(d) for d in record.gold_doc_ids]


def ranked_doc_ids(record: AnswerRecord, stage: str) -> list[str]:
    """Document ids of a stored ranked list in rank order: stage "retrieval" (`retrieved`) or "rerank"
    (`reranked`, the list after reranking and the cut to rerank.k)."""
    ranked = {"retrieval": record.retrieved, "rerank": record.reranked}[stage]
    return [str(p.get("doc_id")) for p in ranked if isinstance(p, Mapping)]


def retrieval_measures(record: AnswerRecord) -> dict[tuple[str, str], float]:
    """(stage, measure) -> the record's trec_eval measure (`ir/<stage>/<measure>` scores of
    `rag.metrics.ir.RetrievalMeasures`), for the questions that have judgments."""
    out = {}
    for key, value in record.scores.items():
        if key.startswith("ir/") and key.count("/") >= 2 and is_number(value):
            _, stage, measure = key.split("/", 2)
            out[(stage, measure)] = float(value)
    return out


# -- run metrics (metrics.json) -------------------------------------------------------------------------------
def stage_seconds(metrics: Mapping[str, Any], stage: str) -> float | None:
    """Wall time the run spent in a stage (retrieve, rerank, generate, ...), summed over chunks."""
    value = metrics.get(f"time/{stage}_s")
    return float(value) if is_number(value) else None


def stage_work(metrics: Mapping[str, Any], stage: str) -> tuple[int, int]:
    """(questions the stage really computed, questions served from the stage cache) for retrieve / rerank."""
    name = {"retrieve": "retrieval", "rerank": "rerank"}[stage]
    return int(metrics.get(f"{name}_calls") or 0), int(metrics.get(f"{name}_cache_hits") or 0)


@dataclass(frozen=True)
class LLMUsage:
    """What the generator's engine did in one run (judges are not counted: they ran after these metrics)."""

    calls: int
    cache_hits: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, Any]) -> LLMUsage:
        return cls(calls=int(metrics.get("llm_calls") or 0), cache_hits=int(metrics.get("llm_cache_hits") or 0),
                   prompt_tokens=int(metrics.get("prompt_tokens") or 0),
                   completion_tokens=int(metrics.get("completion_tokens") or 0),
                   seconds=float(metrics.get("llm_seconds") or 0.0))


# -- runs and sweeps ------------------------------------------------------------------------------------------
@dataclass
class RunData:
    """One finished run (a sweep cell or a standalone run folder)."""

    name: str
    dir: Path
    #: overridden key -> value on the command line (sweep cells), e.g. {"retriever": "bm25"}
    values: dict[str, str] = field(default_factory=dict)
    #: config group -> chosen option (Hydra's runtime choices), e.g. {"retriever": "bm25", "rerank": "none"}
    choices: dict[str, str] = field(default_factory=dict)

    @property
    def folder(self) -> RunFolder:
        return RunFolder(self.dir)

    @cached_property
    def config(self) -> dict[str, Any]:
        """The resolved config the run wrote (`config.json`), or {}."""
        return self.folder.config()

    @cached_property
    def metrics(self) -> dict[str, Any]:
        return self.folder.metrics()

    @cached_property
    def records(self) -> list[AnswerRecord]:
        return self.folder.records()

    @property
    def retrieval_depth(self) -> int | None:
        """How deep the run's retrieve stage ran (`RunFolder.retrieval_depth`)."""
        return self.folder.retrieval_depth()

    def _component(self, group: str) -> str:
        if group in self.choices:
            return str(self.choices[group])
        target = str((self.config.get(group) or {}).get("_target_", ""))
        return target.rsplit(".", 1)[-1] or "?"

    @property
    def strategy(self) -> str:
        """The generation strategy (simple, trustrag, ...)."""
        if "generator" in self.choices:
            return str(self.choices["generator"])
        names = {record_strategy(r) for r in self.records[:1]}
        return next(iter(names - {None}), self._component("generator"))

    @property
    def retriever(self) -> str:
        return self._component("retriever")

    @property
    def reranker(self) -> str:
        return self._component("rerank")

    @property
    def dataset(self) -> str:
        return str((self.config.get("dataset") or {}).get("name") or self.choices.get("dataset") or "?")

    def setting(self, key: str) -> Any:
        """A dotted config value (`retriever.k`), or None."""
        return self.folder.setting(key)

    @property
    def n_questions(self) -> int:
        value = self.metrics.get("n_questions")
        return int(value) if is_number(value) else len(self.records)


@dataclass
class SweepData:
    """The runs of a sweep folder that finished (metrics.json and answers.jsonl written)."""

    dir: Path
    runs: list[RunData]
    #: keys whose value differs between runs, in command-line order
    swept: list[str] = field(default_factory=list)
    #: cells that exist but have not finished (name -> status), shown in the report
    unfinished: dict[str, str] = field(default_factory=dict)

    def label(self, run: RunData, lead: str | None = None, skip: Sequence[str] = ()) -> str:
        """A short name for a run: `lead` first, then the other swept values that tell it apart."""
        parts = [lead] if lead else []
        parts += [f"{k}={run.values[k]}" for k in self.swept if k in run.values and k not in skip]
        return " ".join(parts) or run.name

    @cached_property
    def agreement(self) -> list[dict[str, Any]]:
        """Rows of the sweep's agreement.csv (numbers as floats, empty cells as NaN), or []."""
        for path in (self.dir / AGREEMENT_FILE, self.dir / "agreement" / AGREEMENT_FILE):
            if path.is_file():
                return read_agreement(path)
        return []

    @cached_property
    def battles(self) -> dict[str, Any]:
        """The sweep's battle ratings (`eval.battles`: SWEEP/battles/ratings.json), or {} without battles."""
        path = self.dir / BATTLES_DIR / BATTLE_RATINGS
        if not path.is_file():
            return {}
        data = read_json_file(path)
        if not isinstance(data, Mapping) or not isinstance(data.get("cells"), list):
            raise DataError(f"{path}: not a battle ratings file (no 'cells'); rewrite it with python -m eval.battles")
        return dict(data)

    @cached_property
    def significance(self) -> dict[str, Any]:
        """The sweep summary's significance.json (settings, `marks` per column, `mdd`), or {} before a summary."""
        path = self.dir / SIGNIFICANCE_FILE
        if not path.is_file():
            return {}
        data = read_json_file(path)
        if not isinstance(data, Mapping) or not isinstance(data.get("marks"), Mapping):
            raise DataError(f"{path}: not a significance file (no 'marks'); rewrite it with python -m eval.summary")
        return dict(data)

    def mark(self, column: str, run: str) -> str | None:
        """How the sweep summary's tests mark `run` in `column` (`metric/split`): "best", "tied" (statistically
        tied with the best), "better" / "worse" (than the baseline), "" (tested, no mark); None: not tested, or not
        rankable by the gate (the runs scored some topic against different nugget sets), whatever
        significance.json says (an older file may still mark such a column)."""
        group = (self.significance.get("marks") or {}).get(column)
        if not isinstance(group, Mapping) or not self.gate.rankable(column):
            return None
        return mark_of(group, run)

    @cached_property
    def gate(self) -> NuggetSetGate:
        """The comparability gate over the finished runs (`rag.judge.nugget_sets.NuggetSetGate`, the sweep
        summary's rule, topics within their question set): every table, comparison and leaderboard of the report
        marks a column only where it lets rank."""
        from rag.sweep.gate import within_question_set

        sets = self.question_sets
        return NuggetSetGate({run.name: within_question_set(cell_sets(run.metrics, lambda run=run: run.records),
                                                            sets.get(run.name, "")) for run in self.runs},
                             hint=POOL_HINT.format(sweep=self.dir))

    @cached_property
    def question_sets(self) -> dict[str, str]:
        """Run name -> its question set's label (`rag.sweep.question_sets`; every label "" for a sweep of one set):
        the report's tables rank runs within their set, as the sweep summary's marks do."""
        from rag.sweep.question_sets import run_question_sets

        return run_question_sets({run.name: (run.folder, run.values.get("dataset", "")) for run in self.runs})

    def by_question_set(self, runs: list[RunData] | None = None) -> list[RunData]:
        """`runs` (default: every run) grouped by question set, the sets in order of first appearance, the runs'
        order kept within each."""
        runs = self.runs if runs is None else runs
        order = list(dict.fromkeys(self.question_sets.get(r.name, "") for r in runs))
        return sorted(runs, key=lambda r: order.index(self.question_sets.get(r.name, "")))

    @cached_property
    def nugget_set_conflicts(self) -> dict[str, NuggetSetComparison]:
        """Nugget-based judges (metric prefix) whose runs scored some topic against different nugget sets: the
        report compares runs on their metrics only where this names none (`gate.judges()`)."""
        return self.gate.judges()

    def latency_files(self) -> list[Path]:
        return sorted(self.dir.glob(LATENCY_GLOB)) + sorted((self.dir / "report").glob(LATENCY_GLOB))

    def input_files(self) -> list[Path]:
        """Everything the report is computed from (for deciding whether a written report is up to date)."""
        files = [p for r in self.runs for p in (r.folder.answers_path, r.folder.metrics_path) if p.is_file()]
        files += [p for p in (self.dir / AGREEMENT_FILE, self.dir / SIGNIFICANCE_FILE,
                              self.dir / BATTLES_DIR / BATTLE_RATINGS) if p.is_file()]
        return files + [p for p in self.dir.glob(LATENCY_GLOB)]


def read_agreement(path: Path) -> list[dict[str, Any]]:
    """agreement.csv rows: `eval_a`, `eval_b` and numeric columns (tau, CIs, counts); other text kept as is."""
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    out = []
    for line_no, row in enumerate(rows, start=2):
        if not row.get("eval_a") or not row.get("eval_b"):
            raise DataError(f"{path}:{line_no}: agreement row without eval_a / eval_b")
        parsed: dict[str, Any] = {}
        for key, value in row.items():
            if key in ("eval_a", "eval_b") or key is None:
                parsed[key] = value
                continue
            try:
                parsed[key] = float(value) if value not in ("", None) else math.nan
            except ValueError:
                parsed[key] = value
        out.append(parsed)
    return out


def read_latency(path: Path) -> dict[str, Any]:
    """A benchmarks/latency_at_k.py result: {"machine", "retrievers": {name: {...}}, "rerankers": {...}}."""
    data = read_json_file(path)
    if not isinstance(data, Mapping) or not ({"retrievers", "rerankers"} & set(data)):
        raise DataError(f"{path}: not a latency_at_k result (no 'retrievers' / 'rerankers')")
    return dict(data)


def _hydra_choices(run_dir: Path) -> dict[str, str]:
    import yaml

    from rag.sweep.cells import read_yaml

    path = run_dir / ".hydra" / "hydra.yaml"
    if not path.is_file():
        return {}
    try:
        hydra = (read_yaml(path) or {}).get("hydra", {})
    except yaml.YAMLError:
        return {}
    choices = (hydra.get("runtime") or {}).get("choices") or {}
    return {str(k): str(v) for k, v in choices.items() if v is not None and not str(k).startswith("hydra/")}


def load(path: str | Path) -> SweepData:
    """Read a sweep folder, a run folder or a folder of runs; raise one clear error when there is nothing."""
    from rag.sweep.cells import load_sweep

    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise DataError(f"{root}: no such folder (expected a sweep folder or a run folder)")
    if RunFolder(root).has_answers:
        run = RunData(name=root.name, dir=root, choices=_hydra_choices(root))
        return SweepData(dir=root, runs=[run] if RunFolder(root).complete else [])
    sweep = load_sweep(root)
    runs: list[RunData] = []
    unfinished: dict[str, str] = {}
    for cell in sweep.cells:
        if cell.complete and cell.run.has_answers:
            runs.append(RunData(name=cell.name, dir=cell.dir, values=cell.values, choices=_hydra_choices(cell.dir)))
        else:
            unfinished[cell.name] = "not started" if not cell.started else "incomplete"
    swept = sweep.swept_keys
    if not sweep.cells:  # not a Hydra sweep: any run folders below
        for answers in sorted(root.rglob(RunFolder.ANSWERS)):
            if RunFolder(answers.parent).complete and "report" not in answers.parts:
                run_dir = answers.parent
                runs.append(RunData(name=str(run_dir.relative_to(root)), dir=run_dir,
                                    choices=_hydra_choices(run_dir)))
    if not runs and not unfinished:
        raise DataError(f"{root}: no finished runs found (no folder with {RunFolder.ANSWERS} and "
                        f"{RunFolder.METRICS})")
    return SweepData(dir=root, runs=runs, swept=swept, unfinished=unfinished)


def default_sweep_dir(output_dir: str | Path | None = None) -> Path:
    """The latest sweep under `<output_dir>/multirun/<date>/<time>` (default $RAG_OUTPUT_DIR, else ./outputs of
    the project), for notebooks opened without a sweep folder."""
    import os

    base = Path(output_dir or os.environ.get("RAG_OUTPUT_DIR") or Path(__file__).resolve().parents[2] / "outputs")
    sweeps = sorted(p for p in (base / "multirun").glob("*/*") if p.is_dir())
    if not sweeps:
        raise DataError(f"no sweep folders under {base / 'multirun'}; set SWEEP_DIR in the parameters cell "
                        f"(or RAG_OUTPUT_DIR)")
    return sweeps[-1]
