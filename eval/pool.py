"""Pooled nuggets: one nugget set per topic for a whole sweep, so every cell is scored against the same yardstick.

Without gold documents a run's nugget judge makes a topic's nuggets from that run's own top passages, so each cell
of a sweep is scored against its own nugget set and agreement across cells compares different rulers (issue 23).
AutoNuggetizer (Pradeep et al., TREC 2024 RAG, section 4; the track's evaluation procedure) makes one set per topic
from the documents of the compared runs' pools that UMBRELA graded at least "related". This does that after a sweep:

1. pool: per topic, the `depth` best-ranked passages each complete cell's record gave its generator, in rank order
   (`AnswerRecord.ranked_passages`: the ranked list after reranking, not the prompt's order; `best_rank` is that
   rank), deduplicated by passage id, best rank first, then cell order; a topic whose records have gold documents
   uses those instead (not graded: they are the dataset's own relevant documents), as a run's judges do;
2. grade every pooled passage with UMBRELA (`eval.umbrela.UmbrelaGrader`: one batch, cached per pair and engine;
   by log-probabilities where the engine has them, `umbrela.mode`);
3. create nuggets once per topic from the passages graded at least `threshold` (default 1, "related", as the paper)
   with `AutoNuggetizer.create`, configured by the `judge.nuggetizer` node (and cached the same way);
4. write `<sweep>/nuggets/pool.jsonl` (per topic: the pooled passages with ids, grades, best rank and the cells
   that retrieved them), `pooled_create.jsonl` (castorini/nuggetizer's create shape, with `source: pooled`) and
   `pooled_sets.json` (the nugget-set identity of each topic and of the whole set), atomically;
5. re-score every nugget-based judge of every complete cell (nuggets, ARGUE, Crucible: those the cells ran, plus
   any composed here) against `pooled_create.jsonl` (`eval.main.rejudge`; each result records its topic's
   `nugget_set`, each cell's metrics.json the set per judge), then write the sweep summary again. The judges
   re-score with the pool's `judge.llm`; where the engine a cell's judge used differs (by identity, not display
   name) the pool refuses in one line before any LLM work, unless `pool.rescore_llm=pool` (then a warning says so).

    python -m eval.pool sweep_dir=SWEEP                         # llm, seed, dataset: the first complete cell's
    python -m eval.pool sweep_dir=SWEEP llm=gemma3_27b pool.depth=20 pool.threshold=2

Cells still run their own judges during the sweep (SLURM jobs need nothing from each other); this runs once they
have finished (by hand, or by the sweep-summary callback with `pool: true`). A topic with no passage at or above the threshold is logged, counted and left unscored. A rerun
after a kill takes grades, nuggets and the judges' responses from the caches.
"""

from __future__ import annotations

import copy
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf, open_dict

from eval.main import complete_from_run, rejudge, run_cache_dir
from eval.nuggets import AutoNuggetizer, Topic, topic_from_record
from eval.umbrela import GRADES, RELATED, GradeItem, UmbrelaGrader, build_grader
from rag.core.errors import ConfigError, DataError, MissingDataError, ServiceError
from rag.core.hashing import stable_hash
from rag.core.io import atomic_write_json, atomic_write_jsonl
from rag.core.overrides import quote_folder_overrides
from rag.judge.nugget_sets import TopicNuggets, identity_of
from rag.judge.run import NUGGETIZER, SETTINGS, build_judge, build_nuggetizer, judge_nodes
from rag.llm.base import LLMEngine
from rag.llm.factory import EngineFactory, llm_key
from rag.records import AnswerRecord
from rag.sweep.cells import Cell, SweepFolder, load_sweep

log = logging.getLogger(__name__)

#: where the pool's files go, inside the sweep folder
POOL_DIR = "nuggets"
POOL_FILE = "pool.jsonl"
CREATE_FILE = "pooled_create.jsonl"
SETS_FILE = "pooled_sets.json"
#: the run metrics `describe` prints per re-scored cell
SHOWN = ("nuggets/vital_strict/all", "argue/f1/all", "crucible/nugget_recall/all")


