"""The report's computations on hand-checkable inputs (no model, no sweep)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rag.report.agreement import agreement_matrices
from rag.report.data import DataError, load, read_agreement
from rag.report.recall import found_at_k
from rag.report.stats import share_ci
from tests.cluster.helpers import run_module


def test_found_at_k_counts_a_document_by_its_first_passage():
    ranked = ["d9", "d1", "d1", "d7", "d2"]
    assert found_at_k(["d1"], ranked, 5, "fraction").tolist() == [0, 1, 1, 1, 1]
    assert found_at_k(["d1", "d2"], ranked, 5, "all").tolist() == [0, 0, 0, 0, 1]
    assert found_at_k(["d1", "d2"], ranked, 5, "any").tolist() == [0, 1, 1, 1, 1]
    assert found_at_k(["d1", "d2"], ranked, 5, "fraction").tolist() == [0, 0.5, 0.5, 0.5, 1]
    assert found_at_k(["d1", "d2"], ranked, 3, "all").tolist() == [0, 0, 0]


def test_share_ci_brackets_the_share_and_narrows_with_n():
    few = share_ci([2, 2, 1, -1], [2, 1, 0, -1], n_boot=2000)
    assert [s for s, _, _ in few] == [0.5, 0.25, 0.0, 0.25]
    assert all(lo <= s <= hi for s, lo, hi in few)
    assert few[2] == (0.0, 0.0, 0.0)
    many = share_ci([2, 2, 1, -1] * 50, [2], n_boot=2000)[0]
    assert many[0] == 0.5 and (many[2] - many[1]) < (few[0][2] - few[0][1])
    assert all(math.isnan(x) for x in share_ci([], [2])[0])


def test_agreement_matrix_keeps_undefined_pairs_as_nan(tmp_path):
    path = tmp_path / "agreement.csv"
    # the columns eval.agreement writes (the report once looked for columns it never wrote)
    path.write_text("eval_a,eval_b,reference,n_runs,n_topics,tau_b,tau_b_lo,tau_b_hi,tau_ap_a,tau_topic,"
                    "n_topics_defined\n"
                    "judge/a/correctness,nuggets/vital_strict,nuggets/vital_strict,4,10,0.667,0.2,1.0,0.5,,0\n"
                    "judge/a/correctness,scores/f1,scores/f1,4,10,,,,,0.5,7\n"
                    "scores/em,judge/a/correctness,scores/em,4,10,0.1,0.0,0.2,0.1,0.3,5\n"
                    "time/total_s,llm_calls,llm_calls,4,0,0.9,,,,,0\n")
    rows = read_agreement(path)
    [run, ap, topic] = agreement_matrices(rows)
    assert run.measure == "tau_b" and run.rows == ["judge/a/correctness"]
    assert ap.measure == "tau_ap_a" and ap.title == "tau_ap_a (run level), reference: nuggets/*, scores/*"
    assert ap.value[0, 0] == 0.5
    # judges as rows (a pair given the other way round is turned), run-level-only metrics left out
    assert run.cols == ["nuggets/vital_strict", "scores/f1", "scores/em"]
    assert run.value[0, 2] == pytest.approx(0.1)
    assert run.value[0, 0] == pytest.approx(0.667) and math.isnan(run.value[0, 1])
    assert run.n[0, 0] == 4
    assert topic.value[0, 1] == 0.5 and topic.n[0, 1] == 7 and np.isnan(topic.value[0, 0])


def test_bad_agreement_row_names_file_and_line(tmp_path):
    path = tmp_path / "agreement.csv"
    path.write_text("eval_a,eval_b,tau_run\njudge/x,,0.1\n")
    with pytest.raises(DataError, match=r"agreement.csv:2"):
        read_agreement(path)


def test_report_command_fails_in_one_line_without_runs(tmp_path):
    with pytest.raises(DataError, match="no finished runs"):
        load(tmp_path)
    proc = run_module("rag.report", [str(tmp_path / "missing")])
    assert proc.returncode == 2 and proc.stderr.strip().startswith("error:") and len(proc.stderr.splitlines()) == 1


def test_latency_file_must_be_a_benchmark_result(tmp_path):
    from rag.report.data import read_latency

    path = tmp_path / "latency_at_k.json"
    path.write_text(json.dumps({"something": 1}))
    with pytest.raises(DataError, match="not a latency_at_k result"):
        read_latency(path)


def test_retrieval_measures_beside_fig4_are_the_runs_own_means(tmp_path):
    """The report's trec_eval table (beside Fig. 4) averages the records' ir/ scores as metrics.json does."""
    from rag.folders import RunFolder
    from rag.records import AnswerRecord
    from rag.report.build import build_report

    values = {"q1": ("single", 1.0, 0.5), "q2": ("multi", 0.25, 0.0), "q3": ("multi", 0.5, 1.0), "q4": ("single", None, None)}
    records = [AnswerRecord(id=q, question=q, hop=hop, gold_doc_ids=["d"] if a is not None else [],
                            scores={} if a is None else {"ir/retrieval/nDCG@10": a, "ir/retrieval/AP": b})
               for q, (hop, a, b) in values.items()]
    folder = RunFolder(tmp_path / "run")
    folder.finish(records, {"n_questions": 4}, {"retriever": {"k": 10}})
    report = build_report(folder.dir, formats=("png",), n_boot=50)
    rows = {(r["stage"], r["split"], r["measure"]): r for r in report.tables["retrieval_measures"]}
    assert rows[("retrieval", "all", "nDCG@10")]["value"] == pytest.approx((1.0 + 0.25 + 0.5) / 3)
    assert rows[("retrieval", "multi", "AP")]["value"] == 0.5 and rows[("retrieval", "single", "AP")]["n_questions"] == 1
    assert rows[("retrieval", "all", "AP")]["lo"] <= 0.5 <= rows[("retrieval", "all", "AP")]["hi"]
    markdown = (folder.dir / "report" / "report.md").read_text()
    fig4 = markdown.split("## Fig. 4")[1].split("## Fig. 5")[0]
    assert "| run | stage | split | n | nDCG@10 | AP |" in fig4 and "| retrieval | multi | 2 | 0.375 [" in fig4
    assert (folder.dir / "report" / "retrieval_measures.csv").is_file()
