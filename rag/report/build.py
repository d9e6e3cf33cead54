"""Write SWEEP_DIR/report/: the figures (PNG and PDF), CSV tables, report.md embedding them, report.json.

`report.json` holds what the W&B sweep report and the notebooks need again (tables, curve points, figure
files) and a fingerprint of the inputs, so a caller that only wants an up-to-date report
(`ensure_report`) does not recompute it.
"""

from __future__ import annotations

import contextlib
import csv
import io
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag.core.io import atomic_write_json, atomic_write_text, shared_mode
from rag.report import agreement as agreement_mod
from rag.report import attack as attack_mod
from rag.report import battles as battles_mod
from rag.report import comparison as comparison_mod
from rag.report import cost as cost_mod
from rag.report import latency as latency_mod
from rag.report import leaderboard as leaderboard_mod
from rag.report import recall as recall_mod
from rag.report import table1 as table1_mod
from rag.report.data import SweepData, load

log = logging.getLogger(__name__)

REPORT_DIR = "report"
REPORT_JSON = "report.json"
#: figure name -> title in report.md
FIGURES = {"table1": "Table 1: correctness and faithfulness shares per strategy",
           "fig4_recall_at_k": "Fig. 4: gold-document recall@k",
           "fig5_latency_at_k": "Fig. 5: runtime per question against k",
           "agreement": "Agreement between evaluations",
           "strategy_cost": "Strategy cost per question",
           "attack": "Attack success rate and accuracy against planted passages",
           "leaderboard": "Leaderboard: the named systems measured here, their published scores beside",
           "battles": "Battles: ratings with intervals (TREC RAG 2026's system-by-system comparison)"}


@dataclass
class Report:
    """What was written (paths relative to the report folder) and why a part was left out."""

    dir: Path
    figures: dict[str, dict[str, str]] = field(default_factory=dict)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"figures": self.figures, "tables": self.tables, "skipped": self.skipped, "meta": self.meta}

    @classmethod
    def from_json(cls, folder: Path, data: dict[str, Any]) -> Report:
        return cls(dir=folder, figures=data.get("figures", {}), tables=data.get("tables", {}),
                   skipped=data.get("skipped", {}), meta=data.get("meta", {}))

    def figure_path(self, name: str, fmt: str = "png") -> Path | None:
        entry = self.figures.get(name, {})
        return self.dir / entry[fmt] if fmt in entry else None


#: a figure's table, where its CSV is named otherwise
TABLE_OF = {"fig4_recall_at_k": "recall_at_k", "fig5_latency_at_k": "latency_at_k"}


