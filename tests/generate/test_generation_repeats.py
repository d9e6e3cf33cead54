"""Generation consistency (issue 55): `generation.repeats=N` draws every answer N times and reports how it moves."""

from __future__ import annotations

import json
import statistics

import pytest

from rag.core.io import read_jsonl
from rag.generate.repeats import FOLDER, consistency_metrics
from rag.llm.reseed import REPEAT_SEED_STRIDE
from rag.records import AnswerRecord
from tests.cluster.helpers import rag_env, rag_main
from tests.instant_endpoint import InstantEndpoint


def _runs(table: list[list[tuple[str, float]]]) -> list[list[AnswerRecord]]:
    return [[AnswerRecord(id=f"q{i}", answer=a, scores={"f1": f}) for i, (a, f) in enumerate(run)] for run in table]


def _args(endpoint: InstantEndpoint, n: int, repeats: int, run_dir, *extra: str) -> list[str]:
    """A run of `n` HotpotQA questions drawn `repeats` times at temperature 0.8, the endpoint answering."""
    return ["dataset=hotpotqa", f"dataset.limit={n}", "retriever.k=5", "rerank.k=2", "generator=simple",
            f"generation.repeats={repeats}", "generation.repeat_temperature=0.8", "llm=openai_compatible",
            f"llm.base_url={endpoint.url}", f"llm.model={endpoint.model}", "logger=none", f"hydra.run.dir={run_dir}",
            *extra]


def test_consistency_figures_by_hand():
    runs = _runs([[("Paris", 1.0), ("1921", 0.0), ("blue", 0.5)],
                  [("paris.", 1.0), ("1922", 0.0), ("red", 0.0)],
                  [("Paris", 1.0), ("1921", 1.0), ("blue", 0.5)]])
    out = consistency_metrics(runs)
    per_question = [[1.0, 1.0, 1.0], [0.0, 0.0, 1.0], [0.5, 0.0, 0.5]]
    assert out["consistency/f1/answer_sd"] == pytest.approx(statistics.mean(statistics.stdev(q) for q in per_question),
                                                            abs=1e-6)
    assert out["consistency/f1/changed"] == pytest.approx(2 / 3)
    means = [statistics.mean(r) for r in zip(*per_question)]
    assert out["consistency/f1/run_mean_sd"] == pytest.approx(statistics.stdev(means), abs=1e-6)
    assert out["consistency/f1/run_mean_cv"] == pytest.approx(statistics.stdev(means) / statistics.mean(means), abs=1e-6)
    # "paris." and "Paris" are one answer (SQuAD normalisation); the second and third questions' texts changed
    assert out["consistency/answer_changed"] == pytest.approx(2 / 3) and out["consistency/repeats"] == 3
    assert consistency_metrics(runs[:1]) == {"consistency/repeats": 1}


