"""One table for a whole sweep: a row per cell, a column per swept value and per metric, the best cell marked.

    python -m eval.summary SWEEP_DIR [--no-wandb] [--agreement 'judge/*' 'nuggets/*'] [--leaderboards]

Also runs automatically at the end of every multirun (`eval.sweep_callback.SweepSummaryCallback`). Writes, in
the sweep folder and atomically: `summary.md` (led by the judge x nugget-metric agreement matrix when the cells
were judged, then the quality and cost metrics with the best value of each column in bold), `summary.csv`
(every metric), `best.csv`, `agreement.csv` (every pair) / `agreement.md` / `agreement.png` (heatmap), and
`significance.csv` / `significance.json`: paired tests between the cells (`eval.significance`), whose
"statistically tied with the best" groups are what summary.md bolds in the per-answer quality columns.
Each metric keeps its own column (`recall/rerank@5` and `@20` are different metrics); what is ranked, and in
which direction, comes from the metric registry (`rag.metrics.registry`): quality up, cost down, and bookkeeping
(cache hits, question counts, distributions) never "best". A nugget-based metric (nuggets, ARGUE, Crucible) is
ranked only when every cell scored each topic against the same nugget set (the sweep's one gate,
`rag.judge.nugget_sets.NuggetSetGate`, which the paired tests, W&B and the AutoJudge leaderboards ask too);
otherwise its one-line notice (which cells, which topics) stands where its best cell would. The
sweep over several question sets (`dataset=hotpotqa,musique`) is ranked within each set: cells that answered the
same questions (`rag.sweep.question_sets`) get their own best and tied group, and best.csv, summary.md and W&B
name the set. The
same tables go to one W&B "sweep-summary" run in the sweep's group, with a run id derived from the sweep folder
so that a re-summary (after a resubmission) updates that run instead of adding another.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag.core.errors import ConfigError
from rag.core.hashing import stable_hash
from rag.core.io import atomic_write_json, atomic_write_text
from rag.judge.nugget_sets import NuggetSetComparison, NuggetSetGate
from rag.judge.run import declare_saved_specs
from rag.metrics.marks import marked
from rag.metrics.registry import REGISTRY
from rag.records import is_number
from rag.sweep.cells import Cell, SweepFolder, load_sweep, read_yaml
from rag.sweep.gate import sweep_gate
from rag.sweep.question_sets import question_sets

log = logging.getLogger(__name__)


def metric_direction(name: str) -> int:
    """+1 when a higher value is better, -1 when lower is better, 0 when not ranked (bookkeeping, shares) or
    undeclared: the registry decides."""
    return REGISTRY.direction(name)


@dataclass
class Best:
    """The best value of one metric and the cells holding it. Over several question sets, `cells` holds the best
    of every set and `per_set` each set's value and cells (`value` is then the first set's)."""

    metric: str
    direction: int
    value: float
    cells: list[str]
    #: question set label -> (its best value, its best cells); empty when the sweep answered one set
    per_set: dict[str, tuple[float, list[str]]] = field(default_factory=dict)


@dataclass
class SweepSummary:
    """The collected table; `rows` are dicts keyed by `columns`."""

    sweep: SweepFolder
    swept: list[str]
    metrics: list[str]
    rows: list[dict[str, Any]]
    best: dict[str, Best]
    agreement_csv: str | None = None
    agreement_md: str | None = None
    #: eval.agreement.SetAgreements when computed: the matrix and every pair, one table per question set
    agreements: Any = None
    #: why no agreement table: the cells were scored against different nugget sets (`eval.agreement`'s one line)
    agreement_refused: str | None = None
    #: eval.significance.Significance when computed (paired tests between the cells, the tied-with-best marks)
    significance: Any = None
    files: dict[str, Path] = field(default_factory=dict)
    #: nugget-based metrics not ranked: their cells scored some topic against different nugget sets
    not_ranked: dict[str, NuggetSetComparison] = field(default_factory=dict)
    #: the comparability gate over the complete cells (`rag.judge.nugget_sets.NuggetSetGate`), labels `#<row>`
    gate: NuggetSetGate = field(default_factory=lambda: NuggetSetGate({}))
    #: complete cell -> its question set's label (`rag.sweep.question_sets`; all "" for one set)
    question_sets: dict[str, str] = field(default_factory=dict)

    @property
    def set_labels(self) -> list[str]:
        """The sweep's question sets in row order; [] when it answered one."""
        labels = list(dict.fromkeys(self.question_sets.values()))
        return labels if len(labels) > 1 else []

    @property
    def agreement(self) -> Any:
        """The agreement table of a sweep of one question set (None with several: `agreements` has one per set)."""
        tables = self.agreements.tables if self.agreements is not None else []
        return tables[0] if len(tables) == 1 and not tables[0].questions else None

    @property
    def labels(self) -> dict[str, str]:
        """Cell name -> `#<row>`, how summary.md names cells."""
        return {row["cell"]: f"#{i}" for i, row in enumerate(self.rows)}

    def notice(self, metric: str) -> str:
        """The one line a not-ranked metric shows instead of a best cell (the gate's; "" when rankable)."""
        return self.gate.notice(metric) or ""

    @property
    def model_loads(self) -> int | None:
        """Models loaded over the complete cells (`model_loads` of each metrics.json); None when not counted."""
        counted = [r["model_loads"] for r in self.rows if r["status"] == "complete" and is_number(r.get("model_loads"))]
        return int(sum(counted)) if counted else None

    @property
    def llm_configs(self) -> int:
        """Distinct LLM configs (`llm` and the judges' `llm`) among the complete cells."""
        return len({llm_identity(c) for c in self.sweep.cells if c.complete})

    @property
    def columns(self) -> list[str]:
        return ["cell", "status", *self.swept, *self.metrics]

    @property
    def n_complete(self) -> int:
        return sum(r["status"] == "complete" for r in self.rows)