# -- pooling --------------------------------------------------------------------------------------------------
def text_id(text: str) -> str:
    """An id for a passage whose record names none (older records): its text's hash."""
    return "sha:" + stable_hash(text.strip(), length=16)


def _with_ids(ids: Sequence[str], texts: Sequence[str]) -> list[tuple[int, str, str]]:
    """(rank, id, text) of the non-empty texts, ranks from 1; ids that do not line up with the texts: text ids."""
    named = len(ids) == len(texts) and all(str(i).strip() for i in ids)
    return [(rank, str(ids[rank - 1]) if named else text_id(text), text)
            for rank, text in enumerate(texts, start=1) if isinstance(text, str) and text.strip()]


def record_passages(record: AnswerRecord, depth: int | None = None) -> list[tuple[int, str, str]]:
    """(rank, passage id, text) of the `depth` best-ranked passages the record's generator saw, in rank order
    (`AnswerRecord.ranked_passages`: the ranked list after reranking, not the prompt's order, which
    `ordering=inverted` reverses); the rank is the passage's rank there. Passages without an id: text ids."""
    ranked = record.ranked_passages()
    top = ranked[:depth] if depth else ranked
    return [(rank, pid or text_id(text), text) for rank, pid, text in top if isinstance(text, str) and text.strip()]


def record_gold(record: AnswerRecord) -> list[tuple[int, str, str]]:
    """(rank, document id, text) of the record's gold documents."""
    return _with_ids(record.gold_doc_ids, record.gold_docs)


@dataclass
class PooledPassage:
    passage_id: str
    text: str
    #: the best (lowest) rank a cell's generator saw it at (1 = first)
    best_rank: int
    #: the cells whose records had it in their top `depth`, in cell order
    cells: list[str] = field(default_factory=list)
    #: UMBRELA's 0-3 grade; None when unreadable, or for gold documents (not graded)
    grade: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"passage_id": self.passage_id, "grade": self.grade, "best_rank": self.best_rank,
                "cells": self.cells, "text": self.text}


@dataclass
class PoolTopic:
    """One topic's pool: the passages its nuggets may come from."""

    qid: str
    query: str
    #: "pooled" (the cells' passages, graded) or "gold_docs" (the dataset's relevant documents, not graded)
    source: str
    passages: list[PooledPassage] = field(default_factory=list)
    #: gold documents: the creation input exactly as a run's nugget judge builds it (so the same nugget cache entry)
    gold_topic: Topic | None = None

    def relevant(self, threshold: int) -> list[PooledPassage]:
        """What nuggets are made from: gold documents, else the passages graded at least `threshold`."""
        if self.source == "gold_docs":
            return list(self.passages)
        return [p for p in self.passages if p.grade is not None and p.grade >= threshold]

    def topic(self, threshold: int) -> Topic:
        if self.gold_topic is not None:
            return self.gold_topic
        return Topic(self.qid, self.query, [p.text for p in self.relevant(threshold)], "pooled")


