"""Issue 36: a rerun never erases a measurement.

Rerunning a finished sweep into its folder used to rewrite each cell's metrics.json with the rerun's own counters
(nothing generated, every stage served by its cache): the report then showed 0 tokens and 0 s per question and
dropped Fig. 5. Now metrics.json keeps the work that produced the answers, the rerun's own counters go to
`work_history.jsonl`, and the report rebuilt after the rerun is the first report: same cost table, same Fig. 5.
A real sweep (HotpotQA, BM25, Gemma 270M) with its own fresh cache, so that its first run really does the work.
"""

from __future__ import annotations

import pytest

from rag.folders import RunFolder, measured_work
from rag.report import build_report
from tests.cluster.helpers import CHEAP, rag_env, rag_main


def test_measured_work_keeps_earlier_figures_and_adds_new_work():
    first = {"answer/f1/all": 0.5, "llm_calls": 2, "llm_cache_hits": 0, "prompt_tokens": 300, "completion_tokens": 16,
             "llm_seconds": 4.0, "llm_tokens_per_s": 79.0, "time/generate_s": 4.2, "retrieval_calls": 2,
             "retrieval_cache_hits": 0, "time/retrieve_s": 0.3, "eval/llm_calls": 2, "eval/prompt_tokens": 500,
             "time/evaluate_s": 3.0}
    rerun = {"answer/f1/all": 0.5, "llm_calls": 0, "llm_cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0,
             "llm_seconds": 0.0, "time/generate_s": 0.0, "retrieval_calls": 0, "retrieval_cache_hits": 0,
             "time/retrieve_s": 0.0, "eval/llm_calls": 0, "eval/llm_cache_hits": 2, "eval/prompt_tokens": 0,
             "time/evaluate_s": 0.1}
    assert measured_work(first, dict(rerun), answered=0) == first  # nothing made, nothing fresh: all kept
    # a larger dataset.limit: two more answers, their work added, the throughput recomputed from the sums
    more = {**rerun, "answer/f1/all": 0.4, "llm_calls": 2, "prompt_tokens": 100, "completion_tokens": 16,
            "llm_seconds": 2.0, "llm_tokens_per_s": 58.0, "time/generate_s": 2.0, "eval/llm_calls": 2,
            "eval/prompt_tokens": 250}
    grown = measured_work(first, dict(more), answered=2)
    assert grown["answer/f1/all"] == 0.4 and grown["llm_calls"] == 4 and grown["prompt_tokens"] == 400
    assert grown["llm_seconds"] == 6.0 and grown["llm_tokens_per_s"] == round(432 / 6.0, 4)
    assert grown["eval/prompt_tokens"] == 250  # fresh judging is a newer measurement of the judges
    assert measured_work({}, dict(rerun), answered=0) == rerun  # a first run is its own measurement


@pytest.mark.slow
def test_rerunning_a_sweep_and_rebuilding_its_report_gives_the_first_report(hotpot_data, tmp_path):
    sweep = tmp_path / "sweep"
    args = ["-m", *CHEAP, "dataset.limit=2", "generator=simple,extractive", "logger=none",
            f"hydra.sweep.dir={sweep}"]
    env = rag_env(tmp_path)  # a fresh cache: the first run computes every stage
    proc = rag_main(args, env, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cells = sorted(p for p in sweep.iterdir() if (p / "metrics.json").is_file())
    first_metrics = {c.name: RunFolder(c).metrics() for c in cells}
    first = build_report(sweep, out_dir=tmp_path / "report1", formats=("png",), n_boot=50)
    assert "fig5_latency_at_k" in first.figures  # the first run measured its retrieval
    simple = next(r for r in first.tables["strategy_cost"] if r["strategy"] == "simple")
    assert simple["tokens_per_q"] > 0 and simple["llm_requests_measured_per_q"] == 1

    proc = rag_main(args, env, timeout=1200)  # the same sweep into its folder: every answer is resumed
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = build_report(sweep, out_dir=tmp_path / "report2", formats=("png",), n_boot=50)
    assert again.tables["strategy_cost"] == first.tables["strategy_cost"]
    assert again.tables["latency_at_k"] == first.tables["latency_at_k"]
    assert set(again.figures) == set(first.figures) and again.skipped == first.skipped
    for name in ("strategy_cost", "fig5_latency_at_k"):
        assert (again.dir / again.figures[name]["png"]).read_bytes() == \
            (first.dir / first.figures[name]["png"]).read_bytes(), name
    for cell in cells:
        folder = RunFolder(cell)
        assert folder.metrics() == first_metrics[cell.name]  # the measured work, unchanged
        history = folder.work_history()
        assert [h["answered"] for h in history] == [2, 0]  # ... and the rerun recorded beside it
        assert history[1]["llm_calls"] == 0 and history[1]["retrieval_calls"] == 0
        assert {k: v for k, v in history[0].items() if k not in ("execution", "answered", "finished_at")} == \
            {k: v for k, v in first_metrics[cell.name].items() if k in history[0]}