def llm_identity(cell: Cell) -> str:
    """The LLM configs a cell loaded, from its saved `.hydra/config.yaml`."""
    import json

    import yaml

    path = cell.dir / ".hydra" / "config.yaml"
    try:
        cfg = read_yaml(path) or {}
    except (OSError, yaml.YAMLError):
        return f"unknown:{cell.name}"
    judges = cfg.get("judge") or {}
    return json.dumps({"llm": cfg.get("llm"), "judges": {k: (v or {}).get("llm") for k, v in judges.items()
                                                          if isinstance(v, dict)}}, sort_keys=True, default=str)


def _status(cell: Cell) -> str:
    """complete / incomplete (running or failed: `python -m jobs.status` asks the scheduler) / not started."""
    if cell.complete:
        return "complete"
    if not cell.started:
        return "not started"
    return f"incomplete ({cell.journal_lines()} answers)"


def declare_cell_specs(sweep: SweepFolder) -> None:
    """The cells' judges and metrics declare their metric names (once per distinct config), as in the cells."""
    seen: set[str] = set()
    for cell in sweep.cells:
        if not cell.complete:
            continue
        config = cell.run.saved_config
        key = json.dumps({k: config.get(k) for k in ("judge", "metrics")}, sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        for problem in declare_saved_specs(config):
            log.warning("%s: %s (its metrics are listed, not ranked)", cell.name, problem)


def rank_only_on_one_ruler(summary: SweepSummary) -> None:
    """Take the best-cell mark from every metric the gate does not let rank (a nugget-based metric whose cells
    scored some topic against different nugget sets) and keep its comparison for the notice."""
    for metric, comparison in summary.gate.not_rankable(list(summary.best)).items():
        del summary.best[metric]
        summary.not_ranked[metric] = comparison


def collect(sweep_dir: str | Path) -> SweepSummary:
    """Read every cell's overrides and metrics.json into one table and find the best cell per metric."""
    sweep = load_sweep(sweep_dir)
    swept = sweep.swept_keys
    declare_cell_specs(sweep)
    metric_names: list[str] = []
    for cell in sweep.cells:
        for key, value in (cell.metrics or {}).items():
            if is_number(value) and key not in metric_names:
                metric_names.append(key)
    undeclared = REGISTRY.undeclared(metric_names)
    if undeclared:
        log.warning("metrics not declared in rag/metrics/registry.py (listed, never ranked): %s",
                    ", ".join(undeclared))
    rows = []
    for cell in sweep.cells:
        values = cell.values
        row: dict[str, Any] = {"cell": cell.name, "status": _status(cell)}
        row.update({k: values.get(k, "") for k in swept})
        metrics = dict(cell.metrics or {})
        row.update({m: metrics.get(m) for m in metric_names})
        rows.append(row)
    sets = question_sets(sweep.cells)
    best: dict[str, Best] = {}
    for metric in metric_names:
        direction = metric_direction(metric)
        scored = [(r[metric], r["cell"]) for r in rows if is_number(r.get(metric))]
        if direction == 0 or not scored:
            continue
        per_set: dict[str, tuple[float, list[str]]] = {}
        for label in dict.fromkeys(sets.get(c, "") for _, c in scored):
            values = [(v, c) for v, c in scored if sets.get(c, "") == label]
            target = max(v for v, _ in values) if direction > 0 else min(v for v, _ in values)
            per_set[label] = (target, [c for v, c in values if v == target])
        first = next(iter(per_set.values()))
        best[metric] = Best(metric, direction, first[0], [c for _, cells in per_set.values() for c in cells],
                            per_set if len(per_set) > 1 or next(iter(per_set)) else {})
    summary = SweepSummary(sweep=sweep, swept=swept, metrics=metric_names, rows=rows, best=best,
                           question_sets=sets)
    summary.gate = sweep_gate(sweep, summary.labels, sets)
    rank_only_on_one_ruler(summary)
    return summary


def add_agreement(summary: SweepSummary, patterns: Sequence[str] = (), n_boot: int = 200,
                  reference: str = "auto") -> bool:
    """Kendall tau between evaluations over the sweep's complete cells (`eval.agreement`).

    By default the judge x nugget-metric matrix (per-answer kinds of the registry; never counters); with
    `patterns`, every pair of the evaluations they match. `reference`: tau_ap_a's truth (`eval.agreement.
    choose_reference`: `auto` is nugget scores).
    """
    try:
        from eval.agreement import (
            Agreement,
            NuggetSetMismatch,
            agreement_matrix,
            agreement_table,
            attach_battles,
            evaluations,
            load_run,
            pair_agreement,
            per_question_set,
            to_csv,
            within_question_sets,
        )
        from eval.agreement import to_markdown as agreement_markdown
    except ImportError as err:
        log.info("eval.agreement not importable (%s): no agreement table", err)
        return False
    cells = [c for c in summary.sweep.cells if c.complete and c.run.has_answers]
    if len(cells) < 2:
        log.info("agreement needs at least two complete cells, have %d", len(cells))
        return False
    try:
        runs = [load_run(c.dir, c.name) for c in cells]
        attach_battles(runs, [summary.sweep.dir])  # the battle ranking (eval.battles), where the sweep has one
        within_question_sets(runs, summary.question_sets)

        def build(group: list) -> Agreement:
            if patterns:
                names = evaluations(group, list(patterns))
                pairs = agreement_table(group, names, n_boot=n_boot)
                if reference != "auto":
                    pairs = [pair_agreement(group, p.a, p.b, n_boot=n_boot, reference=reference) for p in pairs]
                return Agreement(group, [], [], pairs)
            return agreement_matrix(group, n_boot=n_boot, reference=reference)

        sets = per_question_set(runs, build)  # a tau ranks runs on the same questions: one table per set
        sets.tables = [table for table in sets.tables if table.pairs]
        if not sets.tables:
            log.info("agreement needs two per-answer evaluations present in every cell of a question set")
            return False
        summary.agreements = sets
        summary.agreement_csv = to_csv([p for table in sets.tables for p in table.pairs])
        summary.agreement_md = agreement_markdown(sets)
    except NuggetSetMismatch as err:  # different rulers: no table, the line says what to run
        summary.agreement_refused = str(err).replace("<SWEEP>", str(summary.sweep.dir))
        log.warning("no agreement table: %s", summary.agreement_refused)
        return False
    except Exception as err:  # noqa: BLE001 - the summary itself must still be written
        log.warning("agreement table failed: %s", err)
        return False
    return True


# -- rendering ------------------------------------------------------------------------------------------------
def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}".rstrip("0").rstrip(".") if abs(value) < 1e6 else f"{value:.4g}"
    return str(value)


