"""The pipeline's evaluation hook: judge and nuggetize a run's records, return flat metrics for metrics.json.

Called once per run after generation as `evaluate_records(cfg.judge, records, run_dir, cache_dir)`. Each record
dict gets `record["judges"][<judge name>]` (scores, or a parse-failure / skip marker) and, when nuggets are on,
`record["nuggets"]` (the four AutoNuggetizer scores and the per-nugget assignments). Files written to `run_dir`:
`eval_report.md` (means and RAGtifier Table 1 layout) and, for nuggets, `nuggets/create.jsonl` and
`nuggets/assign.jsonl` in castorini/nuggetizer's record shapes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from eval.engines import EnginePool, to_plain
from eval.judges import build_judge
from eval.nuggets import AutoNuggetizer, nugget_scores, topic_from_record
from eval.report import judge_summary, markdown_report, nugget_summary
from rag.core.io import atomic_write_jsonl, atomic_write_text
from rag.llm.base import LLMEngine

log = logging.getLogger(__name__)


def evaluate_records(judge_cfg: Any, records: list[dict], run_dir: Path, cache_dir: Path,
                     engines: Mapping[str, LLMEngine] | None = None) -> dict[str, Any]:
    """Run every configured judge and the AutoNuggetizer over `records` (mutated in place); return metrics.

    `engines` maps `eval.engines.llm_key(llm_cfg)` to engines the caller already holds (e.g. the generator's),
    so a judge configured with the run's own `${llm}` does not load the model a second time.
    """
    cfg = to_plain(judge_cfg) or {}
    if not cfg.get("enabled", False):
        return {}
    run_dir, cache_dir = Path(run_dir), Path(cache_dir)
    pool = EnginePool(cache_dir, engines)
    metrics: dict[str, Any] = {}
    judged: list[tuple[str, str]] = []
    ncfg = cfg.get("nuggets") or {}
    try:
        seen: set[str] = set()
        for spec in cfg.get("judges") or []:
            if not spec.get("enabled", True):
                continue
            if not spec.get("llm"):
                raise ValueError(f"judge {spec.get('name')!r} has no `llm` config")
            judge = build_judge(spec)
            if judge.name in seen:
                raise ValueError(f"two judges are named {judge.name!r}; give each a distinct `name`")
            seen.add(judge.name)
            engine = pool.get(spec["llm"])
            log.info("judge %s (%s) with %s on %d records", judge.name, judge.kind_name, engine.model, len(records))
            for record, result in zip(records, judge.judge(engine, records)):
                _judges(record)[judge.name] = result
            metrics.update(judge_summary(judge.name, judge.kind_name, records))
            judged.append((judge.name, judge.kind_name))
        if ncfg.get("enabled", False):
            metrics.update(run_nuggets(ncfg, records, run_dir, cache_dir, pool))
        if (cfg.get("crucible") or {}).get("enabled", False):  # Crucible's five metrics (judge=crucible)
            from eval.crucible_metrics import run_crucible

            metrics.update(run_crucible(cfg["crucible"], records, run_dir, cache_dir, pool))
    finally:
        pool.close()
    if cfg.get("report", True):
        atomic_write_text(run_dir / "eval_report.md",
                          markdown_report(metrics, judged, bool(ncfg.get("enabled", False))))
    return metrics


def _judges(record: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    if not isinstance(record.get("judges"), MutableMapping):
        record["judges"] = {}
    return record["judges"]


def run_nuggets(ncfg: Mapping[str, Any], records: Sequence[dict], run_dir: Path, cache_dir: Path,
                pool: EnginePool) -> dict[str, Any]:
    """Create (or reuse) nuggets per topic, assign them to each answer, store scores on the records."""
    if not ncfg.get("llm"):
        raise ValueError("judge.nuggets has no `llm` config")
    engine = pool.get(ncfg["llm"])
    options = {k: v for k, v in ncfg.items() if k not in ("enabled", "llm")}
    nuggetizer = AutoNuggetizer(cache_dir=cache_dir, **options)
    topics = [topic_from_record(r, nuggetizer.max_passages) for r in records]
    sets = nuggetizer.create(engine, topics)
    usable = [i for i, s in enumerate(sets) if s.failure is None]
    assigned = nuggetizer.assign(engine, [(records[i].get("question", ""), records[i].get("answer") or "",
                                           sets[i].nuggets) for i in usable])
    by_index = dict(zip(usable, assigned))
    assign_rows = []
    skipped = 0
    for i, (record, nset, topic) in enumerate(zip(records, sets, topics)):
        base = {"source": topic.source, "importance_failures": nset.importance_failures,
                "create_failures": nset.create_failures}
        if nset.failure in ("no_passages", "not_in_nugget_file"):
            skipped += 1
            record["nuggets"] = {**base, "skipped": True, "skip_reason": nset.failure}
            continue
        if nset.failure is not None:
            record["nuggets"] = {**base, "parse_failed": True, "failure_stage": "create", "reason": nset.failure}
            continue
        result = by_index[i]
        if result.failed_windows:
            record["nuggets"] = {**base, "parse_failed": True, "failure_stage": "assign",
                                 "failed_windows": result.failed_windows, "assignments": result.nuggets}
            continue
        record["nuggets"] = {**base, **nugget_scores(result.nuggets), "n_nuggets": len(result.nuggets),
                             "n_vital": sum(1 for n in result.nuggets if n["importance"] == "vital"),
                             "assignments": result.nuggets}
        answer = record.get("answer") or ""
        assign_rows.append({"query": nset.query, "qid": nset.qid, "answer_text": answer,
                            "response_length": len(answer.split()), "run_id": run_dir.name,
                            "nuggets": result.nuggets})
    if skipped:
        log.warning("nuggets: %d of %d records have no passages (or no nuggets in nugget_file); skipped",
                    skipped, len(records))
    atomic_write_jsonl(run_dir / "nuggets" / "create.jsonl", [s.record() for s in sets if s.failure is None])
    atomic_write_jsonl(run_dir / "nuggets" / "assign.jsonl", assign_rows)
    out = nugget_summary(records)
    out["nuggets/skipped"] = skipped
    out["nuggets/cached_topics"] = sum(1 for s in sets if s.cached)
    return out
