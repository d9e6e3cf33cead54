"""judge.repeats: every answer judged N times with moved seeds; every verdict stored; Krippendorff's alpha and the
spread reported; a rerun answers every repeat from the response cache (the embedded judge, 2 questions)."""

from __future__ import annotations

import json
import math
import re

import krippendorff
import numpy as np
import pytest
from evaltools import ScriptedEngine, factory_with, judge_root, prompt_text, synthetic_records

from rag.core.errors import ConfigError
from rag.folders import RunFolder
from rag.judge.run import evaluate_records, repeat_settings
from rag.llm.asking import retry_params
from rag.llm.base import LLMRequest, SamplingParams
from rag.llm.reseed import REPEAT_SEED_STRIDE, ReseededEngine
from rag.preflight import check_config
from tests.cluster.helpers import rag_env, rag_main
from tests.conftest import compose_config


def test_repeat_requests_move_the_seed_and_keep_retries_apart():
    request = LLMRequest(messages=[{"role": "user", "content": "q"}], params=SamplingParams(temperature=0.0, seed=7))
    first, second = (ReseededEngine(None, r, temperature=0.7).params(request) for r in (1, 2))  # type: ignore[arg-type]
    assert (first.params.seed, second.params.seed) == (7 + REPEAT_SEED_STRIDE, 7 + 2 * REPEAT_SEED_STRIDE)
    assert first.params.temperature == 0.7 and request.params.temperature == 0.0  # the original is untouched
    own = ReseededEngine(None, 1).params(request)  # type: ignore[arg-type]
    assert own.params.temperature == 0.0 and own.params.seed == 7 + REPEAT_SEED_STRIDE
    # a re-ask (seed + 1000 per attempt) of repeat 0 never lands on repeat 1's seed
    assert retry_params(request.params, 2, 0.2).seed < first.params.seed
    assert repeat_settings({}) == (1, None) and repeat_settings({"repeats": 3, "repeat_temperature": 1}) == (3, 1.0)
    with pytest.raises(ConfigError, match=r"judge.repeats=0: a whole number"):
        repeat_settings({"repeats": 0})
    with pytest.raises(ConfigError, match=r"judge.repeat_temperature=-1"):
        repeat_settings({"repeats": 2, "repeat_temperature": -1})
    # said before any work, with the other config problems
    problems = check_config(compose_config(["judge=[liverag]", "judge.repeats=0"]))
    assert "judge.repeats=0: a whole number of judgements per answer, at least 1" in problems


def _nugget_model(request: LLMRequest) -> str:
    """Creation (one nugget per passage shown), importance (all vital), assignment (support in the ordinary
    verdict, not_support in a repeat: the seed says which) and ARGUE's YES/NO checks (YES)."""
    text = prompt_text(request)
    if "Update the list of atomic nuggets" in text:
        current = json.loads(re.search(r"Current nugget list \(\d+ nuggets\): (\[.*\])", text).group(1))
        return json.dumps({"nuggets": current + [f"about {s}" for s in re.findall(r"^\[\d+\] (\S+)", text,
                                                                                    flags=re.MULTILINE)]})
    if "Nuggets:" in text:
        nuggets = json.loads(re.search(r"Nuggets: (\[.*\])", text).group(1))
        if "Answer:" not in text:
            return json.dumps({"labels": ["vital"] * len(nuggets)})
        label = "support" if request.params.seed < REPEAT_SEED_STRIDE else "not_support"
        return json.dumps({"labels": [label] * len(nuggets)})
    return "YES"