def to_csv(summary: SweepSummary) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=summary.columns, lineterminator="\n")
    writer.writeheader()
    for row in summary.rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in summary.columns})
    return buffer.getvalue()


BEST_COLUMNS = ["metric", "direction", "value", "best_cells", "note", "questions"]


def best_rows(summary: SweepSummary) -> list[list[Any]]:
    """The best cell(s) per ranked metric, one row per question set when the sweep answered several (`questions`
    names it); a nugget-based metric scored against different nugget sets gets no value and its notice in `note`
    (best.csv and the W&B best table)."""
    rows: list[list[Any]] = []
    for b in summary.best.values():
        how = "max" if b.direction > 0 else "min"
        rows += [[b.metric, how, value, " ".join(cells), "", label]
                 for label, (value, cells) in (b.per_set or {"": (b.value, b.cells)}).items()]
    rows += [[m, "max" if metric_direction(m) > 0 else "min", None, "", summary.gate.notice(m, labels={}), ""]
             for m in summary.not_ranked]
    return rows


def best_csv(summary: SweepSummary) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(BEST_COLUMNS)
    writer.writerows([["" if v is None else v for v in row] for row in best_rows(summary)])
    return buffer.getvalue()


def not_ranked_json(summary: SweepSummary) -> dict[str, Any]:
    """summary.json's `not_ranked`: per metric, the cells and topics scored against different nugget sets."""
    return {m: {"cells": c.cells, "topics": sorted(c.differing), "notice": summary.notice(m)}
            for m, c in summary.not_ranked.items()}


