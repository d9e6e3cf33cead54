"""The run: dataset -> (query) -> retrieve -> rerank -> order -> generate -> records -> metrics, for one config.

Every stage is built from its YAML with Hydra's `instantiate`. Retrieval and reranking go through the stage
caches (`rag.stage_cache`), LLM calls through the engine's response cache, and answers are journalled chunk by
chunk so a killed run resumes where it stopped. Final outputs are written atomically.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from statistics import mean
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from rag.attack.base import CorpusAttack
from rag.attack.corpus import AttackedCorpus
from rag.core.errors import ConfigError
from rag.core.hashing import stable_hash
from rag.core.io import atomic_write_json
from rag.core.secrets import redact
from rag.data.dataset import Dataset
from rag.folders import RunFolder
from rag.generate.base import GenerationContext, GenerationInput, Generator, cap_context_words
from rag.judge.run import evaluate_records, judge_nodes
from rag.llm.base import LLMEngine
from rag.llm.factory import EngineFactory, build_engine, llm_key
from rag.metrics.base import AnswerMetric, RecordMetric, RunShape, ScoredAnswer, build_metrics
from rag.metrics.registry import REGISTRY
from rag.metrics.retrieval import cutoff_metrics, recall_at_cutoffs
from rag.order.ordering import Ordering
from rag.preflight.attack import add_attack_metrics, check_attack_reaches_index
from rag.query.base import QuerySet, QueryWriter
from rag.records import (
    AnswerRecord,
    GenerationResult,
    Question,
    ScoredPassage,
    build_answer_record,
)
from rag.rerank.base import Reranker
from rag.retrieve.base import Retriever
from rag.retrieve.fusion import FusionRetriever, alternate_merge
from rag.retrieve.hybrid import reciprocal_rank_fusion
from rag.reuse import LOADED
from rag.stage_cache import StageCache

log = logging.getLogger(__name__)


class Timer:
    """Wall time per stage, accumulated (stages may run in several chunks)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - start


def _abs(path: str | None) -> str | None:
    return None if path is None else str(Path(path).expanduser().resolve())


