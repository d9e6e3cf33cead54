"""One config's run: dataset -> (query) -> retrieve -> rerank -> order -> generate -> (attribute) -> metrics.

Every stage is built from its YAML with Hydra's `instantiate`. Retrieval and reranking go through the stage
caches (`rag.stage_cache`), LLM calls through the engine's response cache, and answers are journalled chunk by
chunk so a killed run resumes where it stopped. Final outputs are written atomically.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from rag.attack.base import CorpusAttack
from rag.attack.corpus import AttackedCorpus
from rag.attribute.base import Attribution, build_attribution
from rag.core.errors import ConfigError
from rag.core.io import atomic_write_json
from rag.core.secrets import redact
from rag.core.timing import Timer
from rag.data.dataset import Dataset
from rag.folders import RunFolder
from rag.generate.base import (
    GenerationContext,
    GenerationInput,
    Generator,
    cap_context_words,
    empty_fallback_name,
)
from rag.generate.repeats import generation_consistency
from rag.generate.search_loop import loop_metrics
from rag.judge.run import evaluate_records, judge_draw, judge_nodes
from rag.llm.base import LLMEngine, engine_metrics
from rag.llm.factory import EngineFactory, llm_key
from rag.metrics.base import (
    AnswerMetric,
    RunShape,
    ScoredAnswer,
    answer_means,
    build_metrics,
    hop_splits,
    rescore_records,
)
from rag.metrics.registry import REGISTRY
from rag.metrics.retrieval import cutoff_metrics, stage_cutoff_scores
from rag.order.ordering import Ordering
from rag.preflight.attack import add_attack_metrics, check_attack_reaches_index
from rag.query.base import QuerySet, QueryWriter, query_metrics
from rag.records import (
    AnswerRecord,
    GenerationResult,
    Question,
    ScoredPassage,
    build_answer_record,
)
from rag.rerank.base import Reranker, rerank_llm, rerank_metrics, take_stats, takes_turns
from rag.retrieve.base import Retriever, clamp_to_corpus
from rag.retrieve.fusion import search_query_sets, select_per_group
from rag.reuse import LOADED, RunLoader, reuse_loaded
from rag.stage_cache import StageCache

log = logging.getLogger(__name__)


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
        #: the one engine factory: generator, LLM reranker (Rank-R1) and judges share equal engines
        self.engines = EngineFactory(self.cache_dir, cache_enabled=cfg.cache.llm_responses)
        self.loader = RunLoader(reuse_loaded(cfg), self.cache_dir, self.engines)
        self.dataset: Dataset = instantiate(cfg.dataset)
        # in-process sweep cells share loaded corpora, indexes, rerankers and engines (rag/reuse.py)
        self.dataset.corpus, _ = self.loader.shared("corpus", cfg.dataset.corpus, lambda: self.dataset.corpus)
        #: the corpus attack (`attack=poisonedrag | prompt_injection`): its passages join the corpus before indexing
        self.attack: CorpusAttack | None = None
        if cfg.get("attack"):
            self.attack = instantiate(cfg.attack, llm=None)
            attack_llm = cfg.attack.get("llm")  # the generator's engine when equal (an LLM generator's), else its own
            self.dataset.corpus = AttackedCorpus(
                self.dataset.corpus, self.attack, lambda: self.dataset.questions,
                lambda: self._stage_engine(attack_llm, share=self.generator.uses_llm) if attack_llm else None,
                self.cache_dir, self.dataset.name)
        self.retriever: Retriever
        # an attacked corpus depends on the attack and on the questions it targets
        attacked = (cfg.attack, cfg.dataset) if cfg.get("attack") else ()
        self.retriever, reused = self.loader.shared("retriever", cfg.retriever, lambda: instantiate(cfg.retriever),
                                              cfg.dataset.corpus, *attacked)
        self._index_ready = reused and self.retriever.corpus is not None  # a kept index is already loaded
        self._engine: LLMEngine | None = engine
        if engine is not None:
            self.engines.adopt(cfg.llm, engine)  # used, never closed, by this run
        self.loader.note_loads(llm=engine)  # the `engine` property sets the LLM's when it builds it
        reranker_llm = rerank_llm(cfg)
        self.reranker: Reranker
        self.reranker, _ = self.loader.shared(
            "rerank", cfg.rerank, lambda: (instantiate(cfg.rerank, llm=self._stage_engine(reranker_llm)) if reranker_llm
                                           else instantiate(cfg.rerank)), cfg.cache.llm_responses)
        self.ordering: Ordering = instantiate(cfg.ordering)
        self.compressor = instantiate(cfg.get("compress") or {"_target_": "rag.compress.base.NoCompression"})
        #: the query stage (`query=hyde | rewrite | decompose | preqrag`); None searches each question as asked
        self.query_writer: QueryWriter | None = instantiate(cfg.query) if cfg.get("query") else None
        #: each ranked question's query set, until its answer record takes it
        self._query_sets: dict[str, QuerySet] = {}
        self.generator: Generator = instantiate(cfg.generator)
        #: the attribution stage (`attribution=embedding | llm_support`): cites each sentence's passages
        self.attribution: Attribution = build_attribution(cfg.get("attribution"))
        self.stage_cache = StageCache(self.cache_dir, enabled=cfg.cache.stages)
        self.timer = Timer()
        self.rerank_stats: dict[str, float] = {}
        self.loader.note_loads(retriever=self.retriever, rerank=self.reranker)
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
        elif judge_nodes(cfg.get("judge")):
            raise ConfigError("judges need answers, but generator=none writes none; "
                              "use judge=none for a retrieval-only run")

    @property
    def engine(self) -> LLMEngine:
        """The generator's engine (from the factory, so an equal judge or reranker config shares it)."""
        if self._engine is None:
            self._engine = self.loader.generator_engine(self.cfg.llm, self.cfg.cache.llm_responses)
        return self._engine

    def _stage_engine(self, llm_cfg: Any, share: bool = True) -> LLMEngine:
        """A stage's engine (an LLM reranker's `rerank.llm`, the attack's `attack.llm`): with `share`, the
        generator's own when the configs are equal (GRAG's relevance model is its generator: one load, and its calls
        count in the run's LLM usage), else its own."""
        if share and llm_key(llm_cfg) == llm_key(self.cfg.llm):
            return self.engine
        return self.loader.engine_for(llm_cfg)

    def model_loads(self) -> int:
        """Model weights loaded by this run (LLM and embedders); 0 for every component reused from a
        previous sweep cell."""
        return self.loader.loads(llm=self._engine, retriever=self.retriever, rerank=self.reranker)

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
        else:  # the query stage: each question's queries (kept for its answer record), searched and fused
            writer, engine = self.query_writer, self.engine if self.query_writer.uses_llm else None
            with self.timer.stage("query"):
                sets = writer.write_checked(questions, engine)
                self._query_sets.update({q.id: s for q, s in zip(questions, sets)})
            with self.timer.stage("retrieve"):
                deep, groups = search_query_sets(
                    [[(q.group, q.source, q.text) for q in s.queries] for s in sets], self.retriever, self.depth,
                    lambda retriever, queries, d: self.stage_cache.retrieve_queries(retriever, corpus.key, queries, d))
            name = f"{name}__q-{writer.output_key(engine)}"
        retrieved = [r[: self.retriever.k] for r in deep]
        with self.timer.stage("rerank"):
            reranked = self.stage_cache.rerank(self.reranker, f"{name}__k{self.retriever.k}", self.retriever,
                                               qids, texts, retrieved)
            selected: set[int] = set()
            if groups and getattr(self.query_writer, "per_group_k", None):  # PreQRAG: per sub-question
                reranked, selected = select_per_group(
                    questions, [len(self._query_sets[q.id].groups) for q in questions], groups, reranked,
                    self.retriever.k, int(self.query_writer.per_group_k),
                    lambda ids, queries, lists: self.stage_cache.rerank(
                        self.reranker, f"{name}__groups__k{self.retriever.k}", self.retriever, ids, queries, lists))
        if self.recall_at:  # recall at every cutoff, from the deep list and the uncut reranked list
            self._cutoff_scores.update({q.id: stage_cutoff_scores(q.gold_doc_ids, d, r, self.recall_at,
                                                                  self.retriever.k)
                                        for q, d, r in zip(questions, deep, reranked)})
        take_stats(self.reranker, self.rerank_stats)
        # a decomposed question's interleaved selection is its context as it is; the others are cut to rerank.k
        # (and to the writer's `single_k`, PreQRAG's 5), then every context to generation.max_context_words
        cap = self.cfg.generation.get("max_context_words")
        single_k = getattr(self.query_writer, "single_k", None)
        return retrieved, [cap_context_words(r if i in selected else self.reranker.cut(r)[:single_k or None], cap)
                           for i, r in enumerate(reranked)]

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
            clamp_to_corpus({"retriever.k": self.retriever, "rerank.k": self.reranker}, self.retriever.capacity(),
                            self.dataset.corpus.key)

    def retrieve_adhoc(self, queries: list[str]) -> list[list[ScoredPassage]]:
        """Retrieve + rerank + cut for new queries (IterDRAG's sub-queries, a search loop's), with the run's own
        stages and stage caches."""
        return [self.reranker.cut(r) for r in self.stage_cache.rank_queries(
            self.retriever, self.reranker, self.dataset.corpus.key, queries, self.depth)]

    def generate(self, questions: list[Question], contexts: list[list[ScoredPassage]]) -> list[GenerationResult]:
        ctx = GenerationContext(engine=self.engine if self.generator.uses_llm else None, retrieve=self.retrieve_adhoc, cache_dir=str(self.cache_dir),
                                data_dir=self.data_dir, evaluated=tuple(self.dataset.questions))
        items = [GenerationInput(q, self.ordering.order(c) if self.generator.uses_ordering else list(c))
                 for q, c in zip(questions, contexts)]
        done = self.compressor.shrink(items, self.timer)  # compress=...: after ordering, before generation
        with self.timer.stage("generate"):
            return self.compressor.mark(self.generator.generate(items, ctx), done)

    # -- the run ----------------------------------------------------------------------------------------------
    def run(self, run_dir: str | Path) -> dict[str, Any]:
        """Answer every question not yet in `run_dir`, then score; one execution at a time per folder."""
        with RunFolder(Path(run_dir)).held():
            return self._run(Path(run_dir))

    def _run(self, run_dir: Path) -> dict[str, Any]:
        start = time.perf_counter()
        with self.timer.stage("load"):
            questions = self.dataset.questions
            coverage = self.dataset.gold_coverage()
        if isinstance(self.dataset.corpus, AttackedCorpus):  # what was planted, readable beside the answers
            atomic_write_json(run_dir / "attack.json", self.dataset.corpus.manifest())
        log.info("dataset %s: %d questions; retriever %s k=%d; rerank %s k=%s; ordering %s; generator %s",
                 self.dataset.name, len(questions), self.retriever.kind, self.retriever.k, self.reranker.kind,
                 self.reranker.k, self.ordering.name, self.generator.name)

        folder = RunFolder(run_dir)
        done, todo = folder.resumed(questions)
        execution = folder.answer_journalled(todo, max(1, int(self.cfg.generation.chunk_size)), self.answer,
                                             self.work_so_far, done,
                                             first=(lambda: self.rank_ahead(todo)) if takes_turns(self.cfg, self.generator.uses_llm) else None)
        if not todo:  # still load the index so that timings are comparable between runs
            self.prepare_index()

        records = [done[q.id] for q in questions]
        # record metrics read the stored records: every answer again, resumed ones too
        rescore_records(self.answer_metrics, records, self.dataset.qrels_level)
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
        if int(self.cfg.generation.get("repeats") or 1) > 1 and self.generator.uses_llm:  # after the judges: the
            metrics.update(self.repeat_generation(questions, records, run_dir))  # draws are judged alike
        metrics.update({f"time/{k}_s": round(v, 3) for k, v in self.timer.seconds.items()})
        metrics["time/total_s"] = round(time.perf_counter() - start, 3)
        undeclared = REGISTRY.undeclared(metrics)
        if undeclared:
            log.warning("metrics not declared in rag/metrics/registry.py: %s", ", ".join(undeclared))

        # the stages' TREC run files and the judgments, so trec_eval, ranx or ir_measures read the folder
        folder.write_rankings(records, level=self.dataset.qrels_level)
        # a rerun's own counters (cache hits) go to work_history.jsonl; metrics.json keeps the measured work
        metrics = folder.record_work(metrics, answered=len(todo), execution=execution)
        folder.finish(records, metrics, redact(OmegaConf.to_container(self.cfg, resolve=True)))
        return metrics

    def repeat_generation(self, questions: list[Question], records: list[AnswerRecord], run_dir: Path) -> dict:
        """`generation.repeats`: every answer drawn again with other seeds, and how much it moves
        (rag.generate.repeats); the repeats' LLM work is counted apart from the run's."""
        engine = self.engine

        def reseed(reseeded: LLMEngine | None) -> None:
            self._engine = reseeded if reseeded is not None else engine

        judge = (lambda run, folder: judge_draw(self.cfg.judge, run, folder, self.cache_dir, self.engines)) \
            if self.cfg.get("judge") else None
        with self.timer.apart("repeats"):  # the draws' stage time goes to time/repeats_s alone, not the run's stages
            return generation_consistency(
                questions, records, run_dir, self.cfg.generation, self.answer, reseed, engine,
                lambda run: rescore_records(self.answer_metrics, run, self.dataset.qrels_level), judge)

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
        if self.attribution.active:
            with self.timer.stage("attribute"):  # its engine: attribution.llm, the generator's when equal
                self.attribution.attribute(rows, lambda: self._stage_engine(self.cfg.attribution.get("llm")))
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
        splits = hop_splits(records)
        shape = RunShape(k_retrieval=self.retriever.k, k_rerank=self.reranker.k or self.retriever.k)
        m.update(answer_means(splits, self.answer_metrics, shape))
        # recall at every metrics.recall_at cutoff (issue 14): recall/<stage>@<k>[_any|_all]/<split>
        m.update(cutoff_metrics(splits))
        m["parse_failures"] = sum(r.parse_failed for r in records)
        m["empty_answers"] = sum(r.failure == "empty_answer" for r in records)
        m.update(self.work_so_far())
        if self.engines_released:
            m["engines_released"] = self.engines_released
        m.update({**query_metrics(records), **self.compressor.metrics(records)})  # query fallbacks, compress/ratio
        m.update(loop_metrics(records))  # a search loop's budget stops
        return m

    def work_so_far(self) -> dict[str, Any]:
        """This execution's work counters up to now (what the work journal keeps of an unfinished execution)."""
        return {"model_loads": self.model_loads(), **asdict(self.stage_cache.counters),
                **engine_metrics(self._engine), **rerank_metrics(self.rerank_stats),
                **{f"time/{k}_s": round(v, 3) for k, v in self.timer.seconds.items()}}

    def close(self) -> None:
        for part in (self.retriever, self.reranker):
            if part is not None and not LOADED.holds(part):  # kept ones serve the next sweep cell
                part.close()
        self.engines.close()