def save_figure(fig, stem: Path, formats: Sequence[str] = ("png", "pdf"), dpi: int = 150) -> dict[str, str]:
    """Save a figure in each format atomically (temporary file, then rename); return format -> file name."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    out = {}
    for fmt in formats:
        target = stem.with_suffix(f".{fmt}")
        fd, tmp = tempfile.mkstemp(dir=stem.parent, prefix=f".{target.name}.", suffix=f".{fmt}")
        os.fchmod(fd, shared_mode())  # mkstemp makes 0600: the umask rule of every other output applies
        os.close(fd)
        try:
            fig.savefig(tmp, format=fmt, dpi=dpi)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        out[fmt] = target.name
    return out


def _csv(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    buffer = io.StringIO()
    fields = list(dict.fromkeys(k for r in rows for k in r))
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: ("" if r.get(k) is None else r.get(k)) for k in fields} for r in rows)
    return buffer.getvalue()


def fingerprint(sweep: SweepData, latency: Sequence[Path]) -> list[list[Any]]:
    """(file, size, mtime) of every input: a report is up to date when this has not changed."""
    files = sorted({*sweep.input_files(), *(Path(p).resolve() for p in latency)})
    return [[str(p), p.stat().st_size, p.stat().st_mtime_ns] for p in files if p.is_file()]


def build_report(sweep_dir: str | Path, out_dir: str | Path | None = None, latency: Sequence[str | Path] = (),
                 formats: Sequence[str] = ("png", "pdf"), n_boot: int = 1000, seed: int = 0) -> Report:
    """Compute every table and figure the sweep's files allow and write them (see the module docstring)."""
    sweep = load(sweep_dir)
    out = Path(out_dir) if out_dir else sweep.dir / REPORT_DIR
    latency_files = [Path(p) for p in latency] or sweep.latency_files()
    report = Report(dir=out, meta={"sweep_dir": str(sweep.dir), "runs": [r.name for r in sweep.runs],
                                   "unfinished": sweep.unfinished, "swept": sweep.swept,
                                   "bootstrap": n_boot, "seed": seed,
                                   "latency_files": [str(p) for p in latency_files]})

    def figure(name: str, fig) -> None:
        report.figures[name] = save_figure(fig, out / name, formats)

    def part(name: str, items: Sequence[Any], rows: Callable[[Sequence[Any]], list[dict[str, Any]]], missing: str,
             markdown: Callable | None = None, plot: Callable | None = None, drawn_as: str | None = None) -> None:
        """One part of the report: its table (`name`.csv), markdown and figure (`drawn_as`, else `name`) when the
        sweep has `items` for it, else why not (`missing`)."""
        if not items:
            report.skipped[drawn_as or name] = missing
            return
        report.tables[name] = rows(items)
        if markdown is not None:
            report.meta[f"{name}_md"] = markdown(items)
        if plot is not None:
            figure(drawn_as or name, plot(items))

    def flat(items: Sequence[Any]) -> list[dict[str, Any]]:
        return [item.flat() for item in items]

    # Table 1
    part("table1", table1_mod.table1_rows(sweep, n_boot=n_boot, seed=seed), flat,
         "no judge results with correctness/faithfulness in answers.jsonl (run with judge=liverag or judge=full)",
         table1_mod.to_markdown, table1_mod.plot)
    # Fig. 4
    part("recall_at_k", recall_mod.recall_curves(sweep, n_boot=min(n_boot, 200), seed=seed),
         lambda curves: [p for c in curves for p in c.points()],
         "no questions with gold documents and a single/multi hop label", plot=recall_mod.plot,
         drawn_as="fig4_recall_at_k")
    measures = recall_mod.measure_rows(sweep, n_boot=min(n_boot, 200), seed=seed)
    if measures:  # trec_eval measures beside Fig. 4 (metrics.retrieval_measures)
        report.tables["retrieval_measures"] = measures
        report.meta["retrieval_measures_md"] = recall_mod.measures_markdown(measures)
    # Fig. 5
    lat_curves, headers = latency_mod.latency_curves(sweep, latency_files)
    if lat_curves:
        report.tables["latency_at_k"] = [p for c in lat_curves for p in c.points()]
        report.meta["latency_benchmarks"] = headers
        figure("fig5_latency_at_k", latency_mod.plot(lat_curves))
    else:
        report.skipped["fig5_latency_at_k"] = (
            "no benchmark results (put benchmarks/latency_at_k.py output as latency_at_k*.json in the sweep "
            "folder or pass --latency) and no run whose retrieve/rerank stage computed every question "
            "(the stage cache served them)")
    # agreement: never between runs scored against different nugget sets
    conflicts = sweep.nugget_set_conflicts
    report.meta["nugget_sets"] = [c.notice() for c in conflicts.values()]
    clashing = [r for r in sweep.agreement
                if any(str(r.get(k, "")).startswith(tuple(conflicts)) for k in ("eval_a", "eval_b"))]
    matrices = agreement_mod.agreement_matrices(sweep.agreement) if not clashing else []
    if clashing:
        report.skipped["agreement"] = (f"agreement.csv pairs nugget-based scores of runs that used different nugget "
                                       f"sets ({report.meta['nugget_sets'][0]}); run python -m eval.pool "
                                       f"sweep_dir={sweep.dir}")
    elif matrices:
        report.tables["agreement"] = sweep.agreement
        figure("agreement", agreement_mod.plot(matrices))
    else:
        report.skipped["agreement"] = "no agreement.csv in the sweep folder (written by the sweep summary when " \
                                      "two evaluations exist in at least two complete cells)"
    # strategy comparison: quality means with the sweep summary's significance marks
    comparison = comparison_mod.to_markdown(sweep)
    if comparison:
        report.tables["strategy_comparison"] = comparison_mod.comparison_rows(sweep)
        report.meta["strategy_comparison_md"] = comparison
    else:
        report.meta["strategy_comparison_md"] = (
            "Not tested: no significance.json in the sweep folder (the sweep summary writes it when at least two "
            "cells finished: `python -m eval.summary SWEEP_DIR`).\n")
    # strategy cost
    part("strategy_cost", cost_mod.strategy_costs(sweep), lambda costs: [c.per_question() for c in costs],
         "no finished runs", plot=cost_mod.plot)
    # corpus attacks: ASR and accuracy against planted passages per strategy (experiment=poisoning)
    part("attack", attack_mod.attack_points(sweep), flat,
         "no attacked runs (attack=poisonedrag or prompt_injection, metrics asr)", attack_mod.to_markdown,
         attack_mod.plot)
    # the leaderboard: named systems (`system:` in their experiment files) beside their published scores
    part("leaderboard", leaderboard_mod.leaderboard_rows(sweep), flat,
         "no finished run names a system (experiment=liverag_grag, ragtifier, ...)", leaderboard_mod.to_markdown)
    # battles: an LLM judge's side-by-side preferences between cells (eval.battles), rated
    part("battles", battles_mod.battle_board(sweep), lambda board: flat(board.ratings),
         "no battles in the sweep folder (python -m eval.battles SWEEP, or hydra.callbacks.sweep_summary.battles=true)",
         battles_mod.to_markdown, battles_mod.plot)

    for name in report.skipped:  # a part that cannot be drawn now leaves no figure or table of an earlier build
        files = [out / f"{name}.{ext}" for ext in {*formats, "png", "pdf", "svg", "csv"}]
        files.append(out / f"{TABLE_OF.get(name, name)}.csv")
        for stale in files:
            stale.unlink(missing_ok=True)
    for name, rows in report.tables.items():
        atomic_write_text(out / f"{name}.csv", _csv(rows))
    report.meta["fingerprint"] = fingerprint(sweep, latency_files)
    atomic_write_text(out / "report.md", to_markdown(report))
    atomic_write_json(out / REPORT_JSON, report.to_json())
    log.info("report written to %s (%d figures, %d skipped)", out, len(report.figures), len(report.skipped))
    return report