def not_ranked_markdown(summary: SweepSummary) -> list[str]:
    """summary.md's lines for metrics left unranked: one per metric, instead of a bold best."""
    if not summary.not_ranked:
        return []
    return ["", "Not ranked (scored against different nugget sets; cells are compared on a nugget-based metric "
            "only where every topic used one set):", "", *(f"- {_md_escape(summary.notice(m))}"
                                                          for m in summary.not_ranked)]


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def to_markdown(summary: SweepSummary) -> str:
    """The agreement matrix first, then quality and cost metrics (every metric is in summary.csv); the best
    value of each column in bold."""
    sweep = summary.sweep
    shown = [m for m in summary.metrics if metric_direction(m) != 0]
    lines = [f"# Sweep {sweep.dir.name}", "",
             f"Folder: `{sweep.dir}`  ", f"Cells: {summary.n_complete} complete of {len(summary.rows)}  "]
    if sweep.fixed_overrides:
        fixed = " ".join(f"{k}={v}" for k, v in sweep.fixed_overrides.items())
        lines.append(f"Fixed overrides: `{fixed}`  ")
    if summary.model_loads is not None:
        lines.append(f"Model loads: {summary.model_loads} over the complete cells, which use "
                     f"{summary.llm_configs} LLM config(s) (each cell's `model_loads`; a cell that reused a loaded "
                     f"model counts 0)  ")
    from eval.battle_files import summary_line

    battles = summary_line(sweep.dir)
    if battles:
        lines.append(battles)
    lines.append("")
    if summary.agreement_refused:
        lines += [f"No agreement table: {_md_escape(summary.agreement_refused)}", ""]
    if summary.agreements is not None:
        from eval.agreement import alone_line, matrix_markdown

        matrices = [m for m in (matrix_markdown(t) for t in summary.agreements.tables) if m]
        for matrix in matrices:
            lines += [matrix.rstrip(), ""]
        if summary.agreements.alone:
            lines += [alone_line(summary.agreements.alone), ""]
        if matrices:
            lines += ["Every pair, with per-topic tau: `agreement.csv`.", ""]
    lines += ["## Cells", "", "Best value per metric in **bold** (max for quality, min for cost; each column on its "
              "own, so different cut-offs are never compared).", ""]
    if summary.significance is not None:  # which bold is real: the tied-with-best groups (eval.significance)
        from eval.significance import caption

        lines[-2] = caption(summary.significance)
    if summary.set_labels:
        lines += [f"Question sets: {', '.join(summary.set_labels)}: each column is ranked within each set "
                  "(cells that answered the same questions), never across them.", ""]
    by_set = bool(summary.set_labels)
    header = ["#", "status", *(["questions"] if by_set else []), *summary.swept, *shown]
    lines.append("| " + " | ".join(_md_escape(h) for h in header) + " |")
    lines.append("|" + "---|" * len(header))
    for index, row in enumerate(summary.rows):
        baseline = summary.significance is not None and summary.significance.baseline == row["cell"]
        cells = [f"{index} (baseline)" if baseline else str(index), row["status"],
                 *([_md_escape(summary.question_sets.get(row["cell"], ""))] if by_set else []),
                 *(_md_escape(str(row[k])) for k in summary.swept)]
        for metric in shown:
            cells.append(_marked(summary, metric, row["cell"], _fmt(row.get(metric))))
        lines.append("| " + " | ".join(cells) + " |")
    lines += not_ranked_markdown(summary)
    labels = {row["cell"]: f"#{i} " + " ".join(f"{k}={row[k]}" for k in summary.swept)
              for i, row in enumerate(summary.rows)}
    lines += ["", "## Best cell per metric", "", *(["| metric | questions | best | value | cells |",
                                                     "|---|---|---|---|---|"] if by_set else
                                                    ["| metric | best | value | cells |", "|---|---|---|---|"])]
    for metric, how, value, cells, _, label in best_rows(summary):
        if metric in summary.not_ranked:
            continue
        names = ", ".join(_md_escape(labels.get(c, c).strip()) for c in cells.split())
        where = [_md_escape(label)] if by_set else []
        lines.append("| " + " | ".join([_md_escape(metric), *where, how, _fmt(value), names]) + " |")
    for metric in summary.not_ranked:
        where = " |" if by_set else ""
        lines.append(f"| {_md_escape(metric)} |{where} not ranked | | {_md_escape(summary.notice(metric))} |")
    if summary.significance is not None:
        from eval.significance import markdown as significance_markdown

        lines += ["", significance_markdown(summary.significance).rstrip()]
    return "\n".join(lines) + "\n"