def pool_topics(cells: Sequence[tuple[str, Sequence[AnswerRecord]]], depth: int = 10) -> list[PoolTopic]:
    """One pool per topic over `cells` ((name, records), in cell order); topics in order of first appearance.

    A pool holds each cell's top `depth` passages once per passage id, best rank first, then cell order (the first
    text seen for an id is kept). A topic where some record has gold documents gets those (the first such cell's;
    a warning names topics whose cells disagree), the same for every cell.
    """
    if depth < 1:
        raise ConfigError(f"pool.depth={depth}: must be at least 1")
    order = {name: index for index, (name, _records) in enumerate(cells)}
    by_topic: dict[str, list[tuple[int, str, AnswerRecord]]] = {}
    for index, (name, records) in enumerate(cells):
        for record in records:
            by_topic.setdefault(record.id, []).append((index, name, record))
    out: list[PoolTopic] = []
    for qid, entries in by_topic.items():
        with_gold = [(name, record) for _i, name, record in entries if record.gold_texts()]
        if with_gold:
            name, first = with_gold[0]
            differ = [n for n, r in with_gold if r.gold_texts() != first.gold_texts()]
            if differ:
                log.warning("topic %s: gold documents differ between cells (%s); using %s's", qid,
                            ", ".join(differ), name)
            cells_with = [n for n, _r in with_gold]
            passages = [PooledPassage(pid, text, rank, list(cells_with)) for rank, pid, text in record_gold(first)]
            out.append(PoolTopic(qid, first.question, "gold_docs", passages, gold_topic=topic_from_record(first)))
            continue
        ranked = sorted(((rank, index, name, pid, text) for index, name, record in entries
                         for rank, pid, text in record_passages(record, depth)), key=lambda e: (e[0], e[1]))
        pool: dict[str, PooledPassage] = {}
        for rank, _index, name, pid, text in ranked:
            if pid not in pool:
                pool[pid] = PooledPassage(pid, text, rank, [name])
            elif name not in pool[pid].cells:
                pool[pid].cells.append(name)
        for passage in pool.values():  # cells in cell order, whatever rank each saw it at
            passage.cells.sort(key=order.__getitem__)
        out.append(PoolTopic(qid, entries[0][2].question, "pooled", list(pool.values())))
    return out


# -- grading, creation, files ---------------------------------------------------------------------------------
@dataclass
class PoolResult:
    topics: list[PoolTopic]
    #: usable topics' nuggets, in topic order
    sets: list[TopicNuggets]
    #: topic -> the identity of its nuggets (`TopicNuggets.identity`, what the judges record per answer)
    hashes: dict[str, str]
    #: the hash of the whole set (every topic's hash)
    nugget_set: str
    #: topics without any passage graded at or above the threshold: no nuggets, not scored
    no_relevant: list[str]
    #: topics whose nuggets could not be created (the LLM's replies stayed unreadable)
    create_failed: list[str]
    unreadable_grades: int
    cached_grades: int
    files: dict[str, Path] = field(default_factory=dict)


def _names(qids: Sequence[str], limit: int = 5) -> str:
    return ", ".join(qids[:limit]) + (f" and {len(qids) - limit} more" if len(qids) > limit else "")


