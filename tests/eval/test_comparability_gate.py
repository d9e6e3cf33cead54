"""Issue 51, item 2: one comparability gate (`rag.judge.nugget_sets.NuggetSetGate`) for every consumer of a sweep.

One sweep of two cells whose nugget scores were made with different nugget sets on every topic goes to every
consumer: significance.json, summary.md (cells table, best table, "which differences are real"), summary.json,
best.csv, W&B's summary scalars, the agreement, the AutoJudge leaderboards of `eval.summary --leaderboards`, and
the report (strategy comparison, Table 1 / leaderboard marks). None ranks or marks the nugget column; each carries
the gate's one-line notice; answer F1, measured alike in both cells, is still marked. The cells are
`test_significance`'s hand-made ones (`_cell`), with the nugget means added to their metrics.json.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from test_pool import _table_column
from test_significance import N, _cell

from eval.agreement import NuggetSetMismatch, check_nugget_sets, load_run
from eval.autojudge import LEADERBOARD_DIR, NOT_RANKED_FILE
from eval.summary import best_scalars, collect
from eval.summary import main as summary_main
from rag.metrics.stats import min_detectable_difference
from rag.report.build import build_report
from rag.report.data import load

NUGGET = "nuggets/vital_strict/all"
F1 = "answer/f1/all"


def _sweep(root: Path, sets: dict[str, list[str | None]]) -> Path:
    """Two cells (a, and c with F1 planted +0.3; the nugget score is the F1), nugget set of each answer as given
    (None: no set recorded), the nugget means and a system name (for the report's leaderboard) in each cell."""
    rng = np.random.default_rng(0)
    sweep = root / "multirun" / "2025-03-03" / "10-00-00"
    base, correctness = rng.uniform(0.1, 0.6, N), rng.integers(-1, 3, N)
    for num, (name, shift) in enumerate((("a", 0.0), ("c", 0.3))):
        f1 = np.clip(base + shift + rng.normal(0, 0.02, N), 0, 1)
        _cell(sweep, num, name, f1, correctness, sets[name])
        cell = next(sweep.glob(f"{num}_*"))
        metrics = json.loads((cell / "metrics.json").read_text())
        for split, keep in (("all", lambda i: True), ("single", lambda i: i % 3), ("multi", lambda i: not i % 3)):
            metrics[f"nuggets/vital_strict/{split}"] = float(np.mean([f1[i] for i in range(N) if keep(i)]))
        (cell / "metrics.json").write_text(json.dumps(metrics))
        (cell / "config.json").write_text(json.dumps({"system": {"name": f"system-{name}"}}))
    return sweep


@pytest.fixture
def different_sets(tmp_path) -> Path:
    """Every topic scored against another nugget set in each cell: no paired nugget test is possible at all."""
    return _sweep(tmp_path, {"a": [f"a{i}" for i in range(N)], "c": [f"c{i}" for i in range(N)]})


def test_every_consumer_refuses_to_rank_a_column_scored_against_different_nugget_sets(different_sets, capsys):
    sweep = different_sets
    cells = sorted(p.name for p in sweep.iterdir() if (p / ".hydra").is_dir())
    assert summary_main([str(sweep), "--no-wandb", "--leaderboards"]) == 0
    capsys.readouterr()
    summary_json = json.loads((sweep / "summary.json").read_text())
    notice = summary_json["not_ranked"][NUGGET]["notice"]
    assert notice.startswith(f"{NUGGET}: not ranked; cells #0, #1 scored topic(s) q0, q1, q10, q11, q12 and 25 more "
                             f"against different nugget sets (python -m eval.pool sweep_dir={sweep}")
    assert "\n" not in notice and NUGGET not in summary_json["best"]
    assert summary_json["best"][F1]["cells"] == [cells[1]]

    # significance.json: no best / tied entry for any nugget column, the gate's notice instead
    significance = json.loads((sweep / "significance.json").read_text())
    assert not [c for c in significance["marks"] if c.startswith("nuggets/")]
    assert significance["not_ranked"][NUGGET] == notice
    assert {f"nuggets/{f}/{s}" for f in ("vital_strict", "all") for s in ("all", "single", "multi")} <= \
        set(significance["not_ranked"]) and all(c.startswith("nuggets/") for c in significance["not_ranked"])
    assert significance["marks"][F1] == {"best": [cells[1]], "tied": []}  # the planted difference, really tested

    # summary.md: no bold in the nugget column, no row in "which differences are real", the notice in both places
    markdown = (sweep / "summary.md").read_text()
    assert not any("**" in c for c in _table_column(markdown, NUGGET))
    assert sum("**" in c for c in _table_column(markdown, F1)) == 1
    real = markdown.split("## Which differences are real")[1]
    assert f"| {F1} | generator=c | none: significantly better than every other cell |" in real
    assert not [x for x in real.splitlines() if x.startswith(f"| {NUGGET}")]
    assert f"- {notice}" in real and f"| {NUGGET} | not ranked | | {notice} |" in markdown
    best = {r["metric"]: r for r in csv.DictReader((sweep / "best.csv").open())}
    assert best[NUGGET]["value"] == "" and best[NUGGET]["note"].startswith(f"{NUGGET}: not ranked; cells {cells[0]}")

    # W&B: no best across nugget sets, the notice instead
    scalars = best_scalars(collect(sweep))
    assert not [k for k in scalars if k.startswith(("best/nuggets/", "best_cell/nuggets/"))]
    assert scalars[f"not_ranked/{NUGGET}"] == notice and scalars[f"best_cell/{F1}"] == cells[1]

    # the agreement: refused in one line, no table
    assert "No agreement table: nuggets/" in markdown and not (sweep / "agreement.csv").exists()
    with pytest.raises(NuggetSetMismatch, match="distinct nugget sets"):
        check_nugget_sets([load_run(sweep / c, c) for c in cells], ["nuggets/vital_strict"])

    # AutoJudge leaderboards: no ranking of the nugget evaluation, its notice written instead
    boards = sweep / LEADERBOARD_DIR
    assert not (boards / "nuggets-vital_strict.txt").exists() and (boards / "scores-f1.txt").is_file()
    assert "nuggets/vital_strict: not ranked; cells " in (boards / NOT_RANKED_FILE).read_text()

    # the report: no nugget column in the strategy comparison, F1 still marked; the leaderboard marks F1
    report = build_report(sweep, formats=("png",), n_boot=10)
    rows = report.tables["strategy_comparison"]
    assert not [k for r in rows for k in r if k.startswith("nuggets/")]
    assert {r["run"]: r[f"{F1} mark"] for r in rows} == {cells[0]: "", cells[1]: "best"}
    comparison = report.meta["strategy_comparison_md"]
    assert "nuggets/vital_strict |" not in comparison and f"- {NUGGET}: not ranked; cells " in comparison
    assert {r["run"]: r["answer F1 mark"] for r in report.tables["leaderboard"]} == {cells[0]: "", cells[1]: "best"}
    assert "- nuggets/*: not ranked; cells " in (sweep / "report" / "report.md").read_text()

    # ... and the report asks the gate itself: an older significance.json that still marks the column is not obeyed
    significance["marks"][NUGGET] = {"best": [cells[1]], "tied": []}
    del significance["not_ranked"]
    (sweep / "significance.json").write_text(json.dumps(significance))
    data = load(sweep)
    assert data.mark(NUGGET, cells[1]) is None and data.mark(F1, cells[1]) == "best"
    report = build_report(sweep, formats=("png",), n_boot=10)
    assert not [k for r in report.tables["strategy_comparison"] for k in r if k.startswith("nuggets/")]
    assert f"- {NUGGET}: not ranked; cells " in report.meta["strategy_comparison_md"]


def test_a_column_without_a_p_value_gets_no_best(tmp_path):
    """Each cell recorded nugget sets for the other half of the topics: the gate finds no topic scored against two
    sets (rankable), but no question is left to test, so no comparison has a p-value: `not_tested`, no best and no
    "significantly better than every other cell"."""
    half = N // 2
    sweep = _sweep(tmp_path, {"a": [f"s{i}" if i < half else None for i in range(N)],
                              "c": [None if i < half else f"s{i}" for i in range(N)]})
    assert summary_main([str(sweep), "--no-wandb"]) == 0
    significance = json.loads((sweep / "significance.json").read_text())
    assert NUGGET not in significance["marks"] and NUGGET not in significance["not_ranked"]
    assert "no comparison of the column has a p-value" in significance["not_tested"][NUGGET]
    markdown = (sweep / "summary.md").read_text()
    assert not any("**" in c for c in _table_column(markdown, NUGGET))
    real = markdown.split("## Which differences are real")[1]
    assert not [x for x in real.splitlines() if x.startswith(f"| {NUGGET}")]
    assert f"- {NUGGET}: not tested; no comparison" in real
    assert significance["marks"][F1] == {"best": [sorted(p.name for p in sweep.glob("1_*"))[0]], "tied": []}


def test_the_minimum_detectable_difference_names_its_family_wise_level(different_sets):
    assert summary_main([str(different_sets), "--no-wandb"]) == 0
    significance = json.loads((different_sets / "significance.json").read_text())
    mdd = significance["mdd"][F1]
    assert mdd["family_size"] == 3  # one pair x three splits: answer F1's family
    assert mdd["alpha"] == 0.05 and mdd["alpha_familywise"] == pytest.approx(0.05 / 3)
    assert mdd["familywise_level"].startswith("alpha / m (Bonferroni; the threshold of Holm's first")
    assert mdd["mdd_familywise"] == pytest.approx(min_detectable_difference(mdd["sd_difference"], N, 0.05 / 3))
    assert mdd["mdd"] == pytest.approx(min_detectable_difference(mdd["sd_difference"], N, 0.05))
    assert mdd["mdd_familywise"] > mdd["mdd"]
    markdown = (different_sets / "summary.md").read_text()
    assert "family-wise, at alpha / m (Bonferroni; the threshold of Holm's first, most stringent step)" in markdown
    assert f"differences below {mdd['mdd_familywise']:.3g} at the family-wise alpha 0.05/3 = 0.0167 " \
           f"({mdd['mdd']:.3g} at alpha 0.05 uncorrected)" in markdown
    report = build_report(different_sets, formats=("png",), n_boot=10)
    assert f"{mdd['mdd_familywise']:.3g} family-wise (alpha 0.05/3)" in report.meta["strategy_comparison_md"]