def _md_table(rows: list[dict[str, Any]], columns: Sequence[str] | None = None) -> list[str]:
    if not rows:
        return []
    columns = list(columns or dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        lines.append("| " + " | ".join("" if r.get(c) is None else str(r.get(c)).replace("|", "\\|")
                                       for c in columns) + " |")
    return lines


def to_markdown(report: Report) -> str:
    meta = report.meta
    lines = [f"# Sweep report: {Path(meta['sweep_dir']).name}", "", f"Folder: `{meta['sweep_dir']}`  ",
             f"Runs: {len(meta['runs'])} finished"
             + (f", {len(meta['unfinished'])} unfinished ({', '.join(meta['unfinished'])})"
                if meta["unfinished"] else "") + "  ",
             f"Swept: {', '.join(meta['swept']) or '-'}  ",
             f"Bootstrap: {meta['bootstrap']} resamples, seed {meta['seed']}", ""]
    for name, title in FIGURES.items():
        lines += [f"## {title}", ""]
        if name in report.figures:
            files = report.figures[name]
            lines.append(f"![{title}]({files.get('png', next(iter(files.values())))})")
            if "pdf" in files:
                lines.append(f"\n[PDF]({files['pdf']})")
            lines.append("")
        elif not (name == "leaderboard" and meta.get("leaderboard_md")):  # a table, never a figure
            lines += [f"Not drawn: {report.skipped.get(name, 'no data')}.", ""]
        if name == "table1" and meta.get("table1_md"):
            lines += [meta["table1_md"]]
        elif name == "fig4_recall_at_k" and meta.get("retrieval_measures_md"):
            lines += ["trec_eval measures of each run's lists (ir-measures; mean over judged questions, 95% "
                      "bootstrap interval; `retrieval_measures.csv`):", "", meta["retrieval_measures_md"]]
        elif name == "fig5_latency_at_k" and meta.get("latency_benchmarks"):
            for header in meta["latency_benchmarks"]:
                machine = header.get("machine") or {}
                lines.append(f"Benchmark `{header['file']}`: {header.get('command', '')}; machine "
                             f"{machine.get('cpu', '?')} ({machine.get('cores', '?')} cores); load "
                             f"{header.get('load', '?')}; {header.get('n_questions', '?')} questions.")
                for what, why in (header.get("skipped") or {}).items():
                    lines.append(f"- not measured: {what}: {why}")
            lines.append("")
        elif name == "battles" and meta.get("battles_md"):
            lines += [meta["battles_md"]]
        elif name == "attack" and meta.get("attack_md"):
            lines += [meta["attack_md"]]
        elif name == "leaderboard" and meta.get("leaderboard_md"):
            lines += [meta["leaderboard_md"]]
        elif name == "strategy_cost" and "strategy_cost" in report.tables:
            lines += _md_table(report.tables["strategy_cost"]) + [""]
    if meta.get("strategy_comparison_md"):
        lines += ["## Strategy comparison: which differences are real", "", meta["strategy_comparison_md"]]
    lines += nugget_set_lines(meta.get("nugget_sets") or [])
    return "\n".join(lines) + "\n"


def nugget_set_lines(notices: Sequence[str]) -> list[str]:
    """report.md's word on nugget-based scores: one line per judge whose runs used different nugget sets."""
    if not notices:
        return []
    return ["## Nugget-based scores", "", "Runs are compared on a nugget-based metric only over topics scored "
            "against the same nugget set; these differ:", "", *(f"- {n}" for n in notices), ""]


def load_report(sweep_dir: str | Path) -> Report | None:
    """The report last written for a sweep, or None."""
    import json

    folder = Path(sweep_dir) / REPORT_DIR
    path = folder / REPORT_JSON
    if not path.is_file():
        return None
    return Report.from_json(folder, json.loads(path.read_text(encoding="utf-8")))


def ensure_report(sweep_dir: str | Path, **kwargs: Any) -> Report:
    """The sweep's report, rebuilt only when an input changed since it was written."""
    existing = load_report(sweep_dir)
    if existing is not None:
        sweep = load(sweep_dir)
        latency = [Path(p) for p in existing.meta.get("latency_files", [])]
        if existing.meta.get("fingerprint") == fingerprint(sweep, latency):
            return existing
    return build_report(sweep_dir, **kwargs)


def report_after_sweep(sweep_dir: str | Path) -> Report | None:
    """For the sweep-summary callback: write the report, log (never raise) when it fails."""
    from rag.core.errors import ONE_LINE_ERRORS

    try:
        report = ensure_report(sweep_dir)
    except ONE_LINE_ERRORS as err:  # e.g. no cell finished: said in one line, the failed cells said why
        log.warning("sweep report not written: %s", str(err).splitlines()[0])
        return None
    except Exception:  # noqa: BLE001 - the sweep's results are on disk; the report can be rebuilt by hand
        log.exception("sweep report failed; rerun `python -m rag.report %s`", sweep_dir)
        return None
    log.info("sweep report: %s", report.dir / "report.md")
    return report