def _marked(summary: SweepSummary, metric: str, cell: str, text: str) -> str:
    """A summary.md cell: bold for the tied-with-best group of a tested column (`eval.significance`), ▲/▼
    against a baseline; the best value in bold where the column was not tested."""
    from eval.significance import mark

    if not text or not summary.gate.rankable(metric):  # cells scored against different nugget sets: no mark
        return text
    how = mark(summary.significance, metric, cell)
    if how is None:
        best = summary.best.get(metric)
        return f"**{text}**" if best and cell in best.cells else text
    return marked(text, how)


def add_significance(summary: SweepSummary, settings: Any = None) -> bool:
    """Paired tests between the complete cells (`eval.significance`); the summary is written without them when
    they fail (logged)."""
    from eval.significance import Settings, compare_cells

    if sum(r["status"] == "complete" for r in summary.rows) < 2:
        return False
    try:
        config = settings if isinstance(settings, Settings) else Settings.from_mapping(settings)
        best = {metric: b.cells for metric, b in summary.best.items()}
        summary.significance = compare_cells(summary.sweep, config, best=best, swept=summary.swept,
                                             gate=summary.gate, question_sets=summary.question_sets)
    except ConfigError as err:  # e.g. a baseline that names no cell: one line, the summary without the tests
        log.error("no significance tests: %s", err)
        return False
    except Exception as err:  # noqa: BLE001 - the summary itself must still be written
        log.warning("significance tests failed: %s", err)
        return False
    return True


