"""The sweep-summary W&B run carries the report: figures as images, Fig. 4/5 as native line plots, Table 1 as a
table; read back from the offline run's own files (wandb's own reader, `wandb leet inspect --json`)."""

from __future__ import annotations

import hashlib
import json
import subprocess

import pytest

from rag.report.build import FIGURES
from tests.cluster.helpers import WANDB, offline_runs, read_wandb_run, wandb_table

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]


def _charts(run_dir) -> dict[str, dict]:
    """Custom charts of an offline run: key -> panel config (`_wandb.visualize.<key>` config records)."""
    out = {}
    records = subprocess.run([WANDB, "leet", "inspect", "--json", str(run_dir)], capture_output=True, text=True,
                             timeout=120, check=True).stdout
    for line in records.splitlines():
        record = json.loads(line) if line.strip() else {}
        if record.get("type") == "config":
            for key, value in (record["config"].get("update") or {}).items():
                if key.startswith("_wandb.visualize."):
                    out[key.removeprefix("_wandb.visualize.")] = value["panel_config"]
    return out


def test_summary_run_logs_the_report(small_sweep):
    [summary_run] = offline_runs(small_sweep)
    logged = read_wandb_run(summary_run)
    assert logged["job_type"] == "sweep-summary"
    report = json.loads((small_sweep / "report" / "report.json").read_text())
    history = {k: v for item in logged["history"] for k, v in item.items()}

    # every figure of the report as an image (the report may have been rebuilt since: same figures, captions)
    assert {"table1", "fig4_recall_at_k", "strategy_cost"} <= set(report["figures"])
    for name in report["figures"]:
        assert history[f"report/{name}._type"] == "image-file"
        assert history[f"report/{name}.caption"] == FIGURES[name]
        png = (summary_run / "files" / history[f"report/{name}.path"]).read_bytes()
        assert png[:4] == b"\x89PNG" and hashlib.sha256(png).hexdigest() == history[f"report/{name}.sha256"]
        assert int.from_bytes(png[16:20], "big") == history[f"report/{name}.width"]

    # Table 1 as a W&B table with a row per strategy x judge x hop
    table1 = wandb_table(summary_run, "report/table1_table")
    assert len(table1["data"]) == len(report["tables"]["table1"]) == 4
    assert {row[table1["columns"].index("strategy")] for row in table1["data"]} == {"simple", "extractive"}

    # Fig. 4 as native line plots: a wandb/line/v0 chart per stage and split over a table of every curve point
    charts = _charts(summary_run)
    points = report["tables"]["recall_at_k"]
    panels = {(p["stage"], p["split"]) for p in points}
    assert len(panels) == 6
    for stage, split in panels:
        key = f"report/fig4_{stage}_{split}"
        chart = charts[key]
        assert chart["panelDefId"] == "wandb/line/v0"
        assert chart["fieldSettings"] == {"x": "k", "y": "recall", "stroke": "curve"}
        table = wandb_table(summary_run, f"{key}_table")
        assert table["columns"] == ["k", "recall", "curve"]
        assert table["data"] == [[p["k"], p["recall"], p["curve"]] for p in points
                                 if (p["stage"], p["split"]) == (stage, split)]
