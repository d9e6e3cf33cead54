"""The W&B logger reads answer records: per-answer judge and nugget columns in the `answers` table, metric goals
from the registry, and tags naming the swept values only; read back from real offline W&B files."""

from __future__ import annotations

import yaml
from evaltools import synthetic_records

from rag.loggers.wandb_logger import WandbLogger, swept_only
from rag.records import AnswerRecord
from tests.cluster.helpers import offline_runs, read_wandb_run, wandb_table


def test_answers_table_has_judge_and_nugget_columns(tmp_path):
    records = synthetic_records(2)
    records[0].judges = {"liverag": {"correctness": 2, "faithfulness": 1, "attempts": 1}}
    records[0] = AnswerRecord.from_json({**records[0].to_json(), "nuggets": {  # an earlier file's field
        "vital_strict": 0.5, "all_strict": 0.25, "vital": 0.5, "all": 0.5, "n_nuggets": 4}})
    records[1].judges = {"liverag": {"parse_failed": True, "raw": "??", "attempts": 3}}
    run_dir = tmp_path / "run"
    WandbLogger(project="logger-test", mode="offline").log_run(
        {"llm": {"api_key": "sk-secret"}}, {"judge/liverag/correctness/all": 2.0, "llm_calls": 2},
        [r.to_json() for r in records], run_dir, name="r", tags=["rerank.k=2"])
    [offline] = offline_runs(run_dir)
    table = wandb_table(offline, "answers")
    columns = table["columns"]
    assert columns[-6:] == ["judge/liverag/correctness", "judge/liverag/faithfulness", "nuggets/all",
                            "nuggets/all_strict", "nuggets/vital", "nuggets/vital_strict"]
    first, second = (dict(zip(columns, row)) for row in table["data"])
    assert first["judge/liverag/correctness"] == 2 and first["nuggets/vital_strict"] == 0.5
    assert second["judge/liverag/correctness"] is None  # a parse failure is no score
    logged = read_wandb_run(offline)
    assert logged["summary"]["judge/liverag/correctness/all"] == 2.0 and logged["tags"] == ["rerank.k=2"]


def test_tags_in_a_sweep_cell_are_the_swept_values(tmp_path):
    sweep = tmp_path / "sweep"
    (sweep / "0_x").mkdir(parents=True)
    (sweep / "multirun.yaml").write_text(yaml.safe_dump({"hydra": {"overrides": {"task": [
        "dataset=hotpotqa", "rerank.k=2,3", "ordering=glob(*)", "dataset.limit=2"]}}}))
    tags = ["dataset=hotpotqa", "rerank.k=2", "ordering=inverted", "dataset.limit=2"]
    assert swept_only(tags, sweep / "0_x") == ["rerank.k=2", "ordering=inverted"]
    assert swept_only(tags, tmp_path / "single_run") == tags  # a single run keeps its overrides