def test_nugget_judges_repeat_over_the_runs_one_nugget_set(tmp_path):
    """Issue 51: `judge.repeats` with a nugget-based judge ended the evaluation (the repeat's context had no nugget
    set). Now nuggets and ARGUE repeat their assignment over the run's one set: made once, never per repeat."""
    root = judge_root("nuggets", "argue")
    root.judge.repeats = 2
    engine = ScriptedEngine(_nugget_model)
    records = synthetic_records(2)
    metrics = evaluate_records(root.judge, records, tmp_path / "run", tmp_path / "cache", factory_with(engine, root))
    created = [r for b in engine.batches for r in b if "Update the list of atomic nuggets" in prompt_text(r)]
    assert len(created) == 2  # one creation per topic, for the run: none for the repeat
    for judge, value in (("nuggets", "nuggets/vital_strict"), ("argue", "argue/nugget_recall")):
        topics = metrics[f"{judge}/nugget_set"]["topics"]
        assert set(topics) == {"q0", "q1"} and metrics[f"noise/{value}/repeats"] == 2
        for record in records:
            result = record.judges[judge]
            repeats = result["repeats"]
            assert [e["repeat"] for e in repeats] == [0, 1] and all(value in e["values"] for e in repeats)
            assert [e["nugget_set"] for e in repeats] == [result["nugget_set"]] * 2 == [topics[record.id]] * 2
            assert [e["values"][value] for e in repeats] == [1.0, 0.0]  # the repeat judged again (other seed)
    assert (tmp_path / "run" / "judge_repeats" / "argue" / "r1" / "argue" / "scores.jsonl").is_file()
    assert "## Judge noise" in (tmp_path / "run" / "eval_report.md").read_text()


ARGS = ["dataset=liverag_dev", "dataset.limit=2", "retriever=bm25", "retriever.k=5", "rerank.k=1",
        "generator=extractive", "generator.max_tokens=16", "llm=gemma3_270m", "judge=[liverag]",
        "judge.liverag.max_passages=1", "judge.liverag.max_passage_chars=300", "judge.liverag.max_gold_chars=300",
        "judge.repeats=3", "judge.repeat_temperature=0.8", "logger=none"]


@pytest.mark.slow
def test_three_repeats_report_alpha_and_spread_and_rerun_from_the_cache(data_dir, shared_cache, tmp_path):
    run_dir = tmp_path / "run"
    env = rag_env(tmp_path, cache=shared_cache)
    first = rag_main([*ARGS, f"hydra.run.dir={run_dir}"], env, timeout=1800)
    assert first.returncode == 0, first.stderr[-4000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    # the ordinary verdicts, then 3 repeats at the override (from the response cache where an earlier session
    # asked the same: the test cache is shared)
    assert metrics["eval/llm_calls"] + metrics["eval/llm_cache_hits"] == 2 + 2 * 3
    records = [json.loads(line) for line in (run_dir / "answers.jsonl").open()]
    verdicts = {}
    for field in ("correctness", "faithfulness"):
        name = f"judge/liverag/{field}"
        repeats = [r["judges"]["liverag"]["repeats"] for r in records]
        assert all([e["seed_offset"] for e in rs] == [0, REPEAT_SEED_STRIDE, 2 * REPEAT_SEED_STRIDE] for rs in repeats)
        assert all(e["temperature"] == 0.8 for rs in repeats for e in rs)
        matrix = np.array([[e["values"].get(name, math.nan) for e in rs] for rs in repeats], dtype=float).T
        verdicts[field] = matrix
        assert metrics[f"noise/{name}/repeats"] == 3
        domain = [-1, 0, 1, 2] if field == "correctness" else [-1, 0, 1]
        if len(np.unique(matrix[~np.isnan(matrix)])) > 1:  # alpha exists: the library's, at the ordinal level
            expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal",
                                          value_domain=domain)
            assert metrics[f"noise/{name}/alpha"] == pytest.approx(expected)
        else:
            assert metrics[f"noise/{name}/alpha"] is None
        sds = [np.std(c[~np.isnan(c)], ddof=1) for c in matrix.T if (~np.isnan(c)).sum() >= 2]
        assert metrics[f"noise/{name}/answer_sd"] == pytest.approx(float(np.mean(sds)))
    report = (run_dir / "eval_report.md").read_text()
    assert "## Judge noise (`judge.repeats`)" in report and "| judge/liverag/correctness | 3 | ordinal |" in report

    again = rag_main([*ARGS, f"hydra.run.dir={run_dir}"], env, timeout=1800)
    assert again.returncode == 0, again.stderr[-4000:]
    rerun = json.loads((run_dir / "metrics.json").read_text())
    this_execution = RunFolder(run_dir).work_history()[-1]  # the rerun's own counters; metrics.json keeps the first's
    assert this_execution["eval/llm_calls"] == 0 and this_execution["eval/llm_cache_hits"] == 8  # none judged again
    assert {k: v for k, v in rerun.items() if k.startswith("noise/")} == \
        {k: v for k, v in metrics.items() if k.startswith("noise/")}
