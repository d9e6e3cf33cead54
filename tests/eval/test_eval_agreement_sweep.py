"""Agreement over synthetic sweeps with known answers: the judge x nugget matrix against scipy (ties, a constant
side, a 2-cell sweep), the files, and the W&B summary run read back from its real offline files."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
import yaml
from scipy.stats import kendalltau

from eval.agreement import FEW_RUNS, tau_ap_a, tau_ap_b
from eval.summary import summarize, summary_run_id
from rag.core.io import atomic_write_jsonl
from tests.cluster.helpers import offline_runs, read_wandb_run, wandb_table

#: per cell: correctness per topic (3 topics) and vital_strict per topic; cells 1 and 2 tie on correctness
CORRECTNESS = [[2, 1, 0], [1, 1, 1], [2, 0, 1], [-1, 0, 1], [2, 2, 1]]
VITAL = [[1.0, 0.5, 0.0], [0.5, 0.5, 0.0], [0.5, 0.0, 0.5], [0.0, 0.0, 0.5], [1.0, 1.0, 0.5]]


def _sweep(root: Path, cells: int) -> Path:
    sweep = root / "multirun" / "2025-02-02" / "09-00-00"
    for c in range(cells):
        cell = sweep / f"{c}_rerank.k={c + 1}"
        (cell / ".hydra").mkdir(parents=True)
        (cell / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"rerank.k={c + 1}", "dataset=hotpotqa"]))
        rows = [{"id": f"q{t}", "question": f"Q{t}", "answer": "a", "hop": "single", "scores": {"f1": 0.3},
                 "judges": {"liverag": {"correctness": CORRECTNESS[c][t], "faithfulness": 1, "attempts": 1}},
                 "nuggets": {"vital_strict": VITAL[c][t], "all_strict": 0.5, "vital": VITAL[c][t], "all": 0.5,
                             "n_nuggets": 4, "n_vital": 2}} for t in range(3)]
        atomic_write_jsonl(cell / "answers.jsonl", rows)
        (cell / "metrics.json").write_text(json.dumps({
            "judge/liverag/correctness/all": sum(CORRECTNESS[c]) / 3, "judge/liverag/parse_failures": 0,
            "nuggets/vital_strict/all": sum(VITAL[c]) / 3, "nuggets/n_scored": 3, "llm_calls": 3}))
    return sweep


def _csv(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    return {(r["eval_a"], r["eval_b"]): r for r in csv.DictReader(path.open())}


def test_sweep_matrix_against_scipy_files_and_wandb(tmp_path):
    sweep = _sweep(tmp_path, 5)
    summary = summarize(sweep, wandb={"project": "agreement-test", "mode": "offline"}, n_boot=50)
    means_c = [sum(v) / 3 for v in CORRECTNESS]
    means_v = [sum(v) / 3 for v in VITAL]
    expected_b = kendalltau(means_c, means_v).statistic
    # the nugget scores are the reference; their means tie (cells 1 and 2), so tau_ap_a is undefined
    assert math.isnan(tau_ap_a(means_v, means_c))
    expected_ap_b = tau_ap_b(means_c, means_v)

    agreement = summary.agreement
    assert agreement.rows == ["judge/liverag/correctness", "judge/liverag/faithfulness"]  # never "attempts"
    assert agreement.cols == ["nuggets/all", "nuggets/all_strict", "nuggets/vital", "nuggets/vital_strict"]
    rows = _csv(sweep / "agreement.csv")
    assert len(rows) == 8  # every judge field x every nugget metric; counters (n_nuggets) never take part
    cell = rows[("judge/liverag/correctness", "nuggets/vital_strict")]
    assert float(cell["tau_b"]) == pytest.approx(expected_b, abs=1e-12)
    assert cell["tau_ap_a"] == "" and cell["reference_ties"] == "True"
    assert float(cell["tau_ap_b"]) == pytest.approx(expected_ap_b, abs=1e-12)
    assert cell["reference"] == "nuggets/vital_strict"
    assert (cell["n_runs"], cell["n_topics"], cell["reason"]) == ("5", "3", "")
    assert float(cell["tau_b_lo"]) <= float(cell["tau_b_hi"])
    flat = rows[("judge/liverag/faithfulness", "nuggets/vital_strict")]  # faithfulness is 1 everywhere
    assert flat["tau_b"] == "" and flat["tau_ap_a"] == "" and flat["reason"] == "constant: judge/liverag/faithfulness"
    both = rows[("judge/liverag/faithfulness", "nuggets/all")]
    assert both["reason"] == "constant: judge/liverag/faithfulness and nuggets/all" and both["tau_ap_a"] == ""

    md = (sweep / "summary.md").read_text()
    assert md.index("## Agreement") < md.index("## Cells")  # the matrix leads
    assert "| liverag/correctness | " in md and f"{expected_b:.3f} [" in md
    assert "liverag/faithfulness x vital_strict: constant: judge/liverag/faithfulness" in md
    assert "judge/liverag/parse_failures" not in md.split("## Cells")[0]
    assert (sweep / "agreement.png").read_bytes()[:4] == b"\x89PNG"

    [run_dir] = offline_runs(sweep)
    logged = read_wandb_run(run_dir)
    assert logged["run_id"] == summary_run_id(sweep)
    s = logged["summary"]
    assert s["agreement/liverag/correctness/vital_strict/tau_b"] == pytest.approx(expected_b, abs=1e-12)
    assert "agreement/liverag/correctness/vital_strict/tau_ap_a_ref_nuggets" not in s  # undefined: ties
    assert s["agreement/liverag/correctness/vital_strict/tau_ap_b"] == pytest.approx(expected_ap_b, abs=1e-12)
    assert s["agreement/liverag/correctness/vital_strict/n_runs"] == 5
    assert s["agreement/liverag/correctness/vital_strict/n_topics"] == 3
    assert "agreement/liverag/faithfulness/vital_strict/tau_b" not in s  # undefined: no scalar, a reason
    assert s["agreement/liverag/faithfulness/vital_strict/n_runs"] == 5
    table = wandb_table(run_dir, "sweep/agreement_matrix")
    reasons = {(r[0], r[1]): r[table["columns"].index("reason")] for r in table["data"]}
    assert reasons[("judge/liverag/faithfulness", "nuggets/vital_strict")] == "constant: judge/liverag/faithfulness"
    assert list((run_dir / "files" / "media" / "images").glob("sweep/agreement_heatmap_*.png"))
    assert set(logged["tags"]) == {f"rerank.k={k}" for k in range(1, 6)}  # swept values only


def test_two_cell_sweep_has_no_run_level_tau(tmp_path):
    sweep = _sweep(tmp_path, 2)
    summary = summarize(sweep, wandb={"project": "agreement-test", "mode": "offline"}, n_boot=20)
    pairs = summary.agreement.matrix_pairs
    assert pairs and all(math.isnan(p.tau_b) and math.isnan(p.tau_ap_a) and p.reason == FEW_RUNS for p in pairs)
    assert not any(p.tau_b_ci[0] == p.tau_b_ci[1] == 1.0 for p in pairs)  # never "perfect agreement"
    md = (sweep / "summary.md").read_text()
    assert "needs at least 3 runs" in md and "fewer than 3 runs" in md
    summary_scalars = read_wandb_run(offline_runs(sweep)[0])["summary"]
    assert not any(k.endswith("/tau_b") for k in summary_scalars)
