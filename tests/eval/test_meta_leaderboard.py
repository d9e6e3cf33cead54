"""Judges against people, per system and per label: leaderboard correlations on hand-worked cells (checked against
scipy), RAGChecker's systems ranked by annotator 1 against annotator 2, TREC nugget-assignment files (kappa by
hand, confusion matrix, bad rows named, the command end to end) and qrels against UMBRELA."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from evaltools import ScriptedEngine, factory_with, judge_root, prompt_text
from omegaconf import OmegaConf
from scipy.stats import kendalltau, spearmanr

from eval.leaderboard import kendall_at_k, leaderboard_correlation
from eval.meta import RAGCheckerPairs, human_margins, inter_annotator_leaderboard
from eval.meta_nuggets import NuggetAssignmentLabels, label_agreement
from eval.meta_qrels import QrelsLabels
from rag.core.errors import ConfigError, DataError
from tests.cluster.helpers import run_module
from tests.conftest import DATA_DIR

# 4 systems x 3 topics: judge and human scores per (system, topic)
HUMAN = {"A": [0.9, 0.8, 0.7], "B": [0.6, 0.7, 0.2], "C": [0.3, 0.4, 0.5], "D": [0.1, 0.2, 0.1]}
JUDGE = {"A": [0.8, 0.9, 0.6], "B": [0.7, 0.3, 0.1], "C": [0.5, 0.5, 0.6], "D": [0.2, 0.1, 0.3]}


def _cells(table):
    return {(s, f"t{j}"): v for s, values in table.items() for j, v in enumerate(values)}


def test_leaderboard_levels_equal_scipy_on_hand_worked_cells():
    rows = {r.level: r for r in leaderboard_correlation("judge", "human", _cells(JUDGE), _cells(HUMAN), k=3,
                                                        n_boot=200)}
    mh = np.array([np.mean(v) for v in HUMAN.values()])
    mj = np.array([np.mean(v) for v in JUDGE.values()])
    run = rows["run"]
    assert run.n_systems == 4 and run.n_topics == 3
    assert run.values["tau_b"] == pytest.approx(kendalltau(mh, mj).statistic)
    assert run.values["spearman"] == pytest.approx(spearmanr(mh, mj).statistic)
    top = np.argsort(-mh)[:3]
    assert run.values["kendall_at_3"] == pytest.approx(kendalltau(mh[top], mj[top]).statistic)
    per_topic = [kendalltau([HUMAN[s][j] for s in HUMAN], [JUDGE[s][j] for s in JUDGE]).statistic for j in range(3)]
    assert rows["topic"].values["tau_b"] == pytest.approx(np.mean(per_topic))
    flat_h = [v for s in HUMAN for v in HUMAN[s]]
    flat_j = [v for s in JUDGE for v in JUDGE[s]]
    assert rows["pooled"].values["tau_b"] == pytest.approx(kendalltau(flat_h, flat_j).statistic)
    for r in rows.values():
        for name, (lo, hi) in r.intervals.items():
            assert lo <= hi, (r.level, name)


def test_kendall_at_k_and_undefined_levels():
    assert kendall_at_k([4, 3, 2, 1], [1, 2, 3, 4], 2) == pytest.approx(-1.0)
    assert math.isnan(kendall_at_k([1, 2], [1, 2], 3))
    # two systems per topic (pairwise labels): per topic is undefined, and says why
    cells_h = {("A", "t1"): 1.0, ("B", "t1"): -1.0, ("A", "t2"): 0.5, ("C", "t2"): -0.5, ("B", "t3"): 1.0,
               ("C", "t3"): -1.0}
    cells_j = {k: v * 0.5 for k, v in cells_h.items()}
    topic = [r for r in leaderboard_correlation("j", "h", cells_j, cells_h, n_boot=10) if r.level == "topic"][0]
    assert math.isnan(topic.values["tau_b"]) and topic.reason.startswith("no topic has 3 systems")


def test_a_nearly_constant_judge_is_flagged_not_silently_correlated():
    """SmolLM2-135M gave 559 of RAGChecker's 560 answers correctness 2: its coefficients rest on one answer."""
    from eval.meta import correlate

    # 5 systems x 4 topics; the judge is constant except one cell, and constant among the humans' top 3 systems
    human = {"A": [0.9, 0.8, 0.7, 0.9], "B": [0.6, 0.7, 0.6, 0.5], "C": [0.5, 0.4, 0.5, 0.6], "D": [0.1, 0.2, 0.1, 0.3],
             "E": [0.0, 0.1, 0.2, 0.0]}
    judge = {s: [2.0] * 4 for s in human}
    judge["E"][1] = 0.0
    rows = {r.level: r for r in leaderboard_correlation("j", "h", _cells(judge), _cells(human), k=3, n_boot=200)}
    run = rows["run"]
    assert not math.isnan(run.values["tau_b"]) and math.isnan(run.values["kendall_at_3"])
    assert run.reason.startswith("kendall_at_3 undefined (")
    # the one differing cell is on one topic: resamples without it have a constant judge, and the note says so
    assert "tau_b interval over" in rows["pooled"].reason and "% of resamples" in rows["pooled"].reason
    defined = next(r for r in leaderboard_correlation("judge", "human", _cells(JUDGE), _cells(HUMAN), k=3, n_boot=50)
                   if r.level == "run")
    assert defined.reason == ""

    pairs = RAGCheckerPairs(DATA_DIR / "meta_eval" / "ragchecker").pairs()[:40]
    scores = {p.pair_id: (2.0, 2.0) for p in pairs}
    scores[pairs[0].pair_id] = (0.0, 2.0)
    row = correlate("judge/x", scores, pairs, "overall")
    assert not math.isnan(row.pearson) and row.reason == "near-constant: 79 of 80 answers scored 2"
    scores[pairs[1].pair_id] = (1.0, 0.0)
    scores[pairs[2].pair_id] = (1.0, 0.0)
    scores[pairs[3].pair_id] = (1.0, 0.0)
    assert correlate("judge/x", scores, pairs, "overall").reason == ""  # 73 of 80 = 91%: not flagged


