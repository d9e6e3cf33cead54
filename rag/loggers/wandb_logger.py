"""Weights & Biases logger, offline by default so it works on compute nodes without network.

Offline runs land in `<dir>/wandb/offline-run-*`; `wandb sync <dir>/wandb/offline-run-*` uploads them later.
The config is redacted before logging, so no secret reaches W&B.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rag.core.secrets import redact
from rag.loggers.base import RunLogger

#: answers-table columns: short, readable fields (prompts and passages stay in answers.jsonl)
TABLE_COLUMNS = ("id", "hop", "question", "answer", "gold_answer", "f1", "em", "recall_rerank", "parse_failed")


class WandbLogger(RunLogger):
    def __init__(self, project: str = "ragtifier", entity: str | None = None, mode: str = "offline",
                 dir: str | None = None, group: str | None = None, tags: list[str] | None = None,
                 log_answers_table: bool = True, table_max_chars: int = 2000):
        self.project, self.entity, self.mode, self.dir = project, entity, mode, dir
        self.group, self.tags = group, list(tags or [])
        self.log_answers_table, self.table_max_chars = log_answers_table, table_max_chars

    def log_run(self, config, metrics, records, run_dir, name, group=None, tags=None) -> None:
        import wandb

        os.environ.setdefault("WANDB_SILENT", "true")
        wandb_dir = Path(self.dir or run_dir)
        wandb_dir.mkdir(parents=True, exist_ok=True)
        run = wandb.init(project=self.project, entity=self.entity, mode=self.mode, dir=str(wandb_dir),
                         name=name, group=group or self.group, tags=[*self.tags, *(tags or [])],
                         config=redact(config), reinit="finish_previous")
        try:
            run.summary.update(metrics)
            run.log({k: v for k, v in metrics.items() if isinstance(v, (int, float))})
            if self.log_answers_table and records:
                table = wandb.Table(columns=list(TABLE_COLUMNS))
                for r in records:
                    scores = r.get("scores", {})
                    row = [r.get("id"), r.get("hop"), r.get("question"), r.get("answer"), r.get("gold_answer"),
                           scores.get("f1"), scores.get("em"), scores.get("recall_rerank"), r.get("parse_failed")]
                    table.add_data(*[v[: self.table_max_chars] if isinstance(v, str) else v for v in row])
                run.log({"answers": table})
            (Path(run_dir) / "wandb_run.json").write_text(json.dumps(
                {"id": run.id, "mode": self.mode, "dir": str(wandb_dir / "wandb")}))
        finally:
            run.finish()
