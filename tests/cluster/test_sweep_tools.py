"""Sweep folder tools on a hand-made SLURM sweep folder (fast): cell discovery (started, failed, never started),
the summary table and its files, the W&B summary run read back from disk, `jobs.status` and `jobs.resubmit`."""

from __future__ import annotations

import csv
import json
import pickle
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

import jobs.status
from eval.summary import collect, metric_direction, summarize, summary_run_id
from jobs import resubmit
from rag.sweep.cells import load_sweep
from tests.cluster.helpers import offline_runs, read_wandb_run, wandb_table

TASK = ["dataset=hotpotqa", "rerank.k=2,3", "ordering=inverted,as_ranked"]
#: the four cells BasicSweeper makes of TASK, in job-number order
CELLS = [["dataset=hotpotqa", "rerank.k=2", "ordering=inverted"],
         ["dataset=hotpotqa", "rerank.k=2", "ordering=as_ranked"],
         ["dataset=hotpotqa", "rerank.k=3", "ordering=inverted"],
         ["dataset=hotpotqa", "rerank.k=3", "ordering=as_ranked"]]


def _dirname(overrides: list[str]) -> str:
    return ",".join(sorted(overrides))


def _write_cell(sweep: Path, num: int, metrics: dict | None, journal: int = 0, job: str | None = None) -> Path:
    cell = sweep / f"{num}_{_dirname(CELLS[num])}"
    (cell / ".hydra").mkdir(parents=True)
    (cell / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(CELLS[num]))
    (cell / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump(
        {"hydra": {"job": {"id": job or f"900_{num}", "num": num}, "runtime": {"cwd": str(sweep)},
                   "mode": "MULTIRUN"}}))
    (cell / ".hydra" / "config.yaml").write_text(yaml.safe_dump(
        {"logger": {"_target_": "rag.loggers.wandb_logger.WandbLogger", "project": "sweep-test",
                    "entity": None, "mode": "offline"}}))
    rows = [{"id": f"q{i}", "answer": "a", "hop": "multi", "scores": {"f1": 0.1 * (num + i), "em": 0.0}}
            for i in range(3)]
    if journal:
        (cell / "answers.partial.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:journal]))
    if metrics is not None:
        (cell / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (cell / "metrics.json").write_text(json.dumps(metrics))
    return cell


@pytest.fixture
def sweep_dir(tmp_path) -> Path:
    """Cells 0 and 2 complete, 1 failed after journalling 1 answer (CUDA OOM), 3 never started."""
    sweep = tmp_path / "multirun" / "2025-01-01" / "10-00-00"
    sweep.mkdir(parents=True)
    (sweep / "multirun.yaml").write_text(yaml.safe_dump({
        "hydra": {
            "sweep": {"dir": str(sweep), "subdir": "${hydra.job.num}_${hydra.job.override_dirname}"},
            "sweeper": {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"},
            "launcher": {"_target_": "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher",
                         "submitit_folder": "${hydra.sweep.dir}/.submitit/%j", "partition": "debug",
                         "timeout_min": 30, "cpus_per_task": 1, "mem_gb": 2, "gpus_per_node": 0,
                         "gres": None, "signal_delay_s": 120, "max_num_timeout": 2,
                         "setup": ["echo setup-line"], "additional_parameters": {}},
            "overrides": {"hydra": ["hydra/launcher=slurm", "hydra.mode=MULTIRUN"], "task": TASK},
            "job": {"name": "main", "config": {"override_dirname": {
                "kv_sep": "=", "item_sep": ",", "exclude_keys": ["logger", "paths.cache_dir"]}}},
            "runtime": {"cwd": str(tmp_path)}},
        "dataset": {"name": "hotpotqa"}}))
    _write_cell(sweep, 0, {"answer/f1/all": 0.5, "recall/rerank@2/all": 0.8, "time/total_s": 10.0,
                           "llm_calls": 3, "n_questions": 3})
    _write_cell(sweep, 1, None, journal=1)
    _write_cell(sweep, 2, {"answer/f1/all": 0.7, "recall/rerank@3/all": 0.6, "time/total_s": 12.5,
                           "llm_calls": 3, "n_questions": 3})
    job = sweep / ".submitit" / "900_1"
    job.mkdir(parents=True)
    (job / "900_1_0_log.err").write_text("loading model\nTraceback (most recent call last):\n"
                                         "torch.OutOfMemoryError: CUDA out of memory\n")
    with open(job / "900_1_0_result.pkl", "wb") as handle:
        pickle.dump(("error", "Traceback ...\ntorch.OutOfMemoryError: CUDA out of memory"), handle)
    (sweep / ".submitit" / "900").mkdir()
    (sweep / ".submitit" / "900" / "900_submission.sh").write_text("#!/bin/bash\n")
    return sweep


@pytest.fixture(autouse=True)
def no_scheduler(monkeypatch):
    """The hand-made job ids do not exist in any scheduler: answer as if SLURM had forgotten them."""
    monkeypatch.setattr(jobs.status, "job_states", lambda ids, local=False: {})


def test_cells_include_never_started_ones_with_their_future_folder(sweep_dir):
    sweep = load_sweep(sweep_dir)
    assert [c.num for c in sweep.cells] == [0, 1, 2, 3]
    assert [c.started for c in sweep.cells] == [True, True, True, False]
    assert [c.complete for c in sweep.cells] == [True, False, True, False]
    assert sweep.cells[3].dir == sweep_dir / "3_dataset=hotpotqa,ordering=as_ranked,rerank.k=3"
    assert sweep.cells[3].overrides == CELLS[3]
    assert sweep.swept_keys == ["rerank.k", "ordering"]
    assert sweep.fixed_overrides == {"dataset": "hotpotqa"}
    assert sweep.group == f"{sweep_dir.parent.name}_10-00-00"
    assert sweep.cells[1].job_id == "900_1"
    assert sweep.launcher_params()["partition"] == "debug"


def test_summary_table_marks_best_cell_per_metric(sweep_dir):
    summary = collect(sweep_dir)
    assert [r["status"] for r in summary.rows] == ["complete", "incomplete (1 answers)", "complete",
                                                   "not started"]
    assert [(r["rerank.k"], r["ordering"]) for r in summary.rows] == [("2", "inverted"), ("2", "as_ranked"),
                                                                      ("3", "inverted"), ("3", "as_ranked")]
    cells = [r["cell"] for r in summary.rows]
    assert summary.best["answer/f1/all"].cells == [cells[2]]  # max
    assert summary.best["time/total_s"].cells == [cells[0]]  # min: cost
    # each cut-off keeps its own column: recall@2 and recall@3 are different metrics, never one "best"
    assert [r["recall/rerank@2/all"] for r in summary.rows] == [0.8, None, None, None]
    assert [r["recall/rerank@3/all"] for r in summary.rows] == [None, None, 0.6, None]
    assert summary.best["recall/rerank@2/all"].cells == [cells[0]]
    assert summary.best["recall/rerank@3/all"].cells == [cells[2]]
    assert not any("@k" in m for m in summary.metrics)
    assert "n_questions" not in summary.best and "llm_calls" in summary.best  # bookkeeping is not ranked
    assert metric_direction("llm_calls") == -1 and metric_direction("answer/em/all") == 1
    assert metric_direction("llm_cost_usd") == -1 and metric_direction("rerank/seconds_per_question") == -1
    assert metric_direction("llm_tokens_per_s") == 1 and metric_direction("retrieval_cache_hits") == 0


def test_summary_files_and_wandb_run(sweep_dir):
    summary = summarize(sweep_dir, wandb=True, n_boot=20)
    csv_lines = (sweep_dir / "summary.csv").read_text().splitlines()
    assert csv_lines[0].startswith("cell,status,rerank.k,ordering,")
    assert len(csv_lines) == 5
    md = (sweep_dir / "summary.md").read_text()
    assert "**0.7**" in md and "**10**" in md and "Fixed overrides: `dataset=hotpotqa`" in md
    assert "answer/f1/all,max,0.7," in (sweep_dir / "best.csv").read_text()
    assert json.loads((sweep_dir / "summary.json").read_text())["n_complete"] == 2
    assert not list(sweep_dir.glob(".*.tmp"))
    # scores/f1 vs scores/em over 2 cells: undefined, with the reason, never a perfect 1.0
    [pair] = list(csv.DictReader((sweep_dir / "agreement.csv").read_text().splitlines()))
    assert (pair["eval_a"], pair["eval_b"], pair["tau_b"], pair["reason"]) == (
        "scores/em", "scores/f1", "", "fewer than 3 runs")
    assert pair["questions"] == ""  # one question set: the table is not split

    runs = offline_runs(sweep_dir)
    assert len(runs) == 1
    run = read_wandb_run(runs[0])
    assert run["group"] == f"{sweep_dir.parent.name}_10-00-00" and run["job_type"] == "sweep-summary"
    assert run["name"] == f"{sweep_dir.parent.name}_10-00-00-summary"
    # tags: the swept values only (cells that never started still name theirs)
    assert set(run["tags"]) == {"rerank.k=2", "rerank.k=3", "ordering=inverted", "ordering=as_ranked"}
    assert run["config"]["n_cells"] == 4 and run["config"]["swept"] == ["rerank.k", "ordering"]
    assert run["summary"]["best/answer/f1/all"] == 0.7
    assert run["summary"]["best_cell/answer/f1/all"] == summary.rows[2]["cell"]
    table = wandb_table(runs[0], "sweep/summary")
    assert len(table["data"]) == 4 and table["columns"][:4] == ["cell", "status", "rerank.k", "ordering"]

    # a re-summary (e.g. after a resubmission) updates the same W&B run instead of adding another
    summarize(sweep_dir, wandb=True, n_boot=20)
    again = offline_runs(sweep_dir)
    assert {read_wandb_run(r)["run_id"] for r in again} == {run["run_id"]} == {summary_run_id(sweep_dir)}


def test_status_reports_states_and_failure_tail(sweep_dir, capsys):
    code = jobs.status.main([str(sweep_dir), "--check"])
    out = capsys.readouterr().out
    assert code == 1  # not all complete
    assert "CUDA out of memory" in out and "1 answers kept" in out
    assert "2 complete, 1 failed, 1 missing" in out
    jobs.status.main([str(sweep_dir), "--json"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["state"] for r in rows] == ["complete", "failed", "complete", "missing"]
    assert [r["has_metrics"] for r in rows] == [True, False, True, False]
    assert rows[1]["job_id"] == "900_1" and rows[1]["scheduler_state"] == "FAILED"


def test_status_names_who_holds_a_failed_cells_folder(sweep_dir, capsys):
    """A failed cell whose folder still names a holder (run.holder.json: an execution writing it, or one killed
    while it did) says so, since a resubmission into a held folder is refused."""
    failed = next(p for p in sweep_dir.iterdir() if p.name.startswith("1_"))
    (failed / "run.holder.json").write_text(json.dumps({"host": "node7", "pid": 4242, "slurm_job": "900_1",
                                                        "since": "2025-01-01T10:05:00+0000"}))
    jobs.status.main([str(sweep_dir)])
    assert ("its folder names a holder: process 4242 on node7, SLURM job 900_1, since 2025-01-01T10:05:00+0000"
            in capsys.readouterr().out)
    jobs.status.main([str(sweep_dir), "--json"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [bool(r["holder"]) for r in rows] == [False, True, False, False]


def test_resubmit_selects_failed_and_missing_cells_with_their_overrides(sweep_dir, capsys):
    assert resubmit.main([str(sweep_dir), "--dry-run", "--launcher", "slurm"]) == 0
    out = capsys.readouterr().out
    commands = [line for line in out.splitlines() if line.startswith("DRY RUN: sbatch")]
    assert len(commands) == 2
    for num, command in zip((1, 3), commands):
        cell_dir = sweep_dir / f"{num}_{_dirname(CELLS[num])}"
        parts = shlex.split(command.removeprefix("DRY RUN: "))
        # quoted for Hydra's override grammar: the folder name holds "=" and ","
        assert parts[-4:] == [*CELLS[num], f"hydra.run.dir='{cell_dir}'"]
        for option in ("--partition=debug", "--time=30", "--mem=2G", "--cpus-per-task=1",
                       "--signal=B:USR1@120", "single_run.sbatch"):
            assert option in command
        assert "--gpus-per-node" not in command  # 0 GPUs: no GPU request at all
    assert resubmit.main([str(sweep_dir), "--dry-run", "--launcher", "local", "--cells", "3"]) == 0
    out = capsys.readouterr().out
    commands = [line for line in out.splitlines() if line.startswith("DRY RUN:")]
    assert len(commands) == 1
    assert shlex.split(commands[0].removeprefix("DRY RUN: "))[1:] == [
        "-m", "rag.main", *CELLS[3], f"hydra.run.dir='{sweep_dir / ('3_' + _dirname(CELLS[3]))}'"]


@pytest.mark.parametrize("target, expands", [
    ("hydra_plugins.rag_sweep.sweeper.CheckedSweeper", True),  # the project's default sweeper (hydra/sweeper: checked)
    ("hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper", False)])
def test_never_started_cells_of_the_projects_own_sweeper_are_found(target, expands):
    """The cells a sweep under CheckedSweeper (a BasicSweeper that checks every cell first) never started are
    expected from its overrides as BasicSweeper's are; a sweeper that picks cells as it goes has none to expect."""
    from rag.sweep.cells import expected_overrides

    master = {"hydra": {"sweeper": {"_target_": target}, "overrides": {"task": TASK}}}
    assert expected_overrides(master) == (CELLS if expands else None)


def test_resubmit_says_how_to_refresh_and_refresh_rewrites_the_summary(sweep_dir, capsys, monkeypatch):
    """Issue 52: after `jobs.resubmit` the summary said "2 complete" for good. A SLURM resubmission now ends with the
    one line to run once its jobs end; `--refresh` writes summary.md again with the cells that completed since."""
    monkeypatch.setattr(resubmit, "submit_slurm", lambda sweep, status, launcher, dry_run=False: "901")
    assert resubmit.main([str(sweep_dir), "--launcher", "slurm"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == ("when the resubmitted cells have completed, write the sweep's summary and report again: "
                    f"python -m jobs.resubmit {sweep_dir} --refresh")
    summarize(sweep_dir, wandb=False)
    assert "Cells: 2 complete of 4" in (sweep_dir / "summary.md").read_text()
    for num in (1, 3):  # the resubmitted cells complete (as their jobs would write them)
        for cell in sweep_dir.glob(f"{num}_*"):
            shutil.rmtree(cell)
        _write_cell(sweep_dir, num, {"answer/f1/all": 0.1 * num, "llm_calls": 3, "n_questions": 3}, job=f"901_{num}")
    assert resubmit.main([str(sweep_dir), "--refresh"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == \
        "summary and report written again: 4 of 4 cells complete"
    assert "Cells: 4 complete of 4" in (sweep_dir / "summary.md").read_text()


def test_expected_cells_merge_an_experiments_sweeper_params_with_the_command_line_as_hydra_does():
    """Issue 51's crossings: `experiment=poisoning generator=simple,trustrag attack.n_passages=0,5` (the experiment
    sweeps generator, attack.n_passages and retriever in `hydra.sweeper.params`) ran 8 cells, but the summary
    expanded the command line alone and said "8 complete of 12", with 4 phantom cells. Hydra's basic sweeper puts
    the params first and lets the command line replace a key's values in place."""
    from rag.sweep.cells import expected_overrides

    master = {"hydra": {"sweeper": {"_target_": "hydra_plugins.rag_sweep.sweeper.CheckedSweeper",
                                    "params": {"generator": "simple,trustrag,astuterag,instructrag",
                                               "attack.n_passages": "0,1,3,5", "retriever": "bm25,dense"}},
                        "overrides": {"task": ["experiment=poisoning", "generator=simple,trustrag",
                                               "attack.n_passages=0,5"]}}}
    cells = expected_overrides(master)
    assert len(cells) == 8
    assert cells[0] == ["generator=simple", "attack.n_passages=0", "retriever=bm25", "experiment=poisoning"]
    assert cells[1] == ["generator=simple", "attack.n_passages=0", "retriever=dense", "experiment=poisoning"]
    assert cells[-1] == ["generator=trustrag", "attack.n_passages=5", "retriever=dense", "experiment=poisoning"]
