"""The sweep report in W&B: called by the sweep-summary logger with its open run.

Logs, under `report/`, every figure of `SWEEP_DIR/report/` as a `wandb.Image`, the Fig. 4 recall curves and the
Fig. 5 runtime curves as native W&B line plots (`wandb.plot.line` over a `wandb.Table`, one chart per panel),
and Table 1, the strategy cost and the battle ratings as W&B tables, so a workspace filtered to the sweep's group
shows the report without a notebook. The report is built if it is missing or older than the sweep's files.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from rag.report.build import FIGURES, ensure_report
from rag.report.recall import SPLIT_TITLES, STAGE_TITLES

log = logging.getLogger(__name__)


def _table(rows: list[dict[str, Any]]):
    import wandb

    columns = list(dict.fromkeys(k for r in rows for k in r))
    return wandb.Table(columns=columns, data=[[r.get(c) for c in columns] for r in rows], allow_mixed_types=True)


def report_payload(sweep_dir: str | Path) -> dict[str, Any]:
    """The W&B objects to log, by key."""
    import wandb

    report = ensure_report(sweep_dir)
    payload: dict[str, Any] = {}
    for name, files in report.figures.items():
        if "png" in files:
            payload[f"report/{name}"] = wandb.Image(str(report.dir / files["png"]), caption=FIGURES.get(name, name))
    if report.tables.get("table1"):
        payload["report/table1_table"] = _table(report.tables["table1"])
    if report.tables.get("strategy_comparison"):
        payload["report/strategy_comparison_table"] = _table(report.tables["strategy_comparison"])
    if report.tables.get("strategy_cost"):
        payload["report/strategy_cost_table"] = _table(report.tables["strategy_cost"])
    if report.tables.get("battles"):  # eval.battles' ratings (the figure is logged with the others above)
        payload["report/battles_table"] = _table(report.tables["battles"])
    if report.tables.get("retrieval_measures"):  # trec_eval measures beside Fig. 4
        payload["report/retrieval_measures_table"] = _table(report.tables["retrieval_measures"])
    points = report.tables.get("recall_at_k") or []
    for stage, split in dict.fromkeys((p["stage"], p["split"]) for p in points):
        rows = [[p["k"], p["recall"], p["curve"]] for p in points if p["stage"] == stage and p["split"] == split]
        table = wandb.Table(columns=["k", "recall", "curve"], data=rows)
        payload[f"report/fig4_{stage}_{split}"] = wandb.plot.line(
            table, "k", "recall", stroke="curve",
            title=f"Fig. 4 gold-document recall@k, {STAGE_TITLES[stage]}, {SPLIT_TITLES[split]}")
    latency = report.tables.get("latency_at_k") or []
    for kind in dict.fromkeys(p["kind"] for p in latency):
        rows = []
        for p in (p for p in latency if p["kind"] == kind):
            for stat in ("p50_s", "p95_s", "mean_s"):
                if p.get(stat) is not None:
                    rows.append([p["k"], p[stat], f"{p['curve']} {stat.removesuffix('_s')}"])
        table = wandb.Table(columns=["k", "seconds", "curve"], data=rows)
        payload[f"report/fig5_{kind}"] = wandb.plot.line(
            table, "k", "seconds", stroke="curve", title=f"Fig. 5 seconds per question against k ({kind}s)")
    return payload


def log_report(run: Any, sweep_dir: str | Path) -> list[str]:
    """Log the sweep's report into the open W&B `run`; returns the keys logged. Never raises: a failure is
    logged and the summary run carries on without the report."""
    try:
        payload = report_payload(sweep_dir)
        if payload:
            run.log(payload)
        return list(payload)
    except Exception:  # noqa: BLE001 - the summary run must still finish
        log.exception("W&B sweep report failed for %s", sweep_dir)
        return []