def write_files(summary: SweepSummary) -> dict[str, Path]:
    root = summary.sweep.dir
    files = {"csv": root / "summary.csv", "markdown": root / "summary.md", "best": root / "best.csv",
             "json": root / "summary.json"}
    atomic_write_text(files["csv"], to_csv(summary))
    atomic_write_text(files["markdown"], to_markdown(summary))
    atomic_write_text(files["best"], best_csv(summary))
    atomic_write_json(files["json"], {
        "sweep_dir": str(root), "group": summary.sweep.group, "swept": summary.swept,
        "fixed": summary.sweep.fixed_overrides, "n_cells": len(summary.rows), "n_complete": summary.n_complete,
        "model_loads": summary.model_loads, "llm_configs": summary.llm_configs, "rows": summary.rows,
        "best": {m: {"direction": b.direction, "value": b.value, "cells": b.cells,
                     **({"per_set": {k: {"value": v, "cells": c} for k, (v, c) in b.per_set.items()}}
                        if b.per_set else {})} for m, b in summary.best.items()},
        "question_sets": summary.question_sets if summary.set_labels else {},
        "not_ranked": not_ranked_json(summary)})
    if summary.agreement_refused:  # an earlier summary's table would contradict the refusal
        for old in [root / "agreement.csv", root / "agreement.md", *root.glob("agreement*.png")]:
            old.unlink(missing_ok=True)
    if summary.agreements is not None:
        from eval.agreement import write as write_agreement

        files.update(write_agreement(summary.agreements, root))
    if summary.significance is not None:
        from eval.significance import write as write_significance

        files.update(write_significance(summary.significance, root))
    else:  # an earlier summary's tests would describe other cells
        for name in ("significance.csv", "significance.json"):
            (root / name).unlink(missing_ok=True)
    summary.files = files
    return files


# -- W&B ------------------------------------------------------------------------------------------------------
def wandb_settings_from_sweep(sweep: SweepFolder) -> dict[str, Any] | None:
    """The cells' W&B settings (project, entity, mode) from a cell's config, or None when they logged nothing."""
    from omegaconf import OmegaConf

    for cell in sweep.cells:
        path = cell.dir / ".hydra" / "config.yaml"
        if not path.is_file():
            continue
        logger = OmegaConf.create(read_yaml(path)).get("logger")
        if logger is None or not str(logger.get("_target_", "")).endswith("WandbLogger"):
            return None
        try:
            resolved = OmegaConf.to_container(logger, resolve=True)
        except Exception:  # noqa: BLE001 - e.g. a cluster-only env var: fall back to the defaults
            resolved = {}
        return {k: resolved.get(k) for k in ("project", "entity", "mode")}
    return None


def summary_run_id(sweep_dir: str | Path) -> str:
    """The sweep-summary run's W&B id, derived from the sweep folder: a re-summary updates the same run."""
    return "sweep-" + stable_hash(str(Path(sweep_dir).resolve()), length=16)


