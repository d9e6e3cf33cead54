"""Weights & Biases logger, offline by default so it works on compute nodes without network.

Offline runs land in `<dir>/wandb/offline-run-*`; `wandb sync <dir>/wandb/offline-run-*` uploads them later.
The config is redacted before logging, so no secret reaches W&B. Metric directions come from the registry
(`define_metric` keeps the max of a quality metric and the min of a cost), and the `answers` table has one column per judge field and nugget metric that any
answer carries, next to the answer's string scores.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag.core.hashing import cap_name
from rag.core.secrets import redact
from rag.loggers.base import RunLogger
from rag.metrics.registry import REGISTRY
from rag.records import AnswerRecord

log = logging.getLogger(__name__)

#: answers-table columns: short, readable fields (prompts and passages stay in answers.jsonl); then every
#: per-answer metric's scores, `parse_failed` and every judge's values
TABLE_COLUMNS = ("id", "hop", "question", "answer", "gold_answer")


def score_columns(records: Sequence[AnswerRecord]) -> list[str]:
    """The per-answer metrics' score keys, in first-seen order; recall at the extra `metrics.recall_at`
    cutoffs (`recall_<stage>@<k>...`) stays in answers.jsonl, one column per cutoff would drown the table."""
    return list(dict.fromkeys(k for r in records for k in r.scores if "@" not in k))


def answers_table_rows(records: Sequence[AnswerRecord], max_chars: int = 2000
                       ) -> tuple[list[str], list[list[Any]]]:
    """Columns and rows of the answers table: the fixed columns, then every judge's per-answer values (the
    reference judges' last: nugget scores after the LLM judges)."""
    found: set[str] = set()
    references: set[str] = set()
    for r in records:
        found.update(r.judge_values())
        references.update(r.reference_evaluations())
    evals = sorted(found - references) + sorted(found & references)
    scores = score_columns(records)
    rows = []
    for r in records:
        values = r.judge_values()
        row = [r.id, r.hop, r.question, r.answer, r.gold_answer, *(r.scores.get(k) for k in scores), r.parse_failed,
               *(values.get(e) for e in evals)]
        rows.append([v[:max_chars] if isinstance(v, str) else v for v in row])
    return [*TABLE_COLUMNS, *scores, "parse_failed", *evals], rows


def swept_keys_of(sweep_dir: Path) -> set[str] | None:
    """Keys the sweep varies (`rerank.k=5,10` -> rerank.k), from Hydra's `multirun.yaml`; None outside a sweep."""
    path = sweep_dir / "multirun.yaml"
    if not path.is_file():
        return None
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    from rag.sweep.cells import read_yaml

    task = OmegaConf.select(OmegaConf.create(read_yaml(path)), "hydra.overrides.task", default=None) or []
    parsed = OverridesParser.create().parse_overrides([str(o) for o in task])
    return {o.get_key_element().lstrip("+~") for o in parsed if o.is_sweep_override()}


#: W&B refuses a run whose tag is longer than 64 characters (a path given as an override makes one)
TAG_LIMIT = 64


def wandb_tags(tags: Sequence[str]) -> list[str]:
    """Tags as W&B takes them: a longer one keeps its start and a hash of the whole (still unique)."""
    return [cap_name(t, TAG_LIMIT) for t in tags if t]


def swept_only(tags: Sequence[str], run_dir: Path) -> list[str]:
    """In a sweep cell, keep the tags of swept values only (`rerank.k=5`), not overrides every cell shares."""
    try:
        swept = swept_keys_of(run_dir.parent)
    except Exception as err:  # noqa: BLE001 - tags are a convenience; never fail a finished run over them
        log.warning("cannot read the sweep's overrides (%s); tagging the run with all of its overrides", err)
        return list(tags)
    if swept is None:
        return list(tags)
    return [t for t in tags if t.split("=", 1)[0].lstrip("+~") in swept]


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
        run_dir = Path(run_dir)
        wandb_dir = Path(self.dir or run_dir)
        wandb_dir.mkdir(parents=True, exist_ok=True)
        typed = [r if isinstance(r, AnswerRecord) else AnswerRecord.from_json(r) for r in records]
        run = wandb.init(project=self.project, entity=self.entity, mode=self.mode, dir=str(wandb_dir),
                         name=name, group=group or self.group,
                         tags=wandb_tags([*self.tags, *swept_only(tags or [], run_dir)]),
                         config=redact(config), reinit="finish_previous")
        try:
            numeric = {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            for key in numeric:
                direction = REGISTRY.direction(key)
                if direction:
                    run.define_metric(key, summary="max" if direction > 0 else "min")
            run.summary.update(metrics)
            run.log(numeric)
            if self.log_answers_table and typed:
                columns, rows = answers_table_rows(typed, self.table_max_chars)
                run.log({"answers": wandb.Table(columns=columns, data=rows, allow_mixed_types=True)})
            (run_dir / "wandb_run.json").write_text(json.dumps(
                {"id": run.id, "mode": self.mode, "dir": str(wandb_dir / "wandb")}))
        finally:
            run.finish()