class NuggetPool:
    """A sweep's one nugget set per topic: pool the cells' passages, grade them, create nuggets, write the files."""

    def __init__(self, grader: UmbrelaGrader, nuggetizer: AutoNuggetizer, depth: int = 10, threshold: int = RELATED):
        if threshold not in GRADES or isinstance(threshold, bool):
            raise ConfigError(f"pool.threshold={threshold!r}: one of UMBRELA's grades {list(GRADES)} (1 = related, "
                              f"AutoNuggetizer's choice)")
        if nuggetizer.external is not None:
            raise ConfigError("the pool creates the nuggets: leave the nugget judge's nugget_file unset")
        self.grader = grader
        self.nuggetizer = nuggetizer
        self.depth = depth
        self.threshold = threshold

    def build(self, engine: LLMEngine, cells: Sequence[tuple[str, Sequence[AnswerRecord]]],
              out_dir: str | Path) -> PoolResult:
        """Pool, grade (one batch), create (batched over topics), and write the three files to `out_dir`."""
        topics = pool_topics(cells, self.depth)
        graded = [p for t in topics if t.source == "pooled" for p in t.passages]
        grades = self.grader.grade(engine, [GradeItem(t.qid, t.query, p.passage_id, p.text)
                                            for t in topics if t.source == "pooled" for p in t.passages])
        for passage, grade in zip(graded, grades):
            passage.grade = grade.grade
        unreadable = sum(1 for g in grades if g.grade is None)
        if unreadable:
            log.warning("umbrela: %d of %d grades unreadable after the re-asks; those passages count as below the "
                        "threshold", unreadable, len(grades))
        usable = [t for t in topics if t.relevant(self.threshold)]
        no_relevant = [t.qid for t in topics if not t.relevant(self.threshold)]
        if no_relevant:
            log.warning("%d of %d topics have no passage graded >= %d: no nuggets, their answers are not scored "
                        "(%s)", len(no_relevant), len(topics), self.threshold, _names(no_relevant))
        created = self.nuggetizer.create(engine, [t.topic(self.threshold) for t in usable]) if usable else []
        sets = [s for s in created if s.failure is None]
        create_failed = [s.qid for s in created if s.failure is not None]
        if create_failed:
            log.warning("%d topics got no nuggets (creation failed): not scored (%s)", len(create_failed),
                        _names(create_failed))
        hashes = {s.qid: s.identity for s in sets}
        result = PoolResult(topics, sets, hashes, identity_of(hashes), no_relevant,
                            create_failed, unreadable, sum(1 for g in grades if g.cached))
        result.files = self.write(result, Path(out_dir), engine.model, [name for name, _r in cells])
        return result

    def write(self, result: PoolResult, out_dir: Path, model: str, cells: Sequence[str]) -> dict[str, Path]:
        files = {"pool": out_dir / POOL_FILE, "create": out_dir / CREATE_FILE, "sets": out_dir / SETS_FILE}
        rows = []
        for topic in result.topics:
            status = ("no_relevant" if topic.qid in result.no_relevant else
                      "create_failed" if topic.qid in result.create_failed else "ok")
            rows.append({"qid": topic.qid, "query": topic.query, "source": topic.source, "threshold": self.threshold,
                         "status": status, "nugget_set": result.hashes.get(topic.qid),
                         "n_passages": len(topic.passages), "n_relevant": len(topic.relevant(self.threshold)),
                         "passages": [p.to_json() for p in topic.passages]})
        atomic_write_jsonl(files["pool"], rows)
        atomic_write_jsonl(files["create"], [s.record() for s in result.sets])
        atomic_write_json(files["sets"], {
            "nugget_set": result.nugget_set, "topics": result.hashes, "depth": self.depth,
            "threshold": self.threshold, "model": model, "cells": list(cells), "n_topics": len(result.topics),
            "n_with_nuggets": len(result.sets), "no_relevant": result.no_relevant,
            "create_failed": result.create_failed, "unreadable_grades": result.unreadable_grades})
        return files


# -- the command ----------------------------------------------------------------------------------------------
def complete_cells(sweep: SweepFolder) -> list[Cell]:
    """The finished cells (with metrics.json); a finished cell without answers is an error naming it."""
    done = [c for c in sweep.cells if c.complete]
    if not done:
        raise MissingDataError(f"sweep_dir={sweep.dir}: no complete cell (a finished cell has metrics.json); pool "
                               f"after the sweep's cells have finished")
    for cell in done:
        if not cell.run.has_answers:
            raise MissingDataError(f"{cell.dir}: the cell has metrics.json but no answers.jsonl; rerun it or move it "
                                   f"out of the sweep folder")
    waiting = [c.name for c in sweep.cells if not c.complete]
    if waiting:
        log.warning("%d of %d cells are not complete (%s): pooled over the %d complete ones; pool again once they "
                    "finish", len(waiting), len(sweep.cells), _names(waiting, 3), len(done))
    return done


def _judge_class(node: Mapping[str, Any]) -> type | None:
    from hydra.utils import get_class

    try:
        cls = get_class(str(node.get("_target_")))
    except Exception:  # noqa: BLE001 - build_judge reports a bad target in one line
        return None
    return cls if isinstance(cls, type) else None


def _uses_nuggets(node: Any) -> bool:
    cls = _judge_class(node) if isinstance(node, Mapping) else None
    return bool(cls is not None and getattr(cls, "uses_nuggets", False))