def swept_tags(summary: SweepSummary) -> list[str]:
    """One tag per swept value (`rerank.k=5`), nothing else: fixed overrides and paths say nothing here."""
    tags: list[str] = []
    for key in summary.swept:
        for row in summary.rows:
            tag = f"{key}={row.get(key)}"
            if row.get(key) not in ("", None) and tag not in tags:
                tags.append(tag[:64])  # W&B's tag length limit
    return tags


def log_wandb(summary: SweepSummary, project: str = "ragtifier", entity: str | None = None,
              mode: str | None = "offline", group: str | None = None) -> str:
    """One W&B run for the sweep (id from the sweep folder, resumed when it exists): the summary, best-cell and
    agreement-matrix tables, the agreement heatmap, and agreement cells and best values as summary scalars."""
    import os

    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    sweep = summary.sweep
    table = wandb.Table(columns=summary.columns, data=[[r.get(c) for c in summary.columns] for r in summary.rows],
                        allow_mixed_types=True)
    best_table = wandb.Table(columns=BEST_COLUMNS, data=best_rows(summary), allow_mixed_types=True)
    config = {"sweep_dir": str(sweep.dir), "swept": summary.swept, "fixed": sweep.fixed_overrides,
              "n_cells": len(summary.rows), "cells": [r["cell"] for r in summary.rows]}
    run = wandb.init(project=project, entity=entity, mode=mode or "offline", dir=str(sweep.dir),
                     id=summary_run_id(sweep.dir), resume="allow",
                     name=f"{sweep.group}-summary", group=group or sweep.group, job_type="sweep-summary",
                     tags=swept_tags(summary), config=config, reinit="finish_previous")
    try:
        payload: dict[str, Any] = {"sweep/summary": table, "sweep/best": best_table}
        if summary.agreement_csv:
            reader = list(csv.reader(io.StringIO(summary.agreement_csv)))
            payload["sweep/agreement"] = wandb.Table(columns=reader[0], data=reader[1:])
        if summary.significance is not None:
            from eval.significance import COLUMNS, rows

            payload["sweep/significance"] = wandb.Table(columns=COLUMNS, allow_mixed_types=True, data=[
                [r[c] for c in COLUMNS] for r in rows(summary.significance)])
        scalars: dict[str, Any] = {}
        if summary.agreements is not None:
            from eval.agreement import scalars as agreement_scalars

            tables = summary.agreements.tables
            matrix = [p.row() for table in tables for p in table.matrix_pairs]
            if matrix:
                columns = list(matrix[0])
                payload["sweep/agreement_matrix"] = wandb.Table(
                    columns=columns, data=[[None if isinstance(r[c], float) and math.isnan(r[c]) else r[c]
                                            for c in columns] for r in matrix], allow_mixed_types=True)
            for table in tables:
                within = f"@{table.questions}" if table.questions else ""
                png = summary.files.get("agreement_png" + within)
                if png is not None and Path(png).is_file():
                    payload["sweep/agreement_heatmap" + within] = wandb.Image(str(png))
                scalars.update(agreement_scalars(table))
        run.log(payload)
        from rag.report.wandb_report import log_report

        log_report(run, sweep.dir)  # figures, Fig. 4/5 line plots, Table 1 (rag.report; failures logged)
        run.summary.update({"n_cells": len(summary.rows), "n_complete": summary.n_complete, **scalars,
                            **best_scalars(summary)})
        return run.id
    finally:
        run.finish()