def test_repeats_reseed_every_request_count_apart_and_resume(hotpot_data, tmp_path):
    n, repeats = 2, 3
    run_dir = tmp_path / "run"
    with InstantEndpoint() as endpoint:
        args = _args(endpoint, n, repeats, run_dir, "metrics=[f1,no_answer]", "cache.llm_responses=false")
        env = rag_env(tmp_path)
        proc = rag_main(args, env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        sent = [(r["seed"], r["temperature"]) for r in endpoint.requests]
        proc = rag_main(args, env, timeout=600)  # a rerun: every repeat is journalled, nothing is drawn again
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert len(endpoint.requests) == len(sent)
        # another repeat temperature (no part of the folder's fingerprint) draws its own, never reads those at 0.8
        proc = rag_main([*args, "generation.repeat_temperature=0.5"], env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        again = [(r["seed"], r["temperature"]) for r in endpoint.requests[len(sent):]]
        assert len(again) == n * (repeats - 1) and {t for _, t in again} == {0.5}
    base = sorted({seed for seed, _ in sent})[0]
    assert sorted(sent) == sorted([(base, sent[0][1])] * n + [(base + REPEAT_SEED_STRIDE, 0.8)] * n
                                  + [(base + 2 * REPEAT_SEED_STRIDE, 0.8)] * n)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["llm_calls"] == n and metrics["consistency/llm_calls"] == n * (repeats - 1)
    assert metrics["consistency/repeats"] == repeats and 0.0 <= metrics["consistency/answer_changed"] <= 1.0
    assert {"consistency/f1/answer_sd", "consistency/no_answer/changed"} <= set(metrics)
    assert metrics["time/repeats_s"] > 0  # the draws' own stage time (the run's stages keep their answers' time)
    for r in (1, 2):
        rows = [json.loads(line) for line in
                (run_dir / FOLDER / "temperature=0.8" / f"r{r}.jsonl").read_text().splitlines()]
        assert [row["id"] for row in rows] == [json.loads(line)["id"] for line in
                                               (run_dir / "answers.jsonl").read_text().splitlines()]


def test_judge_values_get_the_same_figures_as_scores():
    """A judged draw's per-answer judge values (`AnswerRecord.judge_values`) are figures like the scores."""
    correctness = [[2, 1, -1], [2, 0, -1]]
    runs = [[AnswerRecord(id=f"q{i}", answer="a", scores={"f1": 0.5},
                          judges={"liverag": {"correctness": c, "faithfulness": 1, "attempts": 1}})
             for i, c in enumerate(run)] for run in correctness]
    out = consistency_metrics(runs)
    assert out["consistency/judge/liverag/correctness/changed"] == pytest.approx(1 / 3)
    assert out["consistency/judge/liverag/correctness/answer_sd"] == pytest.approx(statistics.stdev([1, 0]) / 3, abs=1e-6)
    assert out["consistency/judge/liverag/faithfulness/changed"] == 0.0 and out["consistency/f1/changed"] == 0.0
    assert not any("attempts" in k for k in out)  # bookkeeping is no evaluation


def test_a_judged_run_judges_every_draw_and_counts_that_work_apart(hotpot_data, tmp_path):
    n, repeats = 2, 2
    run_dir = tmp_path / "run"
    with InstantEndpoint() as endpoint:
        args = _args(endpoint, n, repeats, run_dir, "judge=[liverag]")
        proc = rag_main(args, rag_env(tmp_path), timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        sent = len(endpoint.requests)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert {"consistency/judge/liverag/correctness/answer_sd", "consistency/judge/liverag/faithfulness/changed",
            "consistency/f1/answer_sd"} <= set(metrics)
    # every request is the run's answers, its draws, the judging of its answers, or the judging of its draws
    # (the instant endpoint answers a draw as it answered the run, so its judging may come from the response cache)
    judged_draws = metrics["consistency/eval/llm_calls"]
    assert judged_draws + metrics["consistency/eval/llm_cache_hits"] == metrics["eval/llm_calls"] * (repeats - 1) > 0
    assert sent == metrics["llm_calls"] + metrics["consistency/llm_calls"] + metrics["eval/llm_calls"] + judged_draws
    assert all("liverag" in json.loads(line)["judges"] for line in (run_dir / "answers.jsonl").read_text().splitlines())
    assert "Judge noise" not in (run_dir / "eval_report.md").read_text()


def test_a_draws_judges_write_their_files_into_the_draws_folder(hotpot_data, tmp_path):
    """A judge that writes files (the nugget judge's nuggets/assign.jsonl) writes a draw's into the draw's folder:
    the run's own files stay those of its own answers."""
    run_dir = tmp_path / "run"
    with InstantEndpoint() as endpoint:
        proc = rag_main(_args(endpoint, 2, 2, run_dir, "judge=[nuggets]"), rag_env(tmp_path), timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    draw = run_dir / FOLDER / "temperature=0.8" / "r1"
    assert {row["run_id"] for row in read_jsonl(draw / "nuggets" / "assign.jsonl")} == {"r1"}
    assert {row["run_id"] for row in read_jsonl(run_dir / "nuggets" / "assign.jsonl")} == {run_dir.name}
    assert not (draw / "eval_report.md").exists()
    assert "consistency/nuggets/vital_strict/answer_sd" in json.loads((run_dir / "metrics.json").read_text())
