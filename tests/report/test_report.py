"""`python -m rag.report` on a real small sweep, checked against what the pipeline and the judges computed."""

from __future__ import annotations

import csv
import json
import math

import pytest

from rag.report import build_report, load, recall_curves, strategy_costs, table1_rows
from rag.report.data import TABLE1_FIELDS
from tests.cluster.helpers import run_module

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]


def test_report_command_writes_figures_tables_and_markdown(small_sweep):
    proc = run_module("rag.report", [str(small_sweep), "--bootstrap", "200"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = small_sweep / "report"
    report = json.loads((out / "report.json").read_text())
    # the sweep-summary callback already wrote a report; the command rewrote it with 200 resamples
    assert report["meta"]["bootstrap"] == 200
    for name in ("table1", "fig4_recall_at_k", "agreement", "strategy_cost"):
        for fmt in ("png", "pdf"):
            path = out / report["figures"][name][fmt]
            assert path.stat().st_size > 1000, path
        assert (out / report["figures"][name]["png"]).read_bytes()[:4] == b"\x89PNG"
    markdown = (out / "report.md").read_text()
    for files in report["figures"].values():
        assert f"]({files['png']})" in markdown
    assert "Judge `liverag`, single-hop" in markdown and "Judge `liverag`, multi-hop" in markdown
    # Fig. 5 needs real stage work or a benchmark file; a skip is said in the report, never drawn empty
    if "fig5_latency_at_k" not in report["figures"]:
        assert "Not drawn" in markdown.split("## Fig. 5")[1]
    assert not list(out.glob(".*.tmp")) and not list(out.glob(".*.png"))


def test_table1_matches_the_judges_own_metrics(small_sweep):
    sweep = load(small_sweep)
    assert {r.strategy for r in sweep.runs} == {"simple", "extractive"}
    rows = table1_rows(sweep, n_boot=300)
    assert {(r.strategy, r.hop) for r in rows} == {(s, h) for s in ("simple", "extractive")
                                                   for h in ("single", "multi")}
    for row in rows:
        metrics = next(r.metrics for r in sweep.runs if r.name == row.run)
        for name, values in TABLE1_FIELDS.items():
            shares = [row.shares[(name, v)][0] for v in values]
            if row.n[name] == 0:
                assert all(math.isnan(s) for s in shares)
                continue
            assert sum(shares) == pytest.approx(1.0)
            for value, (share, lo, hi) in zip(values, (row.shares[(name, v)] for v in values)):
                # eval.report computed the same share for metrics.json from the same records
                assert share == pytest.approx(metrics[f"judge/liverag/{name}_share_{value}/{row.hop}"])
                if row.n[name] >= 2:
                    assert lo <= share <= hi
                else:  # one answer: a bootstrap has no spread, so no interval (never a zero-width one)
                    assert math.isnan(lo) and math.isnan(hi)


def test_recall_curves_end_where_the_pipeline_metrics_are(small_sweep):
    sweep = load(small_sweep)
    curves = recall_curves(sweep, n_boot=100)
    by = {(c.stage, c.split): c for c in curves}
    assert set(by) == {(s, p) for s in ("retrieval", "rerank") for p in ("single", "multi_all", "multi_any")}
    run = sweep.runs[0]
    assert by[("retrieval", "single")].ks == list(range(1, 21))
    assert by[("rerank", "single")].ks == [1, 2]
    for (stage, split), curve in by.items():
        k = 20 if stage == "retrieval" else 2
        hop, suffix = ("single", "") if split == "single" else ("multi", "_" + split.split("_")[1])
        assert curve.mean[-1] == pytest.approx(run.metrics[f"recall/{stage}@{k}{suffix}/{hop}"])
        assert all(a <= b + 1e-12 for a, b in zip(curve.mean, curve.mean[1:]))  # recall@k never drops with k


def test_strategy_cost_sums_the_runs_metrics(small_sweep):
    sweep = load(small_sweep)
    costs = {c.strategy: c.per_question() for c in strategy_costs(sweep)}
    for run in sweep.runs:
        m = run.metrics
        row = costs[run.strategy]
        assert row["llm_requests_measured_per_q"] == pytest.approx((m["llm_calls"] + m["llm_cache_hits"]) / 2,
                                                                   abs=1e-3)
        assert row["generate_seconds_per_q"] == pytest.approx(m["time/generate_s"] / 2, abs=1e-3)
    # Simple asks the model once per question, the extractive strategy never
    assert costs["simple"]["llm_requests_needed_per_q"] == 1 and costs["extractive"]["llm_requests_needed_per_q"] == 0
    assert costs["simple"]["llm_requests_measured_per_q"] == 1


def test_report_reads_agreement_and_latency_files(small_sweep, tmp_path):
    latency = tmp_path / "latency_at_k.json"
    latency.write_text(json.dumps({
        "command": "python benchmarks/latency_at_k.py", "machine": {"cpu": "test", "cores": 2}, "load": "1.0",
        "n_questions": 3, "retrievers": {"bm25": {"k": [1, 10, 100], "p50_s": [0.001, 0.002, 0.004],
                                                   "p95_s": [0.002, 0.003, 0.006], "n_questions": 3}},
        "rerankers": {"dense": {"candidates": [1, 10], "p50_s": [0.01, 0.05], "p95_s": [0.02, 0.06],
                                "n_questions": 3}}}))
    report = build_report(small_sweep, out_dir=tmp_path / "out", latency=[latency], n_boot=50, formats=["png"])
    assert "fig5_latency_at_k" in report.figures
    points = list(csv.DictReader((tmp_path / "out" / "latency_at_k.csv").read_text().splitlines()))
    assert [(p["curve"], p["k"], p["p50_s"]) for p in points if p["source"] == "benchmark"][:3] == [
        ("bm25 (benchmark)", "1", "0.001"), ("bm25 (benchmark)", "10", "0.002"), ("bm25 (benchmark)", "100", "0.004")]
    agreement = list(csv.DictReader((small_sweep / "agreement.csv").read_text().splitlines()))
    assert len(report.tables["agreement"]) == len(agreement)


def test_a_rerun_of_a_finished_sweep_reports_what_strategies_need_and_removes_stale_figures(small_sweep,
                                                                                            small_sweep_cache, tmp_path):
    """Issue 25, fault 5: rerunning a finished sweep (every answer resumed) showed `llm_requests_per_q 0.0`, and
    a figure that could no longer be drawn kept last time's files; figures were 0600. Issue 36: the rerun keeps
    the measured work, so the rebuilt report's cost table is the first one."""
    import shutil
    import stat

    from tests.cluster.helpers import rag_env, rag_main
    from tests.report.conftest import SWEEP_ARGS

    sweep = tmp_path / "sweep"
    shutil.copytree(small_sweep, sweep)
    first = build_report(sweep, formats=("png",), n_boot=50)
    report_dir = first.dir
    stale = report_dir / "fig5_latency_at_k.png"
    stale.write_bytes(b"\x89PNG last time's figure")
    (report_dir / "latency_at_k.csv").write_text("k,seconds\n1,0.5\n")
    # the same sweep again into its own folder: every cell resumes its answers, nothing is generated
    proc = rag_main([*SWEEP_ARGS, f"hydra.sweep.dir={sweep}"], rag_env(tmp_path, cache=small_sweep_cache), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = build_report(sweep, formats=("png",), n_boot=50)
    cost = {r["strategy"]: r for r in again.tables["strategy_cost"]}
    assert again.tables["strategy_cost"] == first.tables["strategy_cost"]  # the measured work, not the rerun's
    assert cost["simple"]["llm_requests_needed_per_q"] == 1  # Simple needs one request per question
    assert set(again.figures) == set(first.figures) and again.skipped == first.skipped
    if "fig5_latency_at_k" in again.skipped:  # no measured stage timings: last time's files are gone
        assert not stale.exists() and not (report_dir / "latency_at_k.csv").exists()
    else:  # drawn again from the measured timings
        assert stale.read_bytes()[:4] == b"\x89PNG" and b"last time" not in stale.read_bytes()
    for name in again.figures:
        mode = stat.S_IMODE((report_dir / again.figures[name]["png"]).stat().st_mode)
        assert mode & 0o044, (name, oct(mode))  # readable by the group and others under the usual umask 022
