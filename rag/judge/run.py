"""Evaluate a run's answers with whatever judges the `judge` config group composed; return flat metrics.

`cfg.judge` holds shared settings (`llm`: the judges' default engine, the run's own `${llm}` unless set;
`release_generator`; `report`; `nuggetizer`: AutoNuggetizer's settings, the one node every nugget-based judge
uses, added by their YAMLs) and one node per judge, each with `_target_` (a `rag.judge.base.Judge` subclass),
placed there by `judge=[liverag,nuggets]`, `judge=full` or a YAML of your own (`# @package judge.<name>`).
When a judge is scored against nuggets (`uses_nuggets`), the `nuggetizer` node makes the run's one nugget set
before any judge runs, and every such judge receives it (`rag.judge.nugget_sets`).
Every judge writes its per-answer results into the records and returns its run metrics; the LLM work of all
judges is reported apart from generation as `eval/llm_calls`, `eval/prompt_tokens`, ... (usage deltas of the
engines the judges used). Files: `eval_report.md` and whatever the judges write (nuggets/*.jsonl).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag.core.components import build_component, component_nodes
from rag.core.errors import ConfigError, DataError
from rag.core.io import atomic_write_text
from rag.judge.base import EvalContext, Judge
from rag.judge.nugget_sets import NUGGET_SET, NuggetSet, NuggetSource, judge_entry, metric_key
from rag.judge.repeats import Noise, judge_noise, noise_report, repeat_judge
from rag.llm.base import Usage
from rag.llm.factory import EngineFactory, to_plain, usage_delta
from rag.metrics.registry import REGISTRY
from rag.records import AnswerRecord

log = logging.getLogger(__name__)

#: keys of `cfg.judge` that are settings, not judges
SETTINGS = ("llm", "report", "release_generator", "repeats", "repeat_temperature", "nuggetizer")
#: the settings node that makes the run's nugget set
NUGGETIZER = "nuggetizer"


def judge_nodes(judge_cfg: Any) -> dict[str, dict[str, Any]]:
    """The judge entries of a `judge` config node (mappings with `_target_`), by config key, resolved."""
    return component_nodes("judge", judge_cfg, SETTINGS, "a judge")


def build_judge(key: str, node: Mapping[str, Any]) -> Judge:
    """A judge from its config node: `_target_` names the class; `name` defaults to the config key."""
    return build_component("judge", key, node, Judge)


def build_judges(judge_cfg: Any) -> list[Judge]:
    judges = [build_judge(k, n) for k, n in judge_nodes(judge_cfg).items()]
    names = [j.name for j in judges]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"judge: two judges are named {dupes[0]!r}; give each a distinct `name`")
    if any(j.uses_nuggets for j in judges):
        build_nuggetizer(judge_cfg, [j.name for j in judges if j.uses_nuggets])  # a bad setting fails here
    for judge in judges:
        for spec in judge.metric_specs():
            REGISTRY.declare(spec, first=True, replace=True)
    return judges


def build_nuggetizer(judge_cfg: Any, needed_by: Sequence[str] = ()) -> NuggetSource:
    """The nugget source from `judge.nuggetizer` (`_target_` and its settings); one line when it is missing."""
    plain = to_plain(judge_cfg) or {}
    node = plain.get(NUGGETIZER) if isinstance(plain, Mapping) else None
    if not isinstance(node, Mapping) or "_target_" not in node:
        raise ConfigError(f"judge.{NUGGETIZER}: judge(s) {', '.join(needed_by) or '?'} are scored against nuggets "
                          f"and need AutoNuggetizer's settings node (conf/judge/{NUGGETIZER}.yaml, which the nugget "
                          f"judges' YAMLs add: compose them with judge=[...])")
    return build_component("judge", NUGGETIZER, {**node, "name": NUGGETIZER}, NuggetSource)


def declare_saved_specs(config: Mapping[str, Any]) -> list[str]:
    """Declare to the registry the metric names a saved run config's judges and metrics write, so a process
    that never ran them (the sweep summary after a SLURM sweep, `python -m eval.agreement`) names and ranks
    their metrics as the run did; returns one line per component that could not be built (then left out)."""
    from rag.metrics.base import build_metrics

    problems = []
    for what, build in (("judge", build_judges), ("metrics", build_metrics)):
        try:
            build(config.get(what))
        except (ConfigError, DataError, OSError, ImportError, TypeError, ValueError) as err:
            problems.append(f"{what}: {err}")
    return problems


def _sum_usage(usages: Sequence[Usage]) -> Usage:
    total = Usage()
    for u in usages:
        for k in Usage.__dataclass_fields__:
            setattr(total, k, getattr(total, k) + getattr(u, k))
    return total


def evaluate_records(judge_cfg: Any, records: Sequence[AnswerRecord], run_dir: str | Path, cache_dir: str | Path,
                     engines: EngineFactory | None = None) -> dict[str, Any]:
    """Run every configured judge over `records` (their `judges` / `nuggets` fields are filled in); metrics.

    `engines` is the run's factory, so a judge configured with the run's own `llm` reuses the loaded model; a
    fresh factory (closed afterwards) is used when none is given.
    """
    judges = build_judges(judge_cfg)
    if not judges:
        return {}
    settings = to_plain(judge_cfg) or {}
    run_dir, cache_dir = Path(run_dir), Path(cache_dir)
    own = engines is None
    factory = engines if engines is not None else EngineFactory(cache_dir)
    ctx = EvalContext(run_dir=run_dir, cache_dir=cache_dir)
    before, cost_before, released_before = factory.usage(), factory.cost_usd(), factory.released
    metrics: dict[str, Any] = {}
    repeats, temperature = repeat_settings(settings)
    noise: list[Noise] = []
    release = bool(settings.get("release_generator", False))
    try:
        if any(j.uses_nuggets for j in judges):
            ctx.nuggetizer = build_nuggetizer(judge_cfg, [j.name for j in judges if j.uses_nuggets])
            maker = factory.get(ctx.nuggetizer.llm, release_others=release) if ctx.nuggetizer.llm else None
            ctx.nuggets = ctx.nuggetizer.nugget_set(records, maker, cache_dir)
            log.info("nugget set %s (%s) for %d topics: %d with nuggets", ctx.nuggets.identity, ctx.nuggets.source,
                     len(ctx.nuggets.topics), len(ctx.nuggets.usable()))
        for key, judge in zip(judge_nodes(judge_cfg), judges):
            engine = None
            if judge.llm is not None:
                # errors name the setting that configures it: judge.llm, or the judge's own judge.<key>.llm
                setting = "judge.llm" if to_plain(judge.llm) == settings.get("llm") else f"judge.{key}.llm"
                engine = factory.get(judge.llm, release_others=release, setting=setting)
            log.info("judge %s (%s) with %s on %d records", judge.name, type(judge).__name__,
                     engine.model if engine else "no LLM", len(records))
            metrics.update(judge.evaluate(records, engine, ctx))
            if judge.uses_nuggets and ctx.nuggets is not None:
                metrics.update(record_nugget_set(judge, records, ctx.nuggets))
            if engine is not None and repeats > 1:  # judge noise: every answer judged again with other seeds
                repeat_judge(judge, records, engine, ctx, repeats, temperature)
                found = judge_noise(judge, records)
                noise += found
                metrics.update({k: v for n in found for k, v in n.metrics().items()})
        after, cost_after = factory.usage(), factory.cost_usd()
        used = _sum_usage([usage_delta(u, before.get(k, Usage())) for k, u in after.items()])
        metrics.update(used.metrics("eval/"))
        cost = sum(cost_after.values()) - sum(cost_before.values())
        if cost:
            metrics["eval/llm_cost_usd"] = round(cost, 6)
        if factory.released - released_before:
            metrics["eval/engines_released"] = factory.released - released_before
    finally:
        if own:
            factory.close()
    if settings.get("report", True):
        atomic_write_text(run_dir / "eval_report.md", markdown_report(metrics, judges, noise))
    return metrics


def judge_draw(judge_cfg: Any, records: Sequence[AnswerRecord], run_dir: str | Path, cache_dir: str | Path,
                engines: EngineFactory) -> dict[str, Any]:
    """The run's judges on another draw of its answers (`generation.repeats`): as `evaluate_records`, without
    `judge.repeats` and without writing eval_report.md (the run's own answers' report); `run_dir` is the draw's own
    folder, where the judges write their files (nuggets/, argue/), so the run's stay its own."""
    from omegaconf import OmegaConf

    return evaluate_records(OmegaConf.merge(judge_cfg, {"repeats": 1, "report": False}), records, run_dir, cache_dir,
                            engines)


