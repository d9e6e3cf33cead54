"""A real 3-cell sweep (BM25 b swept, 20 LiveRAG dev questions, the extractive strategy: no LLM) writes
significance.csv whose p-values and intervals are scipy's (and exact enumeration's) on the per-question scores in
the cells' answers.jsonl, the tied-with-best marks in summary.md and the report, the W&B table, and every run
prints the smallest difference it can see."""

from __future__ import annotations

import csv
import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import bootstrap, permutation_test

from tests.cluster.helpers import offline_runs, rag_env, rag_main, sweep_dirs, wandb_table

pytestmark = pytest.mark.slow

ARGS = ["-m", "dataset=liverag_dev", "dataset.limit=20", "retriever=bm25", "retriever.b=0.3,0.75,1.0",
        "generator=extractive", "generator.max_tokens=16", "logger=wandb"]


def _scores(cell: Path, key: str, split: str) -> dict[str, float]:
    rows = [json.loads(line) for line in (cell / "answers.jsonl").open()]
    return {r["id"]: r["scores"][key] for r in rows if key in r["scores"] and split in ("all", r["hop"])}


def _exact_p(diff: np.ndarray) -> float:
    flips = np.array(list(itertools.product((1.0, -1.0), repeat=len(diff))))
    return float(np.mean(np.abs((flips * diff).mean(axis=1)) >= abs(diff.mean()) - 1e-12))


def test_sweep_writes_significance_checked_against_scipy(data_dir, shared_cache, tmp_path):
    proc = rag_main(ARGS, rag_env(tmp_path, cache=shared_cache), timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.count("Smallest visible difference") == 3  # every run, as the demo prints it
    # the closing block's one line of minimum detectable differences (rag.metrics.stats.sensitivity_text)
    assert re.search(r"Smallest visible difference with 20 questions \(.*\): answer/f1 \d", proc.stdout)
    [sweep] = sweep_dirs(tmp_path / "outputs")
    cells = {p.name.split("retriever.b=")[1].split(",")[0]: p for p in sweep.iterdir() if (p / ".hydra").is_dir()}
    assert sorted(cells) == ["0.3", "0.75", "1.0"]
    rows = list(csv.DictReader((sweep / "significance.csv").open()))
    assert len(rows) > 3 * 3 and {r["split"] for r in rows} == {"all", "single", "multi"}
    checked = 0
    for row in rows:
        key = {"answer/f1": "f1"}.get(row["metric"]) or (row["metric"].replace("recall/", "recall_")
                                                          if row["metric"].startswith("recall/retrieval@") else None)
        if key is None:
            continue
        a = _scores(sweep / row["cell_a"], key, row["split"])
        b = _scores(sweep / row["cell_b"], key, row["split"])
        ids = [q for q in a if q in b]  # in answer order, as the summary pairs them (the resamples depend on it)
        x, y = np.array([a[q] for q in ids]), np.array([b[q] for q in ids])
        assert int(row["n"]) == len(ids) and float(row["difference"]) == pytest.approx((x - y).mean(), abs=1e-6)
        differ = x != y
        if differ.sum() <= 1:
            assert float(row["p"]) == 1.0
        elif row["test"].startswith("exact"):
            assert float(row["p"]) == pytest.approx(_exact_p((x - y)[differ]), abs=1e-6)
        else:
            ref = permutation_test((x, y), lambda u, v, axis: np.mean(u - v, axis=axis), permutation_type="samples",
                                   vectorized=True, n_resamples=10000, rng=np.random.default_rng(0))
            assert float(row["p"]) == pytest.approx(ref.pvalue, abs=1e-6)
        if row["ci_low"] and not np.all(x - y == (x - y)[0]):
            ci = bootstrap((x, y), lambda u, v, axis: u.mean(axis) - v.mean(axis), paired=True, vectorized=True,
                           n_resamples=2000, method="percentile", rng=np.random.default_rng(0)).confidence_interval
            assert (float(row["ci_low"]), float(row["ci_high"])) == pytest.approx((ci.low, ci.high), abs=1e-6)
        checked += 1
    assert checked >= 3 * 3 * 2  # F1 and at least one recall cutoff, every pair and split

    significance = json.loads((sweep / "significance.json").read_text())
    group = significance["marks"]["answer/f1/all"]
    assert group["best"] and set(group["best"] + group["tied"]) <= {p.name for p in cells.values()}
    md = (sweep / "summary.md").read_text()
    assert "statistically tied with the best" in md and "### The smallest difference this sweep can see" in md
    report = (sweep / "report" / "report.md").read_text()
    assert "## Strategy comparison: which differences are real" in report
    [run] = offline_runs(sweep)
    table = wandb_table(run, "sweep/significance")
    assert table["columns"][:6] == ["cell_a", "cell_b", "label_a", "label_b", "metric", "split"]
    assert len(table["data"]) == len(rows)