def _fit_node(key: str, node: Mapping[str, Any]) -> dict[str, Any]:
    """A judge node a cell saved, with settings its class no longer takes left out and named (a cell judged
    before the nugget settings moved to `judge.nuggetizer` kept copies of them in its judges' nodes)."""
    import inspect

    cls = _judge_class(node)
    params = inspect.signature(cls.__init__).parameters if cls is not None else {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(node)
    dropped = [k for k in node if k not in params and k != "_target_"]
    if dropped:
        log.warning("judge.%s (as the cells saved it): %s left out; nugget settings come from judge.%s", key,
                    ", ".join(dropped), NUGGETIZER)
    return {k: v for k, v in node.items() if k not in dropped}


def nugget_judges(cfg: DictConfig, cells: Sequence[Cell]) -> dict[str, dict[str, Any]]:
    """Every nugget-based judge to re-score (`uses_nuggets`: nuggets, ARGUE, Crucible, ...): those the cells ran
    (their saved configs), then any composed here (`judge=[...]`, whose node wins for the same key). Key -> node."""
    nodes: dict[str, dict[str, Any]] = {}
    for cell in cells:
        saved = cell.run.saved_config.get("judge") or {}
        for key, node in saved.items() if isinstance(saved, Mapping) else ():
            if key not in SETTINGS and key not in nodes and _uses_nuggets(node):
                nodes[key] = _fit_node(key, node)
    for key, node in judge_nodes(cfg.judge).items():
        if _uses_nuggets(node):
            nodes[key] = dict(node)
    if not nodes:
        raise ConfigError("judge: no nugget-based judge in the cells' configs nor composed here (e.g. "
                          "judge=[nuggets,argue,crucible]); nothing to re-score against the pooled nuggets")
    llm = OmegaConf.to_container(cfg.judge.llm, resolve=True) if cfg.judge.get("llm") is not None else None
    for key, node in nodes.items():
        node["llm"] = llm  # the pool's judges' engine, as for creation (the cells' own: `rescore_engine_check`)
        build_judge(key, node)  # a node that cannot be built fails here, before any LLM work
    return nodes


@dataclass
class PoolOutcome:
    sweep: Path
    pool: PoolResult
    #: cell name -> its merged metrics after the re-score
    rescored: dict[str, dict[str, Any]]
    summary: Any = None
    #: the nugget-based judges re-scored in every cell
    judges: list[str] = field(default_factory=list)
    #: what the re-score changed that the cells did not choose (the judge's engine, `pool.rescore_llm=pool`)
    warnings: list[str] = field(default_factory=list)


def warn_if_settings_differ(cfg: DictConfig, cells: Sequence[Cell]) -> None:
    """The pool creates nuggets with the `judge.nuggetizer` node composed here; say so when the cells' judges used
    other settings (gold-document topics then get other nuggets than the cells made)."""
    saved = next((c.run.saved_config.get("judge", {}).get(NUGGETIZER) for c in cells
                  if isinstance(c.run.saved_config.get("judge"), Mapping)
                  and isinstance(c.run.saved_config["judge"].get(NUGGETIZER), Mapping)), None)
    if saved is None:
        return
    here = OmegaConf.to_container(cfg.judge[NUGGETIZER], resolve=True)
    differ = sorted(k for k in set(saved) | set(here) if k not in ("llm", "nugget_file") and saved.get(k) != here.get(k))
    if differ:
        log.warning("judge.%s here differs from the cells' in %s: the pooled nuggets are made with the settings "
                    "given here (set judge.%s.<key>=... to match)", NUGGETIZER, ", ".join(differ), NUGGETIZER)


#: `pool.rescore_llm`: "match" (the pool's judge engine must be the one the cells' judges used) or "pool" (re-score
#: every cell with the pool's judge engine, said in a warning)
RESCORE_LLM = ("match", "pool")


def _engine_identity(engines: EngineFactory, llm: Any) -> tuple[str, Any]:
    """An engine config's display name and identity (`LLMEngine.identity`: model by content, backend settings);
    the config itself where no engine can be built from it (a cell's engine class that is gone)."""
    try:
        engine = engines.get(llm)
        return engine.model, engine.identity()
    except Exception:  # noqa: BLE001 - compared as configs: a config that cannot be built is another engine
        name = llm.get("model") or llm.get("model_name") or llm.get("_target_") if isinstance(llm, Mapping) else llm
        return str(name), llm


def rescore_engine_check(cfg: DictConfig, cells: Sequence[Cell], judges: Mapping[str, Any],
                         engines: EngineFactory) -> str | None:
    """The pool re-scores the cells' nugget judges with its own judge engine (`judge.llm`); where a cell's judge
    used another engine (compared by identity, not display name) its values would silently change judge. Refused
    in one line, unless `pool.rescore_llm=pool` allows it: then the one-line warning is returned (None: same)."""
    allow = str(OmegaConf.select(cfg, "pool.rescore_llm", default="match"))
    if allow not in RESCORE_LLM:
        raise ConfigError(f"pool.rescore_llm={allow!r}: one of {list(RESCORE_LLM)} (match: the cells' judge engine "
                          f"only; pool: re-score every cell with the pool's judge.llm)")
    here = OmegaConf.to_container(cfg.judge.llm, resolve=True) if cfg.judge.get("llm") is not None else None
    if here is None:
        return None
    differ: list[tuple[str, str, str]] = []
    pool_name, pool_identity = _engine_identity(engines, here)
    for cell in cells:
        saved = cell.run.saved_config.get("judge") or {}
        for key in judges:
            node = saved.get(key) if isinstance(saved, Mapping) else None
            used = node.get("llm") if isinstance(node, Mapping) else None
            if isinstance(used, Mapping) and llm_key(used) != llm_key(here):
                name, identity = _engine_identity(engines, used)
                if identity != pool_identity:
                    differ.append((cell.name, key, name))
    if not differ:
        return None
    cell_name, key, name = differ[0]
    others = f" (and {len(differ) - 1} more cell judges)" if len(differ) > 1 else ""
    what = (f"eval.pool re-scores with judge.llm={pool_name}, but cell {cell_name}'s judge.{key} used {name}"
            f"{others}, another engine (compared by identity, not display name)")
    if allow == "pool":
        return f"{what}: every cell's nugget judges re-scored with the pool's engine (pool.rescore_llm=pool)"
    raise ConfigError(f"{what}: set judge.llm to the cells' judge engine (e.g. +llm@judge.llm=<conf/llm name>), or "
                      f"pool.rescore_llm=pool to re-score every cell with the pool's")


def pool_sweep(cfg: DictConfig, factory: EngineFactory | None = None) -> PoolOutcome:
    """Pool, grade and create as `cfg` says, re-score every nugget-based judge of every complete cell against the
    pooled set, summarize."""
    sweep = load_sweep(Path(str(cfg.sweep_dir)).expanduser())
    cells = complete_cells(sweep)
    cfg = complete_from_run(cfg, cells[0].dir)  # llm, seed, dataset: the first complete cell's unless given
    cache_dir = run_cache_dir(cfg, cells[0].dir)
    judges = nugget_judges(cfg, cells)
    warn_if_settings_differ(cfg, cells)
    nuggetizer = build_nuggetizer(cfg.judge, list(judges))
    if not isinstance(nuggetizer, AutoNuggetizer):
        raise ConfigError(f"judge.{NUGGETIZER}._target_: the pool creates nuggets with eval.nuggets.AutoNuggetizer")
    if nuggetizer.nugget_file:
        raise ConfigError(f"the pool creates the nuggets: leave judge.{NUGGETIZER}.nugget_file unset")
    nuggetizer.cache_dir = cache_dir
    pool = NuggetPool(build_grader(cfg.umbrela, cache_dir), nuggetizer, depth=int(cfg.pool.depth),
                      threshold=cfg.pool.threshold)
    records = [(cell.name, cell.run.records()) for cell in cells]
    own = factory is None
    engines = factory or EngineFactory(cache_dir, cache_enabled=bool(OmegaConf.select(cfg, "cache.llm_responses",
                                                                                       default=True)))
    rescored: dict[str, dict[str, Any]] = {}
    try:
        warning = rescore_engine_check(cfg, cells, judges, engines)  # before any LLM work
        if warning:
            log.warning("%s", warning)
        result = pool.build(engines.get(nuggetizer.llm or cfg.judge.llm), records, sweep.dir / POOL_DIR)
        if not result.sets:
            raise DataError(f"{sweep.dir}: no topic got nuggets ({len(result.no_relevant)} of {len(result.topics)} "
                            f"have no passage graded >= {pool.threshold}, {len(result.create_failed)} failed "
                            f"creation); nothing to score against: try pool.threshold or pool.depth")
        for cell in cells:
            cell_cfg = copy.deepcopy(cfg)
            with open_dict(cell_cfg):
                cell_cfg.run_dir, cell_cfg.out_dir, cell_cfg.cache_dir = str(cell.dir), None, str(cache_dir)
                shared = OmegaConf.to_container(cfg.judge, resolve=True)
                cell_cfg.judge = {**{k: shared[k] for k in ("llm", "release_generator", "report") if k in shared},
                                  NUGGETIZER: {**shared[NUGGETIZER], "nugget_file": str(result.files["create"])},
                                  **judges}
            log.info("re-scoring %s against the pooled nuggets: %s", cell.name, ", ".join(judges))
            rescored[cell.name] = rejudge(cell_cfg, engines)
    finally:
        if own:
            engines.close()
    from eval.summary import summarize

    summary_cfg = cfg.get("summary") or {}
    summary = summarize(sweep.dir, wandb=bool(summary_cfg.get("wandb", False)),
                        n_boot=int(summary_cfg.get("bootstrap", 200)),
                        agreement_reference=str(summary_cfg.get("agreement_reference", "auto")))
    return PoolOutcome(sweep.dir, result, rescored, summary, list(judges), [warning] if warning else [])


def describe(outcome: PoolOutcome) -> str:
    """What the command did, in a few lines for the terminal."""
    pool = outcome.pool
    lines = [f"WARNING: {w}" for w in outcome.warnings]
    lines += [f"{outcome.sweep}: {len(pool.topics)} topics pooled, {len(pool.sets)} with nuggets (nugget set "
              f"{pool.nugget_set}); {len(pool.no_relevant)} without a passage at or above the threshold, "
              f"{len(pool.create_failed)} failed creation, {pool.unreadable_grades} grades unreadable",
              f"re-scored {len(outcome.rescored)} cells ({', '.join(outcome.judges)}): " + json.dumps(
                  {name: {k: v for k, v in m.items() if k in SHOWN} for name, m in outcome.rescored.items()},
                  default=str),
              "files: " + ", ".join(str(p) for p in pool.files.values())]
    files: Mapping[str, Path] = getattr(outcome.summary, "files", {}) or {}
    if files.get("markdown"):
        lines.append(f"summary: {files['markdown']}")
    return "\n".join(lines)


@hydra.main(version_base="1.3", config_path="../conf", config_name="pool")
def main(cfg: DictConfig) -> None:
    try:
        outcome = pool_sweep(cfg)
    except (ConfigError, DataError, MissingDataError, ServiceError, FileNotFoundError) as err:
        log.error("%s: %s", type(err).__name__, err)
        raise SystemExit(2) from None
    print(describe(outcome), flush=True)


if __name__ == "__main__":
    from rag.core.entry import guard_command_line

    guard_command_line("pool")
    sys.argv[1:] = quote_folder_overrides(sys.argv[1:])  # sweep folders may contain `=` and `,`
    main()
