"""A new judge is one class plus one YAML: from the test folder it is composed, run, and seen by agreement, the
sweep summary, the report and W&B without a line of the project naming it (issue 24's proof)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml
from evaltools import REPO
from hydra import compose, initialize_config_dir
from scipy.stats import kendalltau

from eval.main import rejudge
from eval.summary import summarize
from rag.core.io import atomic_write_jsonl, read_jsonl
from rag.loggers.wandb_logger import WandbLogger
from rag.records import load_answer_records
from rag.report.agreement import agreement_matrices
from rag.report.build import build_report
from tests.cluster.helpers import offline_runs, read_wandb_run, wandb_table

TEST_CONF = Path(__file__).parent / "conf"
NEW = "judge/answer_length/words"
#: per cell, per topic: the answer's length in words, and the (legacy-file) nugget score of that answer
WORDS = [[3, 5, 2], [6, 6, 4], [1, 2, 2], [9, 7, 8]]
VITAL = [[0.5, 0.5, 0.0], [1.0, 0.5, 0.5], [0.0, 0.0, 0.5], [1.0, 1.0, 0.5]]


def _sweep(root: Path) -> Path:
    sweep = root / "multirun" / "2026-12-02" / "10-00-00"
    for c, (words, vital) in enumerate(zip(WORDS, VITAL)):
        cell = sweep / f"{c}_cell"  # (Hydra would name it 0_rerank.k=1; `=` needs quoting in an override)
        (cell / ".hydra").mkdir(parents=True)
        (cell / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"rerank.k={c + 1}"]))
        rows = [{"id": f"q{t}", "question": f"Q{t}?", "answer": " ".join(["word"] * n), "hop": "single",
                 "scores": {"f1": 0.2}, "nuggets": {"vital_strict": v, "all_strict": v, "vital": v, "all": v}}
                for t, (n, v) in enumerate(zip(words, vital))]
        atomic_write_jsonl(cell / "answers.jsonl", rows)
        (cell / "metrics.json").write_text(json.dumps({"nuggets/vital_strict/all": sum(vital) / 3}))
        # the run's engine (the new judge asks none): a real engine class from the test folder
        (cell / "config.json").write_text(json.dumps({"llm": {"_target_": "evaltools.FixedReplyEngine",
                                                              "reply": "{}", "model": "fixed"}}))
    return sweep


@pytest.fixture(scope="module")
def judged_sweep(tmp_path_factory) -> Path:
    sweep = _sweep(tmp_path_factory.mktemp("newjudge"))
    cache = tmp_path_factory.mktemp("newjudge_cache")
    for cell in sorted(p for p in sweep.iterdir() if p.is_dir()):
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            cfg = compose("eval", overrides=[f"hydra.searchpath=[file://{TEST_CONF}]", f"run_dir={cell}",
                                             "judge=[answer_length]", f"cache_dir={cache}"])
        rejudge(cfg)
    return sweep


def test_the_new_judge_writes_under_judges_and_its_metrics(judged_sweep):
    first = next(judged_sweep.glob("0_*"))
    rows = read_jsonl(first / "answers.jsonl")
    assert [r["judges"]["answer_length"] for r in rows] == [{"words": n} for n in WORDS[0]]
    assert "nuggets" not in rows[0] and rows[0]["judges"]["nuggets"]["vital_strict"] == VITAL[0][0]
    metrics = json.loads((first / "metrics.json").read_text())
    assert metrics[f"{NEW}/all"] == pytest.approx(sum(WORDS[0]) / 3)
    assert metrics["nuggets/vital_strict/all"] == pytest.approx(sum(VITAL[0]) / 3)  # kept from the run


def test_agreement_and_summary_pair_the_new_judge_with_the_reference(judged_sweep):
    summary = summarize(judged_sweep, wandb={"project": "newjudge", "mode": "offline"}, n_boot=20)
    assert NEW in summary.agreement.rows and "nuggets/vital_strict" in summary.agreement.cols
    with open(judged_sweep / "agreement.csv", encoding="utf-8") as handle:
        pairs = {(r["eval_a"], r["eval_b"]): r for r in csv.DictReader(handle)}
    cell = pairs[(NEW, "nuggets/vital_strict")]
    expected = kendalltau([sum(w) / 3 for w in WORDS], [sum(v) / 3 for v in VITAL]).statistic
    assert float(cell["tau_b"]) == pytest.approx(expected, abs=1e-12)
    assert cell["reference"] == "nuggets/vital_strict"  # the nugget judge declares itself the reference
    with open(judged_sweep / "summary.csv", encoding="utf-8") as handle:
        assert f"{NEW}/all" in next(csv.reader(handle))
    logged = read_wandb_run(offline_runs(judged_sweep)[0])
    assert logged["summary"]["agreement/answer_length/words/vital_strict/tau_b"] == pytest.approx(expected)


def test_report_and_wandb_answers_table_show_the_new_judge(judged_sweep, tmp_path):
    summarize(judged_sweep, wandb=False, n_boot=20)
    report = build_report(judged_sweep, formats=("png",), n_boot=20)
    [tau_b] = [m for m in agreement_matrices(report.tables["agreement"]) if m.measure == "tau_b"]
    assert tau_b.rows == [NEW] and "nuggets/vital_strict" in tau_b.cols
    cell = next(judged_sweep.glob("1_*"))
    WandbLogger(project="newjudge", mode="offline").log_run(
        {"llm": None}, json.loads((cell / "metrics.json").read_text()),
        [r.to_json() for r in load_answer_records(cell / "answers.jsonl")], tmp_path / "run", name="cell1")
    [run] = offline_runs(tmp_path / "run")
    table = wandb_table(run, "answers")
    column = table["columns"].index(NEW)
    assert [row[column] for row in table["data"]] == WORDS[1]
    assert table["columns"][-4:] == ["nuggets/all", "nuggets/all_strict", "nuggets/vital", "nuggets/vital_strict"]