def test_ragchecker_systems_annotator_against_annotator():
    pairs = RAGCheckerPairs(DATA_DIR / "meta_eval" / "ragchecker").pairs()
    rows = {r.level: r for r in inter_annotator_leaderboard(pairs, "overall", k=5, n_boot=50)}
    raw = json.loads((DATA_DIR / "meta_eval" / "ragchecker" / "human_labeled_data.json").read_text())
    margins = {k: {} for k in (0, 1)}
    for i in range(0, len(raw), 2):  # records 2i, 2i+1: the two annotators of pair i
        for k in (0, 1):
            label = raw[i + k]["overall_label"]
            for name, sign in ((raw[i]["model1"]["model_name"], -1), (raw[i]["model2"]["model_name"], 1)):
                margins[k].setdefault(name, []).append(sign * label)
    systems = sorted(margins[0])
    a1 = [np.mean(margins[0][s]) for s in systems]
    a2 = [np.mean(margins[1][s]) for s in systems]
    assert rows["run"].n_systems == 8 and rows["run"].n_topics == 280
    assert rows["run"].values["tau_b"] == pytest.approx(kendalltau(a1, a2).statistic)
    assert len(human_margins(pairs, "overall")) == 560


# -- TREC nugget-assignment files -----------------------------------------------------------------------------
NUGGETS = [("Paris is the capital", "vital"), ("France is in Europe", "okay"), ("The Seine runs through it", "okay")]
#: the assessors' labels per (run, topic); topic t2 reuses the nuggets
HUMAN_LABELS = {("r1", "t1"): ["support", "support", "not_support"],
                ("r2", "t1"): ["support", "not_support", "not_support"],
                ("r3", "t1"): ["not_support", "not_support", "not_support"],
                ("r1", "t2"): ["support", "partial_support", "support"],
                ("r2", "t2"): ["partial_support", "not_support", "not_support"],
                ("r3", "t2"): ["not_support", "not_support", "partial_support"]}