def best_scalars(summary: SweepSummary) -> dict[str, Any]:
    """The W&B summary's `best/<metric>` and `best_cell/<metric>` for every metric the gate lets rank, and
    `not_ranked/<metric>` (its notice) for every one it does not: no best across nugget sets."""
    out: dict[str, Any] = {}
    for best in summary.best.values():
        if not summary.gate.rankable(best.metric):
            continue
        for label, (value, cells) in (best.per_set or {"": (best.value, best.cells)}).items():
            suffix = f"@{label}" if label else ""  # one question set: best/<metric>, as before
            out[f"best/{best.metric}{suffix}"] = value
            out[f"best_cell/{best.metric}{suffix}"] = cells[0]
    for metric in summary.gate.not_rankable([*summary.best, *summary.not_ranked]):
        out[f"not_ranked/{metric}"] = summary.notice(metric)
    return out


def summarize(sweep_dir: str | Path, wandb: bool | dict[str, Any] = True, agreement: Sequence[str] = (),
              n_boot: int = 200, agreement_reference: str = "auto", significance: Any = None) -> SweepSummary:
    """Collect, write the files, add agreement and the paired tests (`significance`: eval.significance's
    settings), and log to W&B (settings from the cells, or `wandb` itself)."""
    summary = collect(sweep_dir)
    add_agreement(summary, agreement, n_boot=n_boot, reference=agreement_reference)
    add_significance(summary, significance)
    write_files(summary)
    if wandb:
        settings = wandb if isinstance(wandb, dict) else wandb_settings_from_sweep(summary.sweep)
        if settings:
            run_id = log_wandb(summary, **{k: v for k, v in settings.items() if v is not None or k == "entity"})
            atomic_write_json(summary.sweep.dir / "summary_wandb_run.json",
                              {"id": run_id, "dir": str(summary.sweep.dir / "wandb"), "group": summary.sweep.group})
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.summary", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument("--no-wandb", action="store_true", help="write the files only")
    parser.add_argument("--wandb-mode", default=None, help="override the cells' W&B mode (offline, online)")
    parser.add_argument("--agreement", nargs="*", default=[],
                        help="glob patterns: every pair of these evaluations (default: the judge x nugget-metric matrix)")
    parser.add_argument("--bootstrap", type=int, default=200, help="bootstrap resamples for agreement CIs")
    parser.add_argument("--agreement-reference", default="auto",
                        help="tau_ap_a's reference: auto (nugget scores), or a glob/prefix")
    parser.add_argument("--leaderboards", nargs="*", default=None, metavar="PATTERN",
                        help="also write each evaluation's TREC AutoJudge leaderboard (SWEEP/leaderboards/, "
                             "eval.autojudge); patterns: only the evaluations they match")
    parser.add_argument("--compare", choices=("all_pairs", "baseline"), default="all_pairs",
                        help="paired tests between every pair of cells, or the baseline against each other cell")
    parser.add_argument("--baseline", nargs="*", default=[], help="the baseline cell's overrides, e.g. generator=simple")
    parser.add_argument("--correction", choices=("holm", "bh"), default="holm",
                        help="Holm-Bonferroni (family-wise) or Benjamini-Hochberg (false discovery rate), per metric")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    wandb_arg: bool | dict[str, Any] = not args.no_wandb
    if wandb_arg and args.wandb_mode:
        settings = wandb_settings_from_sweep(load_sweep(args.sweep_dir)) or {"project": "ragtifier"}
        wandb_arg = {**settings, "mode": args.wandb_mode}
    from eval.significance import Settings

    try:
        significance = Settings.from_mapping({"compare": args.compare, "baseline": args.baseline,
                                              "correction": args.correction})
    except ConfigError as err:
        parser.error(str(err))
    summary = summarize(args.sweep_dir, wandb=wandb_arg, agreement=args.agreement, n_boot=args.bootstrap,
                        agreement_reference=args.agreement_reference, significance=significance)
    print(to_markdown(summary))
    if args.leaderboards is not None:
        from eval.autojudge import write_leaderboards

        summary.files.update({f"leaderboard {e}": p for e, p in write_leaderboards(args.sweep_dir,
                                                                                   args.leaderboards).items()})
    print("written: " + ", ".join(str(p) for p in summary.files.values()))
    return 0 if summary.rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