class Pipeline:
    """One configured run. Build with `Pipeline(cfg)`, run with `.run(run_dir)`; `answer` is one batch of it.

    `engine`: an engine already loaded from an equal `llm` config (the live day's cheaper rungs share one); the
    caller keeps owning it.
    """

    def __init__(self, cfg: DictConfig, engine: LLMEngine | None = None):
        check_attack_reaches_index(cfg)  # the preflight's refusal, should a caller have skipped it
        self.cfg = cfg
        self.data_dir = _abs(cfg.paths.data_dir)
        self.cache_dir = Path(_abs(cfg.paths.cache_dir))
        OmegaConf.update(cfg, "paths.data_dir", self.data_dir, force_add=True)
        self.reuse = _reuse_loaded(cfg)
        self.dataset: Dataset = instantiate(cfg.dataset)
        # in-process sweep cells share loaded corpora, indexes, rerankers and engines (rag/reuse.py)
        self.dataset.corpus, _ = self._shared("corpus", cfg.dataset.corpus, lambda: self.dataset.corpus)
        #: the corpus attack (`attack=poisonedrag | prompt_injection`): its passages join the corpus before indexing
        self.attack: CorpusAttack | None = None
        if cfg.get("attack"):
            self.attack = instantiate(cfg.attack, llm=None)
            self.dataset.corpus = AttackedCorpus(self.dataset.corpus, self.attack, lambda: self.dataset.questions,
                                                 self._attacker_engine, self.cache_dir, self.dataset.name)
        self.retriever: Retriever
        # an attacked corpus depends on the attack and on the questions it targets
        attacked = (cfg.attack, cfg.dataset) if cfg.get("attack") else ()
        self.retriever, reused = self._shared("retriever", cfg.retriever, lambda: instantiate(cfg.retriever),
                                              cfg.dataset.corpus, *attacked)
        self._index_ready = reused and self.retriever.corpus is not None  # a kept index is already loaded
        #: the one engine factory: generator, LLM reranker (Rank-R1) and judges share equal engines
        self.engines = EngineFactory(self.cache_dir, cache_enabled=cfg.cache.llm_responses)
        self._engine: LLMEngine | None = engine
        if engine is not None:
            self.engines.adopt(cfg.llm, engine)  # used, never closed, by this run
        #: loads each part had before this run (the `engine` property sets the LLM's when it builds it)
        self._loads_before: dict[str, int] = {"llm": _model_loads(engine)}
        rerank_llm = cfg.rerank.get("llm") if isinstance(cfg.rerank, DictConfig) else None
        self.reranker: Reranker
        self.reranker, _ = self._shared(
            "rerank", cfg.rerank, lambda: (instantiate(cfg.rerank, llm=self._stage_engine(rerank_llm)) if rerank_llm
                                           else instantiate(cfg.rerank)), cfg.cache.llm_responses)
        self.ordering: Ordering = instantiate(cfg.ordering)
        #: the query stage (`query=hyde | rewrite | decompose | preqrag`); None searches each question as asked
        self.query_writer: QueryWriter | None = instantiate(cfg.query) if cfg.get("query") else None
        #: each ranked question's query set, until its answer record takes it
        self._query_sets: dict[str, QuerySet] = {}
        self.generator: Generator = instantiate(cfg.generator)
        self.stage_cache = StageCache(self.cache_dir, enabled=cfg.cache.stages)
        self.timer = Timer()
        self.rerank_stats: dict[str, float] = {}
        self._loads_before.update({"retriever": _model_loads(self.retriever), "rerank": _model_loads(self.reranker)})
        #: the per-answer metrics the `metrics` group composed (F1, EM, gold recall by default)
        add_attack_metrics(cfg)  # an attacked run measures its attack (`rag.main.run` has added them already)
        self.answer_metrics: list[AnswerMetric] = build_metrics(cfg.get("metrics"))
        #: recall cutoffs reported after retrieval and rerank (metrics.recall_at), from one deep retrieval
        self.recall_at = sorted({int(k) for k in (cfg.get("metrics") or {}).get("recall_at") or []})
        self._cutoff_scores: dict[str, dict[str, float]] = {}
        #: ranked lists made ahead of generation (generation.release_reranker), by question id
        self._ranked: dict[str, tuple[list[ScoredPassage], list[ScoredPassage]]] = {}
        #: engines closed for another to load during generation (generation.release_reranker)
        self.engines_released = 0
        if self.generator.uses_llm:
            _ = self.engine  # fail fast on a bad llm config (a missing model file) before any index is built
            self.generator.check_engine(self.engine)  # e.g. Crucible needs log-probabilities
        elif _has_judges(cfg):
            raise ConfigError("judges need answers, but generator=none writes none; "
                              "use judge=none for a retrieval-only run")

    @property
    def engine(self) -> LLMEngine:
        """The generator's engine (from the factory, so an equal judge or reranker config shares it)."""
        if self._engine is None:
            self._engine, reused = self._shared("llm", self.cfg.llm, lambda: self._engine_for(self.cfg.llm),
                                                self.cfg.cache.llm_responses)
            if reused:  # per-run accounting starts from zero
                self._engine.usage = type(self._engine.usage)()
                if hasattr(self._engine, "cost_usd"):
                    self._engine.cost_usd = 0.0
                self.engines.adopt(self.cfg.llm, self._engine)
            self._loads_before["llm"] = 0 if not reused else _model_loads(self._engine)
        return self._engine

    def _stage_engine(self, llm_cfg: Any) -> LLMEngine:
        """A stage's engine (an LLM reranker's `rerank.llm`): the generator's own when the configs are equal (GRAG's
        relevance model is its generator: one load, and its calls count in the run's LLM usage), else its own."""
        if llm_key(llm_cfg) == llm_key(self.cfg.llm):
            return self.engine
        return self._engine_for(llm_cfg)

    def _attacker_engine(self) -> LLMEngine | None:
        """The attack's engine (`attack.llm`): the generator's own when the configs are equal, else its own."""
        attack_llm = self.cfg.attack.get("llm")
        if not attack_llm:
            return None
        if self.generator.uses_llm and llm_key(attack_llm) == llm_key(self.cfg.llm):
            return self.engine
        return self._engine_for(attack_llm)

    def _engine_for(self, llm_cfg: Any) -> LLMEngine:
        """An engine from the run's factory; one kept for later sweep cells is adopted, not owned, so the
        factory's `close()` leaves it loaded for the next cell."""
        if not self.reuse:
            return self.engines.get(llm_cfg)
        engine = build_engine(llm_cfg, self.engines.cache)
        self.engines.adopt(llm_cfg, engine)
        return engine

    def _shared(self, slot: str, node: Any, build: Any, *extra: Any) -> tuple[Any, bool]:
        """Build a component, or take the one an earlier cell of this process built from the same config."""
        if not self.reuse:
            return build(), False
        return LOADED.get(slot, LOADED.key(node, self.cache_dir, *extra), build)

    def model_loads(self) -> int:
        """Model weights loaded by this run (LLM and embedders); 0 for every component reused from a
        previous sweep cell."""
        parts = {"llm": self._engine, "retriever": self.retriever, "rerank": self.reranker}
        seen: set[int] = set()  # an engine shared by the generator and an LLM reranker counts once
        return sum(max(0, _model_loads(part, seen) - self._loads_before.get(slot, 0)) for slot, part in parts.items()
                   if part is not None)

    @property
    def depth(self) -> int:
        """Retrieval depth shared by sweep cells: the largest k any cell needs (at most the corpus)."""
        depth = max(self.retriever.k, int(self.cfg.cache.retrieval_depth or 0), *self.recall_at)
        capacity = self.retriever.capacity() if self._index_ready else None
        return min(depth, capacity) if capacity else depth

    # -- stages -----------------------------------------------------------------------------------------------
    def rank(self, questions: list[Question]) -> tuple[list[list[ScoredPassage]], list[list[ScoredPassage]]]:
        """Retrieved top-k lists and reranked, cut lists for `questions` (those ranked ahead are taken as they are)."""
        if questions and all(q.id in self._ranked for q in questions):
            ahead = [self._ranked.pop(q.id) for q in questions]
            return [a[0] for a in ahead], [a[1] for a in ahead]
        corpus = self.dataset.corpus
        self.prepare_index()
        qids, texts = [q.id for q in questions], [q.question for q in questions]
        name = self.stage_cache.retrieval_name(self.retriever, corpus.key, self.dataset.key, self.depth)
        groups: list[dict[int, list[ScoredPassage]]] = []
        if self.query_writer is None:
            with self.timer.stage("retrieve"):
                deep = self.stage_cache.retrieve(self.retriever, corpus.key, self.dataset.key, qids, texts,
                                                 self.depth)
        else:
            with self.timer.stage("query"):
                sets = self.write_queries(questions)
            with self.timer.stage("retrieve"):
                deep, groups = self.retrieve_query_sets(sets, self.depth)
            name = f"{name}__q-{self.query_key}"
        retrieved = [r[: self.retriever.k] for r in deep]
        with self.timer.stage("rerank"):
            reranked = self.stage_cache.rerank(self.reranker, f"{name}__k{self.retriever.k}", self.retriever,
                                               qids, texts, retrieved)
            selected: set[int] = set()
            if groups and getattr(self.query_writer, "per_group_k", None):
                reranked, selected = self._select_per_group(questions, name, groups, reranked)
        if self.recall_at:  # recall at every cutoff, from the deep list and the uncut reranked list
            for q, deep_list, reranked_list in zip(questions, deep, reranked):
                self._cutoff_scores[q.id] = {
                    **recall_at_cutoffs(q.gold_doc_ids, [p.passage.doc_id for p in deep_list], self.recall_at,
                                        "retrieval"),
                    **recall_at_cutoffs(q.gold_doc_ids, [p.passage.doc_id for p in reranked_list],
                                        [k for k in self.recall_at if k <= self.retriever.k], "rerank")}
        for key, value in (getattr(self.reranker, "stats", None) or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.rerank_stats[key] = self.rerank_stats.get(key, 0) + value
        if getattr(self.reranker, "stats", None):
            self.reranker.stats = {}
        # a decomposed question's interleaved selection is its context as it is; the others are cut to rerank.k
        # (and to the writer's `single_k`, PreQRAG's 5), then every context to generation.max_context_words
        cap = self.cfg.generation.get("max_context_words")
        single_k = getattr(self.query_writer, "single_k", None)
        return retrieved, [cap_context_words(r if i in selected else self.reranker.cut(r)[:single_k or None], cap)
                           for i, r in enumerate(reranked)]

    # -- the query stage ----------------------------------------------------------------------------------------
    @property
    def query_key(self) -> str:
        """Names the query stage's output: the writer's settings and prompts, and the engine that wrote them."""
        writer = self.query_writer
        engine = stable_hash(self.engine.identity(), 10) if writer is not None and writer.uses_llm else "rules"
        return f"{writer.key}-{engine}" if writer is not None else "none"

    def write_queries(self, questions: list[Question]) -> list[QuerySet]:
        """Each question's queries (the writer batches its LLM steps; the engine's response cache makes a rerun
        free); kept for the answer records."""
        writer = self.query_writer
        engine = self.engine if writer.uses_llm else None
        sets = writer.write(questions, engine)
        if len(sets) != len(questions):
            raise RuntimeError(f"query={writer.name} returned {len(sets)} query sets for {len(questions)} questions")
        self._query_sets.update({q.id: s for q, s in zip(questions, sets)})
        return sets

    def retrieve_query_sets(self, sets: list[QuerySet], depth: int
                            ) -> tuple[list[list[ScoredPassage]], list[dict[int, list[ScoredPassage]]]]:
        """Search every query with the sources it names, each (source, query) through the stage cache on its own,
        and fuse each question's lists: the whole set's, and each group's (sub-question's) apart.

        A fusion retriever routes by `Query.source` and fuses its way; a single retriever searches every query
        and fuses by reciprocal rank fusion (rrf_k 60)."""
        fusion = self.retriever if isinstance(self.retriever, FusionRetriever) else None
        sources: dict[str, Retriever] = fusion.sources if fusion else {self.retriever.kind: self.retriever}
        source_depth = fusion.source_depth(depth) if fusion else depth
        plans: list[list[tuple[int, str, str]]] = []
        wanted: dict[str, dict[str, None]] = {name: {} for name in sources}
        for query_set in sets:
            plan = []
            for query in query_set.queries:
                for name in (fusion.routes(query.source) if fusion else list(sources)):
                    wanted[name][query.text] = None
                    plan.append((query.group, name, query.text))
            plans.append(plan)
        found: dict[tuple[str, str], list[ScoredPassage]] = {}
        for name, texts in wanted.items():
            if texts:
                lists = self.stage_cache.retrieve_queries(sources[name], self.dataset.corpus.key, list(texts),
                                                          source_depth)
                found.update({(name, text): ranked for text, ranked in zip(texts, lists)})

        def fuse(lists: list[list[ScoredPassage]]) -> list[ScoredPassage]:
            return fusion.fuse(lists, depth) if fusion else reciprocal_rank_fusion(lists)[:depth]

        deep = [fuse([found[(name, text)] for _, name, text in plan]) for plan in plans]
        groups = [{g: fuse([found[(name, text)] for group, name, text in plan if group == g])
                   for g in sorted({group for group, _, _ in plan})} for plan in plans]
        return deep, groups

    def _select_per_group(self, questions: list[Question], name: str, groups: list[dict[int, list[ScoredPassage]]],
                          reranked: list[list[ScoredPassage]]) -> tuple[list[list[ScoredPassage]], set[int]]:
        """PreQRAG's context for a decomposed question: each sub-question's candidates reranked against the question
        (as PreQRAG's `handle_multidoc` does; batched across questions, cached like any rerank), the top `per_group_k`
        of each kept, and the
        sub-questions' lists interleaved without duplicates (not cut to rerank.k). Questions without sub-questions
        keep `reranked`; returns the lists and the positions of the questions selected per group."""
        per_group_k = int(self.query_writer.per_group_k)
        ids, texts, candidates, owners = [], [], [], []
        for i, (question, by_group) in enumerate(zip(questions, groups)):
            subs = self._query_sets[question.id].groups
            for g in range(1, len(subs) + 1):
                if by_group.get(g):
                    ids.append(f"{question.id}#g{g}")
                    texts.append(question.question)
                    candidates.append(by_group[g][: self.retriever.k])
                    owners.append(i)
        if not ids:
            return reranked, set()
        ranked = self.stage_cache.rerank(self.reranker, f"{name}__groups__k{self.retriever.k}", self.retriever,
                                         ids, texts, candidates)
        lists: dict[int, list[list[ScoredPassage]]] = defaultdict(list)
        for owner, ranked_list in zip(owners, ranked):
            lists[owner].append(ranked_list[:per_group_k])
        return [alternate_merge(lists[i]) if i in lists else r for i, r in enumerate(reranked)], set(lists)

    def _takes_turns(self) -> bool:
        """generation.release_reranker with an LLM reranker whose engine is not the generator's."""
        rerank_llm = self.cfg.rerank.get("llm") if isinstance(self.cfg.rerank, DictConfig) else None
        if not rerank_llm or not bool(self.cfg.generation.get("release_reranker", False)):
            return False
        return not self.generator.uses_llm or llm_key(rerank_llm) != llm_key(self.cfg.llm)

    def rank_ahead(self, questions: list[Question]) -> None:
        """Rerank every question before any is generated, then close the reranker's engine, so an LLM reranker
        and the generator take turns on one GPU instead of holding it together (generation.release_reranker)."""
        retrieved, contexts = self.rank(questions)
        self._ranked.update({q.id: (r, c) for q, r, c in zip(questions, retrieved, contexts)})
        if self.engines.release_config(self.cfg.rerank.llm):
            self.engines_released += 1
            log.info("reranked %d questions ahead; the reranker's engine is closed before generation",
                     len(questions))

    def prepare_index(self) -> None:
        """Build or load the retriever's index once per run (not once per generation chunk)."""
        if not self._index_ready:
            with self.timer.stage("index"):
                self.retriever.prepare(self.dataset.corpus, self.cache_dir)
                self.reranker.prepare(self.cache_dir, self.retriever)  # dense rerank reads the index's vectors
            log.info("retriever %s; rerank %s", self.retriever.key, self.reranker.key)
            self._index_ready = True
            self._clamp_to_corpus()

    def _clamp_to_corpus(self) -> None:
        """k beyond the corpus retrieves the whole corpus: say so once and use the corpus size, so metric names
        and prompts say what was really done (`retriever.k=100000` over 28,082 passages ran silently before)."""
        capacity = self.retriever.capacity()
        if not capacity:
            return
        for name, stage in (("retriever.k", self.retriever), ("rerank.k", self.reranker)):
            if stage.k is not None and stage.k > capacity:
                log.warning("%s=%d is more than the %d passages of the corpus %s: using %d", name, stage.k,
                            capacity, self.dataset.corpus.key, capacity)
                stage.k = capacity

    def retrieve_adhoc(self, queries: list[str]) -> list[list[ScoredPassage]]:
        """Retrieve + rerank + cut for new queries (IterDRAG's sub-queries), with the run's own stages."""
        corpus = self.dataset.corpus
        deep = self.stage_cache.retrieve_queries(self.retriever, corpus.key, queries, self.depth)
        retrieved = [r[: self.retriever.k] for r in deep]
        reranked = retrieved if self.reranker.is_identity else self.reranker.rerank(queries, retrieved)
        if not self.reranker.is_identity:
            self.stage_cache.counters.rerank_calls += len(queries)
        return [self.reranker.cut(r) for r in reranked]

    def generate(self, questions: list[Question], contexts: list[list[ScoredPassage]]) -> list[GenerationResult]:
        ctx = GenerationContext(engine=self.engine if self.generator.uses_llm else None, retrieve=self.retrieve_adhoc, cache_dir=str(self.cache_dir),
                                data_dir=self.data_dir, evaluated=tuple(self.dataset.questions))
        items = [GenerationInput(q, self.ordering.order(c) if self.generator.uses_ordering else list(c))
                 for q, c in zip(questions, contexts)]
        with self.timer.stage("generate"):
            return self.generator.generate(items, ctx)

    # -- the run ----------------------------------------------------------------------------------------------
    def run(self, run_dir: str | Path) -> dict[str, Any]:
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        with self.timer.stage("load"):
            questions = self.dataset.questions
            coverage = self.dataset.gold_coverage()
        if isinstance(self.dataset.corpus, AttackedCorpus):  # what was planted, readable beside the answers
            atomic_write_json(run_dir / "attack.json", {
                "settings": self.dataset.corpus.attack.settings(), "n_passages": self.attack.n_passages,
                "corpus": self.dataset.corpus.key,
                "targets": [{"id": t.question_id, "question": t.question, "correct": t.correct,
                             "target_answer": t.target_answer, "planted": list(t.texts)}
                            for t in self.dataset.corpus.targets]})
        log.info("dataset %s: %d questions; retriever %s k=%d; rerank %s k=%s; ordering %s; generator %s",
                 self.dataset.name, len(questions), self.retriever.kind, self.retriever.k, self.reranker.kind,
                 self.reranker.k, self.ordering.name, self.generator.name)

        folder = RunFolder(run_dir)
        journal = folder.journal()
        done = {r.id: r for r in map(AnswerRecord.from_json, journal.read())}
        if folder.has_answers:
            done.update({r.id: r for r in folder.records()})
        retry = [i for i, r in done.items() if r.failure]  # failed answers are generated again
        for i in retry:
            del done[i]
        todo = [q for q in questions if q.id not in done]
        if retry:
            log.info("resuming: %d failed answers (%s) are generated again", len(retry),
                     ", ".join(sorted(retry)[:5]))
        if done:
            log.info("resuming: %d answers already written, %d to go", len(done), len(todo))

        if todo and self._takes_turns():
            self.rank_ahead(todo)
        chunk = max(1, int(self.cfg.generation.chunk_size))
        for offset in range(0, len(todo), chunk):
            rows = self.answer(todo[offset: offset + chunk])
            journal.append([row.to_json() for row in rows])
            done.update({row.id: row for row in rows})
        if not todo:  # still load the index so that timings are comparable between runs
            self.prepare_index()

        records = [done[q.id] for q in questions]
        for metric in self.answer_metrics:  # read from the stored records: every answer again, resumed ones too
            if isinstance(metric, RecordMetric):
                metric.rescore(records, self.dataset.qrels_level)
        metrics = self.metrics(records, coverage)
        if metrics["empty_answers"]:
            log.warning("%d of %d answers are empty (%d empty completions from %s after re-asking): scored as "
                        "they are (F1 0), marked failure=empty_answer, and generated again when this folder is "
                        "resumed", metrics["empty_answers"], len(records), metrics["llm_empty_completions"],
                        self._engine.model if self._engine is not None else "the generator")
        if self.cfg.get("judge"):
            with self.timer.stage("evaluate"):
                # judges come from the run's engine factory: one configured with the run's `llm` reuses it
                metrics.update(evaluate_records(self.cfg.judge, records, run_dir, self.cache_dir, self.engines))
        metrics.update({f"time/{k}_s": round(v, 3) for k, v in self.timer.seconds.items()})
        metrics["time/total_s"] = round(time.perf_counter() - start, 3)
        undeclared = REGISTRY.undeclared(metrics)
        if undeclared:
            log.warning("metrics not declared in rag/metrics/registry.py: %s", ", ".join(undeclared))

        # the stages' TREC run files and the judgments, so trec_eval, ranx or ir_measures read the folder
        folder.write_rankings(records, level=self.dataset.qrels_level)
        # a rerun's own counters (cache hits) go to work_history.jsonl; metrics.json keeps the measured work
        metrics = folder.record_work(metrics, answered=len(todo))
        folder.finish(records, metrics, redact(OmegaConf.to_container(self.cfg, resolve=True)))
        return metrics

    def answer(self, questions: list[Question], empty_fallback: Generator | None = None) -> list[AnswerRecord]:
        """Rank, generate and record one batch of questions: the body of `run`'s loop, also the live day's.

        An LLM generator's empty answer is marked `failure=empty_answer` (generated again on resume), or, with
        `empty_fallback`, answered again by that generator over the same passages, its record's `fallback`
        saying so (`empty_fallback_name`).
        """
        retrieved, contexts = self.rank(questions)
        results = self.generate(questions, contexts)
        rows = []
        for q, r, c, g in zip(questions, retrieved, contexts, results):
            replaced = empty_fallback is not None and not (g.answer or "").strip()
            if replaced:
                g = empty_fallback.generate([GenerationInput(q, list(c))], GenerationContext(engine=None))[0]
            row = self.record(q, r, c, g)
            query_set = self._query_sets.pop(q.id, None)
            if query_set is not None:
                row.queries = query_set.to_json()
            if replaced:
                row.fallback = empty_fallback_name(empty_fallback)
            if self.generator.uses_llm and not row.answer.strip():
                row.failure = "empty_answer"
            row.scores.update(self._cutoff_scores.pop(row.id, {}))  # recall at metrics.recall_at cutoffs
            rows.append(row)
        return rows

    def record(self, question: Question, retrieved: list[ScoredPassage], context: list[ScoredPassage],
               result: GenerationResult) -> AnswerRecord:
        """One answers.jsonl line: the LiveRAG submission fields, then ours (`rag.records.AnswerRecord`)."""
        used = result.passages if result.passages is not None else (
            self.ordering.order(context) if self.generator.uses_ordering else context)
        item = ScoredAnswer(question, result.answer, retrieved, context, from_llm=self.generator.uses_llm,
                            used=list(used))
        scores: dict[str, float] = {}
        for metric in self.answer_metrics:
            scores.update(metric.score(item))
        return build_answer_record(question, retrieved, context, used, result, self.generator.name, scores)

    def metrics(self, records: list[AnswerRecord], coverage: dict[str, int]) -> dict[str, Any]:
        """Run metrics, overall and split single-hop / multi-hop; every name is declared in the registry.

        LLM usage here is the generator's engine up to now (generation, and Rank-R1 when it shares the engine);
        evaluation adds its own `eval/...` counters later.
        """
        m: dict[str, Any] = {"n_questions": len(records), **coverage, "retrieval_depth": self.depth}
        splits = {"all": records, "single": [r for r in records if r.hop == "single"],
                  "multi": [r for r in records if r.hop == "multi"]}
        shape = RunShape(k_retrieval=self.retriever.k, k_rerank=self.reranker.k or self.retriever.k)
        names = {key: name for metric in self.answer_metrics for key, name in metric.run_metrics(shape).items()}
        for split, rows in splits.items():
            m[f"n_{split}"] = len(rows)
            for key, name in names.items():
                values = [r.scores[key] for r in rows if key in r.scores]
                if values:
                    m[f"{name}/{split}"] = round(mean(values), 6)
                elif split == "all" and rows:  # a configured metric with nothing to score: said, not silently absent
                    m[f"unscored/{name}"] = len(rows)
        # recall at every metrics.recall_at cutoff (issue 14): recall/<stage>@<k>[_any|_all]/<split>
        m.update(cutoff_metrics(splits))
        m["parse_failures"] = sum(r.parse_failed for r in records)
        m["empty_answers"] = sum(r.failure == "empty_answer" for r in records)
        usage = self._engine.usage if self._engine is not None else None
        counters = self.stage_cache.counters
        m["model_loads"] = self.model_loads()
        if self.engines_released:
            m["engines_released"] = self.engines_released
        m.update({"retrieval_calls": counters.retrieval_calls, "rerank_calls": counters.rerank_calls,
                  "retrieval_cache_hits": counters.retrieval_cache_hits,
                  "rerank_cache_hits": counters.rerank_cache_hits,
                  "llm_calls": usage.calls if usage else 0, "llm_retries": usage.retries if usage else 0,
                  "llm_empty_completions": usage.empty_completions if usage else 0,
                  "llm_cache_hits": usage.cache_hits if usage else 0,
                  "prompt_tokens": usage.prompt_tokens if usage else 0,
                  "completion_tokens": usage.completion_tokens if usage else 0,
                  "llm_seconds": round(usage.seconds, 3) if usage else 0.0})
        if usage and usage.seconds > 0:
            m["llm_tokens_per_s"] = round((usage.prompt_tokens + usage.completion_tokens) / usage.seconds, 2)
        if self._engine is not None and hasattr(self._engine, "cost_usd"):
            m["llm_cost_usd"] = round(self._engine.cost_usd, 6)
        stats = dict(self.rerank_stats)
        if stats.get("questions"):  # LLM rerankers (Rank-R1): latency per question, as the seed reports
            stats["seconds_per_question"] = stats.get("seconds", 0.0) / stats["questions"]
        m.update({f"rerank/{k}": round(v, 4) if isinstance(v, float) else v for k, v in stats.items()})
        return m

    def close(self) -> None:
        for part in (self.retriever, self.reranker):
            if part is not None and not LOADED.holds(part):  # kept ones serve the next sweep cell
                part.close()
        self.engines.close()


def empty_fallback_name(generator: Generator) -> str:
    """What an answer's `fallback` says when `generator` answered in place of an empty LLM answer."""
    return f"empty answer: {generator.name}"


def _has_judges(cfg: DictConfig) -> bool:
    return bool(judge_nodes(cfg.get("judge")))


def _reuse_loaded(cfg: DictConfig) -> bool:
    """`cache.reuse_loaded`: true, false, or auto (reuse within a Hydra multirun, i.e. a sweep)."""
    setting = cfg.cache.get("reuse_loaded", "auto")
    if setting != "auto":
        return bool(setting)
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def _model_loads(component: Any, seen: set[int] | None = None) -> int:
    """Weight loads counted by a component and the embedders or engines inside it, each object once (an LLM
    reranker holding the generator's own engine does not count its loads again)."""
    seen = set() if seen is None else seen
    if component is None or id(component) in seen:
        return 0
    seen.add(id(component))
    own = getattr(component, "model_loads", 0)
    inner = [getattr(component, name, None) for name in ("embedder", "engine")]
    inner += component.parts() if isinstance(component, Retriever) else []
    return (own if isinstance(own, int) else 0) + sum(_model_loads(part, seen) for part in inner if part is not None)


def format_metrics_table(metrics: dict[str, Any]) -> str:
    """A compact two-column table for the terminal."""
    width = max(len(k) for k in metrics) if metrics else 10
    lines = [f"{'metric'.ljust(width)}  value", f"{'-' * width}  -----"]
    lines += [f"{k.ljust(width)}  {v:.4f}" if isinstance(v, float) else f"{k.ljust(width)}  {_short(v)}"
              for k, v in metrics.items()]
    return "\n".join(lines)


def _short(value: Any) -> Any:
    """A nugget set (`<judge>/nugget_set`) as its identity, source and topic count, not every topic's hash."""
    if isinstance(value, dict) and "identity" in value:
        return f"{value['identity']} ({value.get('source')}, {len(value.get('topics') or {})} topics)"
    return value