def _write_assessments(path, rows=None):
    rows = rows if rows is not None else [
        {"qid": t, "query": "About Paris?", "run_id": r, "answer_text": f"answer of {r} on {t}",
         "nuggets": [{"text": n, "importance": imp, "assignment": lab} for (n, imp), lab in zip(NUGGETS, labels)]}
        for (r, t), labels in HUMAN_LABELS.items()]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_label_agreement_by_hand():
    human = ["support", "support", "not_support", "partial_support"]
    judge = ["support", "not_support", "not_support", "failed"]
    out = label_agreement(human, judge)
    # scored judge labels: support, not, not, not. agreement 2/4. p_e = sum over labels of p_h * p_j:
    # support 2/4 * 1/4, partial 1/4 * 0, not 1/4 * 3/4 -> 0.125 + 0.1875 = 0.3125; kappa = (0.5 - 0.3125) / 0.6875
    assert out["agreement"] == 0.5 and out["kappa"] == pytest.approx(0.1875 / 0.6875)
    assert out["failed"] == 1 and out["floor"] == 0.25
    assert out["confusion"] == [[1, 0, 1], [0, 0, 1], [0, 0, 1]]  # rows support, partial, not
    # support vs not: human T T F F, judge T F F F -> agreement 3/4
    assert out["agreement_binary"] == 0.75


