"""Judges against human labels: RAGChecker's own scores reproduce its paper's Table 2 through our code, a judge
runs on the pairs through the same path (scripted engine: the delta follows its scores), bad label files name the
record, and the command prints the table."""

from __future__ import annotations

import json
import math

import pytest
from evaltools import ScriptedEngine, factory_with, judge_root, prompt_text
from omegaconf import OmegaConf

from eval.meta import RAGCheckerPairs, correlate, meta_evaluate, reference_rows, scaled_deltas, write
from rag.core.errors import DataError
from tests.cluster.helpers import run_module
from tests.conftest import DATA_DIR

RAGCHECKER = DATA_DIR / "meta_eval" / "ragchecker"

#: RAGChecker (Ru et al. 2024) Table 2: Pearson / Spearman x 100 against the human labels
TABLE2 = {("ragchecker/correctness", "correctness"): (49.66, 46.95),
          ("ragchecker/completeness", "completeness"): (60.67, 58.11),
          ("ragchecker/overall", "overall"): (61.93, 60.90),
          ("annotator 1 vs annotator 2", "correctness"): (63.67, 59.19),
          ("annotator 1 vs annotator 2", "completeness"): (71.91, 68.36),
          ("annotator 1 vs annotator 2", "overall"): (70.09, 68.89)}


def test_reference_rows_reproduce_ragchecker_table2():
    source = RAGCheckerPairs(RAGCHECKER)
    pairs = source.pairs()
    assert len(pairs) == 280 and all(len(p.labels["overall"]) == 2 for p in pairs)
    rows = {(r.evaluation, r.aspect): r for r in reference_rows(source, pairs)}
    assert set(rows) == set(TABLE2)
    for key, (pearson, spearman) in TABLE2.items():
        assert round(100 * rows[key].pearson, 2) == pearson, key
        assert round(100 * rows[key].spearman, 2) == spearman, key


def test_scaled_deltas_follow_the_protocol():
    # deltas 1, -1, NaN (-> the median of 1, -1, 3: 1), 3; min-max from [-1, 3] to [-2, 2]
    assert scaled_deltas([(0, 1), (1, 0), (math.nan, 1), (0, 3)]).tolist() == pytest.approx([0.0, -2.0, 0.0, 2.0])


def test_a_failed_judgement_is_counted_and_set_to_the_median():
    pairs = RAGCheckerPairs(RAGCHECKER, limit=10).pairs()
    scores = {p.pair_id: (0.0, float(sum(p.labels["overall"]))) for p in pairs}
    scores[pairs[0].pair_id] = (math.nan, 1.0)
    row = correlate("judge/x/score", scores, pairs, "overall")
    assert row.n_failed == 1 and row.n_pairs == 10 and row.pearson > 0.5
    with pytest.raises(DataError, match="no scores for pair"):
        correlate("judge/x/score", {}, pairs, "overall")


def test_a_judge_on_the_pairs_through_the_pipeline_path(tmp_path):
    """A scripted LiveRAG judge that prefers the longer answer: its deltas and the files it leaves."""
    pairs = RAGCheckerPairs(RAGCHECKER, limit=3).pairs()
    longer = {p.pair_id: 1 if len(p.answers[0]) > len(p.answers[1]) else 2 for p in pairs}

    def respond(request):
        text = prompt_text(request)
        for p in pairs:
            for k in (0, 1):
                if p.answers[k][:200] in text:
                    return json.dumps({"correctness": 2 if longer[p.pair_id] == k + 1 else 0, "faithfulness": 1})
        return "unreadable"

    root = judge_root("liverag")
    cfg = OmegaConf.merge(root, {"labels": {"_target_": "eval.meta.RAGCheckerPairs", "path": str(RAGCHECKER),
                                            "limit": 3},
                                 "leaderboard": {"n_boot": 20},
                                 "out_dir": str(tmp_path / "meta"), "paths": {"cache_dir": str(tmp_path / "cache")}})
    engine = ScriptedEngine(respond)
    result = meta_evaluate(cfg, factory_with(engine, cfg))
    assert [len(b) for b in engine.batches] == [6]  # both answers of every pair, one batch
    judged = {r.id: r.judges["liverag"] for r in result.judged}
    for p in pairs:
        first, second = judged[f"{p.pair_id}:1"]["correctness"], judged[f"{p.pair_id}:2"]["correctness"]
        assert (second - first > 0) == (longer[p.pair_id] == 2)
    rows = {(r.evaluation, r.aspect) for r in result.rows}
    assert ("judge/liverag/correctness", "overall") in rows and ("judge/liverag/faithfulness", "overall") in rows
    write(result, tmp_path / "meta")
    summary = (tmp_path / "meta" / "summary.md").read_text()
    assert "| judge/liverag/correctness | correctness | 3 | 0 |" in summary and "6 LLM calls" in summary
    # faithfulness judges an answer against its retrieved passages, which the pairs do not carry: undefined, not
    # scored against nothing, and every row of it says so (issue 35)
    assert all("faithfulness" not in result for result in judged.values())
    assert all(r["no_passages"] == ["faithfulness"] for r in judged.values())
    assert ("| judge/liverag/faithfulness | overall | 3 | 0 | - | - | undefined: judges the answer against its "
            "retrieved passages, which these pairs do not carry |") in summary
    assert all(r.reason.startswith("undefined:") for r in result.leaderboard
               if r.evaluation == "judge/liverag/faithfulness")
    assert (tmp_path / "meta" / "deltas.png").read_bytes()[:4] == b"\x89PNG"
    assert len((tmp_path / "meta" / "judged.jsonl").read_text().splitlines()) == 6


@pytest.mark.parametrize("edit,message", [
    (lambda rows: rows[1].update(instance_id=99), "record 1: instance_id 99"),
    (lambda rows: rows[2].update(overall_label=3), "record 2: overall_label=3 is not an integer in -2..2"),
    (lambda rows: rows[0].pop("query"), "record 0: missing field"),
])
def test_bad_label_rows_name_the_record(tmp_path, edit, message):
    rows = json.loads((RAGCHECKER / "human_labeled_data.json").read_text())[:6]
    edit(rows)
    (tmp_path / "human_labeled_data.json").write_text(json.dumps(rows))
    with pytest.raises(DataError, match=message):
        RAGCheckerPairs(tmp_path).pairs()


def test_command_prints_the_reference_table(tmp_path):
    proc = run_module("eval.meta", [f"out_dir={tmp_path / 'meta'}", "leaderboard.n_boot=50"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| ragchecker/overall | overall | 280 | 0 | 61.93 | 60.90 |  |" in proc.stdout
    assert (tmp_path / "meta" / "correlations.csv").is_file() and (tmp_path / "meta" / "leaderboard.csv").is_file()
    assert "| ragchecker/overall | human overall | run |" in proc.stdout
    bad = run_module("eval.meta", [f"out_dir={tmp_path / 'bad'}", "labels.limit=0"])
    assert bad.returncode == 2 and "labels.limit=0: must be at least 1" in bad.stdout + bad.stderr
    assert "Traceback" not in bad.stdout + bad.stderr and not (tmp_path / "bad").exists()
