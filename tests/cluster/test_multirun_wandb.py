"""A real multirun through hydra-submitit-launcher's local executor (`hydra/launcher=local`): one offline W&B run
per cell (named by its overrides, grouped by sweep, a tag per overridden value), the sweep summary written by
the Hydra callback with its own W&B run, `jobs.status` on submitit's job folders, and `jobs.resubmit` bringing
back a failed cell in its own folder without regenerating the answers it had journalled."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from rag.core.io import read_jsonl
from rag.sweep.cells import sweep_group
from tests.cluster.helpers import (
    CHEAP,
    offline_runs,
    rag_env,
    rag_main,
    read_wandb_run,
    run_module,
    sweep_dirs,
    wandb_table,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]


def _args() -> list[str]:
    fixed = [a for a in CHEAP if not a.startswith("rerank.k=")]
    return ["-m", "hydra/launcher=local", *fixed, "dataset.limit=2", "logger=wandb",
            "rerank.k=1,2", "ordering=inverted,as_ranked"]


def _overrides(cell) -> list[str]:
    return yaml.safe_load((cell / ".hydra" / "overrides.yaml").read_text())


def test_local_sweep_wandb_summary_status_and_resubmit(hotpot_data, tmp_path):
    env = rag_env(tmp_path)
    proc = rag_main(_args(), env, timeout=2000)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [sweep] = sweep_dirs(tmp_path / "outputs")
    cells = sorted((p for p in sweep.iterdir() if (p / ".hydra").is_dir()), key=lambda p: int(p.name.split("_")[0]))
    assert len(cells) == 4

    # one W&B run per cell: name = the cell's overrides, group = the sweep, one tag per overridden value
    for cell in cells:
        metrics = json.loads((cell / "metrics.json").read_text())
        [offline] = offline_runs(cell)
        logged = read_wandb_run(offline)
        overrides = _overrides(cell)
        assert logged["name"] == cell.name.split("_", 1)[1]
        assert logged["group"] == sweep_group(sweep)
        # tags: the swept values only, not the overrides every cell shares (dataset, limit, ...)
        assert set(logged["tags"]) == {o for o in overrides if o.split("=")[0] in ("rerank.k", "ordering")}
        assert logged["config"]["rerank"]["k"] == int(dict(o.split("=") for o in overrides)["rerank.k"])
        assert logged["config"]["dataset"]["limit"] == 2
        assert logged["summary"]["answer/f1/all"] == pytest.approx(metrics["answer/f1/all"])
        assert logged["summary"]["llm_calls"] == metrics["llm_calls"]
        assert logged["state"] == "finished"

    # the callback's sweep summary: files plus one W&B run in the same group
    rows = (sweep / "summary.csv").read_text().splitlines()
    assert rows[0].startswith("cell,status,rerank.k,ordering,") and len(rows) == 5
    assert all(",complete," in row for row in rows[1:])
    [summary_run] = offline_runs(sweep)  # (jobs.resubmit below re-summarizes into the same run id)
    logged = read_wandb_run(summary_run)
    assert logged["group"] == sweep_group(sweep) and logged["job_type"] == "sweep-summary"
    assert len(wandb_table(summary_run, "sweep/summary")["data"]) == 4
    assert any(k.startswith("best/answer/f1/") for k in logged["summary"])

    status = run_module("jobs.status", [str(sweep), "--json", "--check"], env)
    assert status.returncode == 0, status.stdout + status.stderr
    states = [json.loads(line) for line in status.stdout.splitlines()]
    assert [s["state"] for s in states] == ["complete"] * 4
    assert all(s["job_id"] and (sweep / ".submitit" / s["job_id"]).is_dir() for s in states)

    # cell 3 "dies" after journalling its first answer: status says failed, resubmit resumes it in place
    cell = cells[3]
    answers = read_jsonl(cell / "answers.jsonl")
    (cell / "answers.partial.jsonl").write_text(json.dumps(answers[0]) + "\n")
    for name in ("answers.jsonl", "metrics.json", "wandb_run.json"):
        (cell / name).unlink()
    shutil.rmtree(cell / "wandb")
    status = run_module("jobs.status", [str(sweep), "--json"], env)
    assert [json.loads(line)["state"] for line in status.stdout.splitlines()] == ["complete"] * 3 + ["failed"]

    again = run_module("jobs.resubmit", [str(sweep), "--launcher", "local"], env, timeout=1200)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "1 cell(s) to resubmit" in again.stdout
    resumed = read_jsonl(cell / "answers.jsonl")
    assert [r["id"] for r in resumed] == [r["id"] for r in answers]
    assert resumed[0] == answers[0]  # journalled answer kept verbatim
    metrics = json.loads((cell / "metrics.json").read_text())
    assert metrics["llm_calls"] + metrics["llm_cache_hits"] == 1  # only the unjournalled question
    [offline] = offline_runs(cell)
    logged = read_wandb_run(offline)
    assert logged["group"] == sweep_group(sweep)
    assert set(logged["tags"]) == {o for o in _overrides(cell) if o.split("=")[0] in ("rerank.k", "ordering")}
    assert logged["name"] == cell.name.split("_", 1)[1]
    assert run_module("jobs.status", [str(sweep), "--check"], env).returncode == 0
    assert [json.loads(line)["launcher"] for line in (sweep / "resubmit.jsonl").read_text().splitlines()] == \
        ["local"]
