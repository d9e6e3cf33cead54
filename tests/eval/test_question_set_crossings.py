"""Every consumer that ranks cells keeps a sweep's question sets apart: battles, the AutoJudge leaderboards and the
nugget-set gate, on a finished sweep over two question files that number their questions alike (as LiveRAG's dev
and live-day files both have a question "1"). Before, the shared ids joined the two files into one set, battles
judged an answer to one question against an answer to another, and the gate compared nugget sets of different
questions."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import yaml
from evaltools import ScriptedEngine, prompt_text

from eval.agreement import FEW_RUNS, NO_TOPICS
from eval.agreement import main as agreement_main
from eval.autojudge import write_leaderboards
from eval.battle_files import read_judgments, summary_line
from eval.battles import BattleJudge, Settings, describe, run_battles
from eval.significance import Settings as SignificanceSettings
from eval.significance import compare_cells
from eval.summary import summarize
from rag.core.io import atomic_write_jsonl
from rag.llm.base import LLMRequest
from rag.report.agreement import agreement_matrices
from rag.report.battles import battle_board, to_markdown
from rag.report.comparison import comparison_rows
from rag.report.comparison import to_markdown as comparison_markdown
from rag.report.data import load as load_report_data
from rag.report.leaderboard import leaderboard_rows
from rag.report.leaderboard import to_markdown as leaderboard_markdown
from rag.sweep.cells import load_sweep
from rag.sweep.gate import sweep_gate
from rag.sweep.question_sets import question_sets

#: two question files, each numbering its questions 1..3; per file two cells (a long and a short answerer)
FILES = {"dev": ("liverag_dm/dev_qa.tsv", ["What is dev one?", "What is dev two?", "What is dev three?"]),
         "live": ("liverag_dm/live.jsonl", ["What is live one?", "What is live two?", "What is live three?"])}
WORDS = {"long": "good good good", "short": "good"}
#: the nugget set each file's questions were scored against: the same topic ids, different sets
NUGGET_SETS = {"dev": "dev-set", "live": "live-set"}


def make_sweep(root: Path) -> Path:
    sweep = root / "multirun" / "2026-01-01" / "10-00-00"
    for n, (name, style) in enumerate([(f, s) for f in FILES for s in WORDS]):
        path, questions = FILES[name]
        cell = sweep / f"{n}_dataset={name},generator={style}"
        (cell / ".hydra").mkdir(parents=True)
        (cell / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"dataset={name}", f"generator={style}"]))
        rows = [{"id": str(t + 1), "question": q, "answer": f"{WORDS[style]} {name}", "hop": "single",
                 "judges": {"liverag": {"correctness": 2 if style == "long" else 0, "attempts": 1}},
                 "nuggets": {"vital_strict": 1.0 if style == "long" else 0.5}} for t, q in enumerate(questions)]
        atomic_write_jsonl(cell / "answers.jsonl", rows)
        (cell / "config.json").write_text(json.dumps({
            "paths": {"cache_dir": str(root / "cache")}, "seed": 0,
            "dataset": {"name": f"liverag_{name}", "questions": {"path": path}}}))
        (cell / "metrics.json").write_text(json.dumps({
            "judge/liverag/correctness/all": 2.0 if style == "long" else 0.0,
            "nuggets/vital_strict/all": 1.0 if style == "long" else 0.5,
            "nuggets/nugget_set": {"topics": {str(t + 1): NUGGET_SETS[name] for t in range(3)}}}))
    return sweep


def respond(request: LLMRequest) -> str:
    """The scripted battle judge: the longer response wins."""
    text = prompt_text(request)
    a = re.search(r"Response A:\n(.*?)\n\nResponse B:", text, re.S).group(1)
    b = re.search(r"Response B:\n(.*?)\n\nBriefly", text, re.S).group(1)
    verdict = "A" if len(a.split()) > len(b.split()) else "B" if len(b.split()) > len(a.split()) else "tie"
    return json.dumps({"explanation": "more detail", "verdict": verdict})


def file_of(cell: str) -> str:
    return "dev" if "dataset=dev" in cell else "live"


def test_files_that_number_their_questions_alike_are_two_question_sets(tmp_path):
    sweep = load_sweep(make_sweep(tmp_path))
    labels = question_sets(sweep.cells)
    assert {c: labels[c] for c in labels} == {c.name: f"liverag_{file_of(c.name)}" for c in sweep.cells}


def test_battles_are_scheduled_and_rated_within_each_question_set(tmp_path):
    sweep = make_sweep(tmp_path)
    engine = ScriptedEngine(respond)
    outcome = run_battles(sweep, engine, BattleJudge(max_retries=0), seed=1, settings=Settings(bootstrap=20))

    judgments = read_judgments(sweep)
    assert len(judgments) == 2 * 3 * 2  # two sets x three topics x one pair x both orders
    for j in judgments:  # never a dev cell against a live cell, each labelled with its set
        assert file_of(j.cell_a) == file_of(j.cell_b) and j.questions == f"liverag_{file_of(j.cell_a)}"
    for asked in engine.batches[0]:  # the question shown is the set's own: both answers name that file
        text = prompt_text(asked)
        shown = "dev" if "What is dev" in text else "live"
        assert text.count(f"good {shown}") == 2 and f"good {'live' if shown == 'dev' else 'dev'}" not in text

    assert set(outcome.ratings) == {"liverag_dev", "liverag_live"}
    with open(sweep / "battles" / "ratings.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["questions"], r["rank"], file_of(r["cell"]), "generator=long" in r["cell"]) for r in rows] == [
        ("liverag_dev", "1", "dev", True), ("liverag_dev", "2", "dev", False),
        ("liverag_live", "1", "live", True), ("liverag_live", "2", "live", False)]
    data = json.loads((sweep / "battles" / "ratings.json").read_text())
    assert [(s["questions"], s["n_topics"]) for s in data["question_sets"]] == [("liverag_dev", 3),
                                                                                ("liverag_live", 3)]
    assert data["ratings"]["n_topics"] == 6 and data["ratings"]["tie_parameter"] is None
    assert "within liverag_dev (3 topics)" in describe(outcome)
    line = summary_line(sweep)
    assert "liverag_dev: `0_dataset=dev,generator=long`" in line and "; liverag_live: " in line

    board = battle_board(load_report_data(sweep))  # the report: the set in every row, ranks within it
    assert board.by_set and [(r.questions, r.rank) for r in board.ratings] == [
        ("liverag_dev", 1), ("liverag_dev", 2), ("liverag_live", 1), ("liverag_live", 2)]
    assert "| questions | rank | cell |" in to_markdown(board)


def test_each_question_set_gets_its_own_autojudge_leaderboards(tmp_path):
    sweep = make_sweep(tmp_path)
    written = write_leaderboards(sweep, ["judge/*"])
    assert set(written) == {"judge/liverag/correctness@liverag_dev", "judge/liverag/correctness@liverag_live"}
    for key, path in written.items():
        label = key.split("@")[1]
        assert path.parent == sweep / "leaderboards" / label
        lines = [line.split() for line in path.read_text().splitlines()]
        assert {file_of(run) for run, *_ in lines} == {label.removeprefix("liverag_")}
        assert sorted({topic for _, _, topic, _ in lines}) == ["1", "2", "3", "all"]


def test_the_nugget_set_gate_compares_topics_within_their_question_set(tmp_path):
    sweep_dir = make_sweep(tmp_path)
    sweep = load_sweep(sweep_dir)
    gate = sweep_gate(sweep)
    assert gate.rankable("nuggets/vital_strict/all")  # topic "1" of dev and of live are different questions
    one_set = sweep_gate(sweep, question_sets={c.name: "" for c in sweep.cells})
    assert not one_set.rankable("nuggets/vital_strict/all")  # what treating them as one set said

    summary = summarize(sweep_dir, wandb=False, n_boot=20)
    assert "nuggets/vital_strict/all" not in summary.not_ranked
    best = summary.best["nuggets/vital_strict/all"].per_set
    assert {label: [file_of(c) for c in cells] for label, (_v, cells) in best.items()} == {
        "liverag_dev": ["dev"], "liverag_live": ["live"]}
    tested = compare_cells(sweep, SignificanceSettings())  # its own gate, without the summary's
    assert not tested.not_ranked.get("nuggets/vital_strict/all")
    assert tested.comparisons and all(file_of(c.a) == file_of(c.b) for c in tested.comparisons)


def test_the_agreement_table_is_computed_within_each_question_set(tmp_path):
    """Every run has topics "1".."3", but runs of different files answered different questions: one table per set,
    each over its own two runs and three topics (pooled, the four runs had no topic in common and every pair said
    so), in the summary, agreement.csv, the heatmaps, the report and `python -m eval.agreement`."""
    sweep = make_sweep(tmp_path)
    summary = summarize(sweep, wandb=False, n_boot=20)
    assert summary.agreement is None  # the one-table view is for a sweep of one set
    tables = summary.agreements.tables
    assert [t.questions for t in tables] == ["liverag_dev", "liverag_live"] and not summary.agreements.alone
    for table in tables:
        assert {file_of(r.name) for r in table.runs} == {table.questions.removeprefix("liverag_")}
        [pair] = [p for p in table.pairs if p.a == "judge/liverag/correctness"]
        assert (pair.n_runs, pair.n_topics, pair.questions) == (2, 3, table.questions)
        # the longer answer scores higher on both on every topic; two runs are too few for a run-level tau
        assert pair.tau_topic == 1.0 and pair.reason == FEW_RUNS and pair.reason != NO_TOPICS
    with open(sweep / "agreement.csv") as handle:
        assert {r["questions"] for r in csv.DictReader(handle)} == {"liverag_dev", "liverag_live"}
    assert sorted(p.name for p in sweep.glob("agreement*.png")) == ["agreement@liverag_dev.png",
                                                                     "agreement@liverag_live.png"]
    markdown = (sweep / "summary.md").read_text()
    assert "(questions: liverag_dev)" in markdown and "(questions: liverag_live)" in markdown
    assert {m.questions for m in agreement_matrices(load_report_data(sweep).agreement)} == {"liverag_dev",
                                                                                           "liverag_live"}

    assert agreement_main([str(sweep), "--out", str(tmp_path / "cli"), "--bootstrap", "20"]) == 0
    with open(tmp_path / "cli" / "agreement.csv") as handle:
        cli = [(r["questions"], r["n_runs"], r["n_topics"]) for r in csv.DictReader(handle)
               if r["eval_a"] == "judge/liverag/correctness"]
    assert cli == [("liverag_dev", "2", "3"), ("liverag_live", "2", "3")]
    assert "## Questions: liverag_dev" in (tmp_path / "cli" / "agreement.md").read_text()


def test_the_reports_comparison_and_leaderboard_rank_within_each_question_set(tmp_path):
    """The report's own tables group each set's runs and name the set: their marks rank within it, so a dev cell's
    bold is never read against a live cell's."""
    sweep = make_sweep(tmp_path)
    for cell in sorted(sweep.iterdir()):  # each cell a named system, as the LiveRAG experiments are
        config = json.loads((cell / "config.json").read_text())
        (cell / "config.json").write_text(json.dumps({**config, "system": {"name": cell.name.split(",")[1]}}))
    summarize(sweep, wandb=False, n_boot=20)
    data = load_report_data(sweep)
    rows = comparison_rows(data)
    assert [(r["questions"], file_of(r["run"])) for r in rows] == [
        ("liverag_dev", "dev"), ("liverag_dev", "dev"), ("liverag_live", "live"), ("liverag_live", "live")]
    table = comparison_markdown(data)
    assert table.startswith("| questions | strategy |") and "compare rows within a set" in table
    board = leaderboard_rows(data)
    assert [(r.questions, r.system) for r in board] == [("liverag_dev", "generator=long"),
                                                        ("liverag_dev", "generator=short"),
                                                        ("liverag_live", "generator=long"),
                                                        ("liverag_live", "generator=short")]
    assert board[0].flat()["question set"] == "liverag_dev"
    assert leaderboard_markdown(board).startswith("| question set | system |")