def test_nugget_labels_end_to_end_with_a_scripted_judge(tmp_path):
    path = _write_assessments(tmp_path / "assess.jsonl")
    truth = {f"answer of {r} on {t}": labels for (r, t), labels in HUMAN_LABELS.items()}

    def respond(request):  # the judge agrees with the assessors except that it never says partial_support
        text = prompt_text(request)
        answer = next(a for a in truth if a in text)
        return json.dumps({"labels": ["support" if lab == "partial_support" else lab for lab in truth[answer]]})

    root = judge_root("nuggets")
    cfg = OmegaConf.merge(root, {"labels": {"_target_": "eval.meta_nuggets.NuggetAssignmentLabels",
                                            "path": str(path)},
                                 "leaderboard": {"k": 3, "n_boot": 50},
                                 "out_dir": str(tmp_path / "meta"), "paths": {"cache_dir": str(tmp_path / "cache")}})
    engine = ScriptedEngine(respond)
    from eval.meta import meta_evaluate

    result = meta_evaluate(cfg, factory_with(engine, cfg))
    assert [len(b) for b in engine.batches] == [6]  # one window of 3 nuggets per answer, one batch
    assert result.labels["confusion"] == [[5, 0, 0], [3, 0, 0], [0, 0, 10]]
    assert result.labels["agreement"] == pytest.approx(15 / 18)
    levels = {(r.evaluation, r.level): r for r in result.leaderboard}
    run = levels[("nuggets/all_strict", "run")]
    assert run.n_systems == 3 and run.n_topics == 2 and not math.isnan(run.values["tau_b"])
    result.write(tmp_path / "meta")
    summary = (tmp_path / "meta" / "summary.md").read_text()
    assert "| support / partial_support / not_support |" in summary and "6 LLM calls" in summary
    assert (tmp_path / "meta" / "confusion.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "meta" / "leaderboard.csv").is_file()


@pytest.mark.parametrize("edit,message", [
    (lambda rows: rows[1]["nuggets"][0].update(assignment="maybe"), r":2: nugget 0 assignment='maybe'"),
    (lambda rows: rows[2].pop("run_id"), r":3: missing field\(s\) run_id"),
    (lambda rows: rows[3].update(run_id="r1", qid="t1"), r":4: run 'r1' has a second answer for topic 't1'"),
    (lambda rows: rows[0]["nuggets"][1].update(importance="high"), r":1: nugget 1 importance='high'"),
])
def test_bad_assessment_rows_name_the_line(tmp_path, edit, message):
    path = _write_assessments(tmp_path / "a.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    edit(rows)
    _write_assessments(path, rows)
    with pytest.raises(DataError, match=message):
        NuggetAssignmentLabels(path).answers()


def test_nugget_labels_need_the_nugget_judge(tmp_path):
    cfg = OmegaConf.create({"labels": {}, "llm": {"_target_": "x"}, "paths": {"cache_dir": str(tmp_path)}})
    with pytest.raises(ConfigError, match=r"judge=\[nuggets\]"):
        NuggetAssignmentLabels(_write_assessments(tmp_path / "a.jsonl")).evaluate(cfg)


# -- qrels against UMBRELA ------------------------------------------------------------------------------------
def _qrels_files(tmp_path):
    (tmp_path / "qrels.txt").write_text("t1 0 p1 3\nt1 0 p2 0\nt1 0 p3 2\nt2 0 p1 1\nt2 0 p4 0\n")
    (tmp_path / "topics.tsv").write_text("t1\tcapital of France\nt2\trivers of France\n")
    (tmp_path / "passages.jsonl").write_text("".join(json.dumps({"docid": d, "text": f"text of {d}"}) + "\n"
                                                     for d in ("p1", "p2", "p3", "p4", "p5")))
    return tmp_path / "qrels.txt", tmp_path / "topics.tsv", tmp_path / "passages.jsonl"


def test_qrels_against_a_scripted_umbrela(tmp_path):
    qrels, topics, passages = _qrels_files(tmp_path)
    said = {("capital", "p1"): "3", ("capital", "p2"): "0", ("capital", "p3"): "1", ("rivers", "p1"): "1",
            ("rivers", "p4"): "no idea"}

    def respond(request):
        text = prompt_text(request)
        for (q, d), grade in said.items():
            if q in text and f"text of {d}" in text:
                return f"##final score: {grade}" if grade.isdigit() else grade
        raise AssertionError(text[:100])

    llm = {"_target_": "scripted.Engine"}
    cfg = OmegaConf.create({"llm": llm, "paths": {"cache_dir": str(tmp_path / "cache")},
                            "umbrela": {"_target_": "eval.umbrela.UmbrelaGrader", "max_retries": 1}})
    engine = ScriptedEngine(respond)
    result = QrelsLabels(qrels, topics, passages).evaluate(cfg, factory_with(engine, cfg))
    stats = result.stats
    assert stats["n_pairs"] == 5 and stats["unreadable"] == 1
    # readable: (3,3) (0,0) (2,1) (1,1): agreement 3/4; binary at 2: (T,T) (F,F) (T,F) (F,F) -> 3/4
    assert stats["agreement"] == 0.75 and stats["agreement_binary"] == 0.75
    assert stats["confusion"][2] == [0, 1, 0, 0] and stats["confusion"][3] == [0, 0, 0, 1]
    result.write(tmp_path / "out")
    assert "1 unreadable grades left out" in (tmp_path / "out" / "summary.md").read_text()


def test_bad_qrels_name_the_line(tmp_path):
    qrels, topics, passages = _qrels_files(tmp_path)
    qrels.write_text("t1 0 p1 3\nt1 0 p2 7\n")
    with pytest.raises(DataError, match=r"qrels.txt:2: grade 7 is not one of 0-3"):
        QrelsLabels(qrels, topics, passages).pairs()
    qrels.write_text("t1 0 p9 1\n")
    cfg = OmegaConf.create({"llm": {"_target_": "x"}, "paths": {"cache_dir": str(tmp_path)},
                            "umbrela": {"_target_": "eval.umbrela.UmbrelaGrader"}})
    with pytest.raises(DataError, match="no text for passage 'p9'"):
        QrelsLabels(qrels, topics, passages).evaluate(cfg)


def test_command_runs_the_nugget_labels_and_refuses_a_missing_file(tmp_path):
    bad = run_module("eval.meta", ["labels=trec_nuggets", f"labels.path={tmp_path / 'none.jsonl'}",
                                   "judge=[nuggets]", "llm=gemma3_270m", f"out_dir={tmp_path / 'out'}"])
    assert bad.returncode == 2 and "none.jsonl: not found" in bad.stdout + bad.stderr
    assert "Traceback" not in bad.stdout + bad.stderr and not (tmp_path / "out").exists()


def test_logger_wandb_logs_one_offline_run(tmp_path):
    from tests.cluster.helpers import offline_runs, read_wandb_run, wandb_table

    out = tmp_path / "meta"
    proc = run_module("eval.meta", [f"out_dir={out}", "leaderboard.n_boot=20", "logger=wandb", "logger.mode=offline",
                                    "labels.limit=40"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run_dir,) = offline_runs(out)
    run = read_wandb_run(run_dir)
    assert run["name"] == "meta-ragchecker" and run["job_type"] == "meta"
    assert -1.0 <= run["summary"]["meta/ragchecker/overall/overall/pearson"] <= 1.0
    assert "meta/leaderboard/annotator_2/annotator_1_overall/run/tau_b" in run["summary"]
    table = wandb_table(run_dir, "meta/leaderboard")
    assert "kendall_at_5" in table["columns"] and len(table["data"]) == 18
