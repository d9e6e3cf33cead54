"""The run: dataset -> retrieve -> rerank -> order -> generate -> records -> metrics, for one config.

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

from rag.core.io import JsonlJournal, atomic_write_json, atomic_write_jsonl, read_jsonl
from rag.core.secrets import redact
from rag.data.dataset import Dataset
from rag.generate.base import GenerationContext, GenerationInput, GenerationResult, Generator
from rag.llm.base import LLMEngine
from rag.llm.cache import ResponseCache
from rag.metrics.qa import best_over_golds, exact_match, token_f1
from rag.metrics.retrieval import gold_found
from rag.order.ordering import Ordering
from rag.records import Question, ScoredPassage
from rag.rerank.base import Reranker
from rag.retrieve.base import Retriever
from rag.stage_cache import StageCache

log = logging.getLogger(__name__)

ANSWERS_FILE = "answers.jsonl"
JOURNAL_FILE = "answers.partial.jsonl"
METRICS_FILE = "metrics.json"


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
    """One configured run. Build with `Pipeline(cfg)`, run with `.run(run_dir)`."""

    def __init__(self, cfg: DictConfig):
        self.cfg = cfg
        self.data_dir = _abs(cfg.paths.data_dir)
        self.cache_dir = Path(_abs(cfg.paths.cache_dir))
        OmegaConf.update(cfg, "paths.data_dir", self.data_dir, force_add=True)
        self.dataset: Dataset = instantiate(cfg.dataset)
        self.retriever: Retriever = instantiate(cfg.retriever)
        self.reranker: Reranker = instantiate(cfg.rerank)
        self._attach_response_cache(self.reranker)
        self.ordering: Ordering = instantiate(cfg.ordering)
        self.generator: Generator = instantiate(cfg.generator)
        self.stage_cache = StageCache(self.cache_dir, enabled=cfg.cache.stages)
        self.timer = Timer()
        self.rerank_stats: dict[str, float] = {}
        self._index_ready = False
        self._engine: LLMEngine | None = None
        _ = self.engine  # fail fast on a bad llm config (a missing model file) before any index is built
        self.generator.check_engine(self.engine)

    def _attach_response_cache(self, component: object) -> None:
        """LLM-based stages (Rank-R1) build their own engine from YAML; give it the shared response cache."""
        engine = getattr(component, "engine", None)
        if isinstance(engine, LLMEngine) and engine.cache is None and self.cfg.cache.llm_responses:
            engine.cache = ResponseCache(self.cache_dir / "llm")

    @property
    def engine(self) -> LLMEngine:
        if self._engine is None:
            cache = ResponseCache(self.cache_dir / "llm", enabled=self.cfg.cache.llm_responses)
            self._engine = instantiate(self.cfg.llm, cache=cache)
        return self._engine

    @property
    def depth(self) -> int:
        """Retrieval depth shared by sweep cells: the largest k any cell needs."""
        return max(self.retriever.k, int(self.cfg.cache.retrieval_depth or 0))

    # -- stages -----------------------------------------------------------------------------------------------
    def rank(self, questions: list[Question]) -> tuple[list[list[ScoredPassage]], list[list[ScoredPassage]]]:
        """Retrieved top-k lists and reranked, cut lists for `questions`."""
        corpus = self.dataset.corpus
        self.prepare_index()
        qids, texts = [q.id for q in questions], [q.question for q in questions]
        with self.timer.stage("retrieve"):
            deep = self.stage_cache.retrieve(self.retriever, corpus.key, self.dataset.key, qids, texts, self.depth)
        retrieved = [r[: self.retriever.k] for r in deep]
        with self.timer.stage("rerank"):
            name = self.stage_cache.retrieval_name(self.retriever, corpus.key, self.dataset.key, self.depth)
            reranked = self.stage_cache.rerank(self.reranker, f"{name}__k{self.retriever.k}", self.retriever,
                                               qids, texts, retrieved)
        for key, value in (getattr(self.reranker, "stats", None) or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.rerank_stats[key] = self.rerank_stats.get(key, 0) + value
        if getattr(self.reranker, "stats", None):
            self.reranker.stats = {}
        return retrieved, [self.reranker.cut(r) for r in reranked]

    def prepare_index(self) -> None:
        """Build or load the retriever's index once per run (not once per generation chunk)."""
        if not self._index_ready:
            with self.timer.stage("index"):
                self.retriever.prepare(self.dataset.corpus, self.cache_dir)
            self._index_ready = True

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
        ctx = GenerationContext(engine=self.engine, retrieve=self.retrieve_adhoc, cache_dir=str(self.cache_dir),
                                data_dir=self.data_dir)
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
        log.info("dataset %s: %d questions; retriever %s k=%d; rerank %s k=%s; ordering %s; generator %s",
                 self.dataset.name, len(questions), self.retriever.key, self.retriever.k, self.reranker.key,
                 self.reranker.k, self.ordering.name, self.generator.name)

        journal = JsonlJournal(run_dir / JOURNAL_FILE)
        done = {r["id"]: r for r in journal.read()}
        if (run_dir / ANSWERS_FILE).exists():
            done.update({r["id"]: r for r in read_jsonl(run_dir / ANSWERS_FILE)})
        todo = [q for q in questions if q.id not in done]
        if done:
            log.info("resuming: %d answers already written, %d to go", len(done), len(todo))

        chunk = max(1, int(self.cfg.generation.chunk_size))
        for offset in range(0, len(todo), chunk):
            part = todo[offset: offset + chunk]
            retrieved, contexts = self.rank(part)
            results = self.generate(part, contexts)
            rows = [self.record(q, r, c, g) for q, r, c, g in zip(part, retrieved, contexts, results)]
            journal.append(rows)
            done.update({row["id"]: row for row in rows})
        if not todo:  # still load the index so that timings are comparable between runs
            self.prepare_index()

        records = [done[q.id] for q in questions]
        metrics = self.metrics(records, coverage)
        if self.cfg.judge.get("enabled", False):
            from eval.engines import llm_key
            from eval.hook import evaluate_records

            with self.timer.stage("evaluate"):
                # a judge configured with the run's own `llm` reuses the loaded generator model
                metrics.update(evaluate_records(self.cfg.judge, records, run_dir, self.cache_dir,
                                                engines={llm_key(self.cfg.llm): self.engine}))
        metrics.update({f"time/{k}_s": round(v, 3) for k, v in self.timer.seconds.items()})
        metrics["time/total_s"] = round(time.perf_counter() - start, 3)

        atomic_write_jsonl(run_dir / ANSWERS_FILE, records)
        atomic_write_json(run_dir / METRICS_FILE, metrics)
        atomic_write_json(run_dir / "config.json", redact(OmegaConf.to_container(self.cfg, resolve=True)))
        journal.path.unlink(missing_ok=True)
        return metrics

    def record(self, question: Question, retrieved: list[ScoredPassage], context: list[ScoredPassage],
               result: GenerationResult) -> dict[str, Any]:
        """One answers.jsonl line: the LiveRAG submission fields, then ours."""
        used = result.passages if result.passages is not None else (
            self.ordering.order(context) if self.generator.uses_ordering else context)
        golds = [question.answer, *question.answer_aliases] if question.answer is not None else []
        scores: dict[str, float] = {}
        if golds:
            scores["f1"] = best_over_golds(token_f1, result.answer, golds)
            scores["em"] = best_over_golds(exact_match, result.answer, golds)
        if question.gold_doc_ids:
            for stage, ranked in (("retrieval", retrieved), ("rerank", context)):
                frac, any_found, all_found = gold_found(question.gold_doc_ids, ranked, len(ranked))
                scores.update({f"recall_{stage}": frac, f"recall_{stage}_any": any_found,
                               f"recall_{stage}_all": all_found})
        return {
            "id": question.id, "question": question.question, "answer": result.answer,
            "passages": [{"doc_IDs": [p.passage.doc_id], "passage": p.passage.text} for p in used],
            "final_prompt": result.final_prompt,
            "generator": self.generator.name,
            "gold_answer": question.answer, "gold_answer_aliases": question.answer_aliases,
            "gold_doc_ids": question.gold_doc_ids, "gold_docs": question.gold_docs,
            "hop": question.hop, "categories": question.categories,
            "retrieved": [p.to_dict() for p in retrieved], "reranked": [p.to_dict() for p in context],
            "context": [p.passage.passage_id for p in used],
            "steps": result.steps, "parse_failed": result.parse_failed, "fallback": result.fallback,
            "scores": scores, **({"sentences": result.sentences} if result.sentences is not None else {}),
        }

    def metrics(self, records: list[dict[str, Any]], coverage: dict[str, int]) -> dict[str, Any]:
        """Run metrics, overall and split single-hop / multi-hop."""
        m: dict[str, Any] = {"n_questions": len(records), **coverage}
        splits = {"all": records, "single": [r for r in records if r["hop"] == "single"],
                  "multi": [r for r in records if r["hop"] == "multi"]}
        k_retr, k_rerank = self.retriever.k, self.reranker.k or self.retriever.k
        for split, rows in splits.items():
            m[f"n_{split}"] = len(rows)
            for key, name in (("f1", "answer/f1"), ("em", "answer/em"),
                              ("recall_retrieval", f"recall/retrieval@{k_retr}"),
                              ("recall_retrieval_any", f"recall/retrieval@{k_retr}_any"),
                              ("recall_retrieval_all", f"recall/retrieval@{k_retr}_all"),
                              ("recall_rerank", f"recall/rerank@{k_rerank}"),
                              ("recall_rerank_any", f"recall/rerank@{k_rerank}_any"),
                              ("recall_rerank_all", f"recall/rerank@{k_rerank}_all")):
                values = [r["scores"][key] for r in rows if key in r["scores"]]
                if values:
                    m[f"{name}/{split}"] = round(mean(values), 6)
        m["parse_failures"] = sum(bool(r.get("parse_failed")) for r in records)
        usage = self._engine.usage if self._engine is not None else None
        counters = self.stage_cache.counters
        m.update({"retrieval_calls": counters.retrieval_calls, "rerank_calls": counters.rerank_calls,
                  "retrieval_cache_hits": counters.retrieval_cache_hits,
                  "rerank_cache_hits": counters.rerank_cache_hits,
                  "llm_calls": usage.calls if usage else 0, "llm_cache_hits": usage.cache_hits if usage else 0,
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
        for part in (self._engine, self.retriever, self.reranker):
            if part is not None:
                part.close()


def format_metrics_table(metrics: dict[str, Any]) -> str:
    """A compact two-column table for the terminal."""
    width = max(len(k) for k in metrics) if metrics else 10
    lines = [f"{'metric'.ljust(width)}  value", f"{'-' * width}  -----"]
    lines += [f"{k.ljust(width)}  {v:.4f}" if isinstance(v, float) else f"{k.ljust(width)}  {v}"
              for k, v in metrics.items()]
    return "\n".join(lines)