def test_the_reports_gate_compares_topics_within_their_question_set(tmp_path):
    report = load_report_data(make_sweep(tmp_path))
    assert report.gate.rankable("nuggets/vital_strict/all") and not report.nugget_set_conflicts


def test_a_cell_alone_in_its_question_set_is_listed_unrated(tmp_path):
    sweep = make_sweep(tmp_path)
    alone = sweep / "4_dataset=other,generator=long"
    (alone / ".hydra").mkdir(parents=True)
    (alone / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["dataset=other", "generator=long"]))
    atomic_write_jsonl(alone / "answers.jsonl", [{"id": "1", "question": "What is other one?", "answer": "good",
                                                  "hop": "single"}])
    (alone / "config.json").write_text(json.dumps({"paths": {"cache_dir": str(tmp_path / "cache")}, "seed": 0,
                                                   "dataset": {"name": "other", "questions": {"path": "o.tsv"}}}))
    (alone / "metrics.json").write_text(json.dumps({"judge/liverag/correctness/all": 1.0}))
    outcome = run_battles(sweep, ScriptedEngine(respond), BattleJudge(max_retries=0), settings=Settings(bootstrap=0))
    assert outcome.unrated == {alone.name: "other"} and set(outcome.ratings) == {"liverag_dev", "liverag_live"}
    data = json.loads((sweep / "battles" / "ratings.json").read_text())
    assert [u["cell"] for u in data["unrated"]] == [alone.name] and alone.name not in {c["cell"] for c in data["cells"]}
    assert "not rated, alone in their question set: 1 cell(s)" in summary_line(sweep)
    assert "Not rated (" in describe(outcome) and alone.name in describe(outcome)
    board = battle_board(load_report_data(sweep))
    assert board.unrated == [alone.name] and f"Not rated (no other cell answered their questions): `{alone.name}`" \
        in to_markdown(board)
    summary = summarize(sweep, wandb=False, n_boot=20)  # the agreement tables: the lone cell ranks nothing
    assert summary.agreements.alone == {"other": alone.name}
    assert [t.questions for t in summary.agreements.tables] == ["liverag_dev", "liverag_live"]
    assert f"one run in its question set: other (`{alone.name}`)" in (sweep / "summary.md").read_text()