def repeat_settings(settings: Mapping[str, Any]) -> tuple[int, float | None]:
    """`judge.repeats` (1: no repeats) and `judge.repeat_temperature` (None: each judge's own), checked."""
    repeats, temperature = settings.get("repeats", 1), settings.get("repeat_temperature")
    if repeats is None:
        repeats = 1
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ConfigError(f"judge.repeats={repeats!r}: a whole number of judgements per answer, at least 1")
    if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, (int, float))
                                    or temperature < 0):
        raise ConfigError(f"judge.repeat_temperature={temperature!r}: a sampling temperature >= 0, or null for "
                          f"each judge's own")
    return repeats, None if temperature is None else float(temperature)


def record_nugget_set(judge: Judge, records: Sequence[AnswerRecord], nuggets: NuggetSet) -> dict[str, Any]:
    """Every scored result of a nugget-based judge names its topic's set (`nugget_set`, `source`; a judge that
    did not write them gets them here), and the judge's run metrics name the set over the topics it scored."""
    for record in records:
        result, topic = record.judges.get(judge.name), nuggets.get(record.id)
        if isinstance(result, dict) and topic is not None and topic.failure is None and not result.get("skipped") \
                and not result.get("parse_failed"):
            result.setdefault(NUGGET_SET, topic.identity)
            result.setdefault("source", topic.source)
    entry = judge_entry(records, judge.name)
    return {metric_key(judge.metric_prefix): entry} if entry else {}


def markdown_report(metrics: Mapping[str, Any], judges: Sequence[Judge], noise: Sequence[Noise] = ()) -> str:
    """`eval_report.md`: each judge's own section, the judges' noise when repeated, then what the evaluation
    cost."""
    lines = ["# Evaluation report", ""]
    for judge in judges:
        section = judge.report(metrics)
        if section:
            lines += [section.rstrip(), ""]
    if noise:
        lines += [noise_report(noise).rstrip(), ""]
    lines += ["## Cost (apart from generation)", "",
              f"LLM calls: {metrics.get('eval/llm_calls')} (+{metrics.get('eval/llm_retries')} retried attempts, "
              f"{metrics.get('eval/llm_cache_hits')} from the response cache), tokens: "
              f"{metrics.get('eval/prompt_tokens')} prompt + {metrics.get('eval/completion_tokens')} completion, "
              f"backend seconds: {metrics.get('eval/llm_seconds')}", ""]
    return "\n".join(lines)
