"""AutoJudge leaderboards written by `python -m eval.summary --leaderboards`, read back by autojudge-evaluate's own
loader (`autojudge_evaluate.eval_results.load`, format `tot`), with its strictest checks."""

from __future__ import annotations

import importlib.util
import json
import sys
from importlib.metadata import distribution
from pathlib import Path

import pytest
import yaml

from eval.summary import main as summary_main
from rag.core.io import atomic_write_jsonl

#: per cell and topic: the LiveRAG judge's correctness, a nugget score and a retrieval measure
CORRECTNESS = [[2, 1, 0], [1, 1, 1], [2, 0, -1]]
VITAL = [[1.0, 0.5, 0.0], [0.5, 0.25, 0.0], [0.5, 0.0, 0.5]]
NDCG = [[1.0, 0.63, 0.0], [0.5, 0.5, 1.0], [0.0, 0.0, 0.31]]


def autojudge_eval_results():
    """autojudge-evaluate's `eval_results` package (its loader and containers), loaded on its own: the package's
    `__init__` imports its command-line stack (click, autojudge_base), which the venv leaves out (Makefile)."""
    root = Path(str(distribution("autojudge-evaluate").locate_file("autojudge_evaluate/eval_results")))
    name = "autojudge_eval_results"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, root / "__init__.py",
                                                      submodule_search_locations=[str(root)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _sweep(root: Path) -> Path:
    sweep = root / "multirun" / "2025-03-03" / "10-00-00"
    for c in range(3):
        cell = sweep / f"{c}_retriever.k={10 * (c + 1)}"
        (cell / ".hydra").mkdir(parents=True)
        (cell / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"retriever.k={10 * (c + 1)}"]))
        rows = [{"id": f"t{t}", "question": f"Q{t}", "answer": "a", "hop": "single",
                 "scores": {"f1": 0.5, "ir/retrieval/nDCG@10": NDCG[c][t]},
                 "judges": {"liverag": {"correctness": CORRECTNESS[c][t], "faithfulness": 1, "attempts": 1}},
                 "nuggets": {"vital_strict": VITAL[c][t], "all_strict": 0.5, "vital": VITAL[c][t], "all": 0.5}}
                for t in range(3)]
        atomic_write_jsonl(cell / "answers.jsonl", rows)
        (cell / "metrics.json").write_text(json.dumps({"judge/liverag/correctness/all": sum(CORRECTNESS[c]) / 3,
                                                       "nuggets/vital_strict/all": sum(VITAL[c]) / 3}))
    return sweep


def test_leaderboards_are_read_back_by_autojudge_evaluates_own_loader(tmp_path, capsys):
    sweep = _sweep(tmp_path)
    assert summary_main([str(sweep), "--no-wandb", "--leaderboards"]) == 0
    assert "leaderboards" in capsys.readouterr().out
    files = {p.name: p for p in (sweep / "leaderboards").glob("*.txt")}
    assert {"judge-liverag-correctness.txt", "nuggets-vital_strict.txt", "scores-ir-retrieval-nDCG_10.txt",
            "scores-f1.txt"} <= set(files)
    assert not [n for n in files if "attempts" in n]  # bookkeeping is no evaluation
    load = autojudge_eval_results().load
    cells = sorted(p.name for p in sweep.iterdir() if (p / ".hydra").is_dir())
    for name, measure, table in (("judge-liverag-correctness.txt", "judge/liverag/correctness", CORRECTNESS),
                                 ("nuggets-vital_strict.txt", "nuggets/vital_strict", VITAL),
                                 ("scores-ir-retrieval-nDCG_10.txt", "scores/ir/retrieval/nDCG@10", NDCG)):
        # the strictest reading: a complete grid, every run the same topics, the aggregate rows as written
        result = load(files[name], format="tot", recompute_aggregates=False, verify=True, on_missing="error")
        assert result.run_ids == set(cells) and result.measures == {measure}
        assert result.topic_ids == {"t0", "t1", "t2"}
        ranking = result.get_aggregate_ranking(measure)
        for c, cell in enumerate(cells):
            assert ranking[cell] == pytest.approx(sum(table[c]) / 3, abs=1e-12)
            assert result.get_value(cell, "t1", measure) == table[c][1]
        # autojudge-evaluate's own macro-average over topics agrees with our `all` rows
        recomputed = load(files[name], format="tot", drop_aggregates=True, recompute_aggregates=True, verify=True,
                          on_missing="error")
        assert recomputed.get_aggregate_ranking(measure) == pytest.approx(ranking, abs=1e-12)
    # only the evaluations asked for
    for path in files.values():
        path.unlink()
    summary_main([str(sweep), "--no-wandb", "--leaderboards", "nuggets/*"])
    assert sorted(p.name for p in (sweep / "leaderboards").glob("*.txt")) == [
        "nuggets-all.txt", "nuggets-all_strict.txt", "nuggets-vital.txt", "nuggets-vital_strict.txt"]
