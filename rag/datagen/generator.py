"""The generation loop: draw categories, pick documents, generate candidates, filter, keep one per pair.

Pairs are processed in rounds of `batch_pairs` pending pair slots; each step of a round is one batched engine
call over all of them (generation, then the answerable check, then the closed-book check). A slot whose
candidates are all rejected tries again with new documents and seeds, up to `max_attempts`; a slot that still
fails is counted and replaced by a new slot (at most `max_slots_factor * n` slots in all), so a run ends with
`n` pairs unless the corpus, engine or filters make that impossible.

Every finished slot (kept or failed) is appended to a journal with its counts, so a killed run resumes where it
stopped: category draws, documents and seeds depend only on (seed, slot, attempt), and the engine's response
cache answers the requests of the interrupted round again for free.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from rag.core.errors import ConfigError
from rag.core.io import JsonlJournal
from rag.datagen.categories import Category, CategorySet
from rag.datagen.documents import Document, DocumentPool
from rag.datagen.filters import Candidate, Filters, tally
from rag.datagen.replies import RETRY_TEMPERATURE, parse_pair
from rag.embed import Embedder
from rag.llm.asking import ask_with_retries
from rag.llm.base import LLMEngine, LLMRequest, SamplingParams
from rag.prompts import load_prompt
from rag.retrieve.base import Retriever

log = logging.getLogger(__name__)

JOURNAL_FILE = "datagen_journal.jsonl"


@dataclass
class Slot:
    """One requested pair: its index fixes its categories; each attempt draws new documents and seeds."""

    index: int
    attempt: int = 0
    stats: dict[str, Any] = field(default_factory=lambda: {"attempts": 0, "candidates": 0, "unparsable": 0,
                                                           "parse_retries": 0, "judge_unreadable": 0, "no_related_document": 0,
                                                           "filters": {}})

    def add(self, key: str, value: int) -> None:
        self.stats[key] += value

    def add_filters(self, counts: dict[str, dict[str, int]]) -> None:
        for name, entry in counts.items():
            mine = self.stats["filters"].setdefault(name, {"checked": 0, "rejected": 0})
            mine["checked"] += entry["checked"]
            mine["rejected"] += entry["rejected"]


@dataclass
class GenerationSettings:
    candidates_per_pair: int = 3
    max_attempts: int = 3
    max_slots_factor: float = 2.0
    batch_pairs: int = 8
    parse_retries: int = 1
    judge_retries: int = 1
    temperature: float = 0.8
    top_p: float = 0.95
    max_tokens: int = 160
    #: structured decoding bounds: a minimum keeps small models from returning placeholders such as "..."
    question_min_chars: int = 12
    question_max_chars: int = 300
    answer_max_chars: int = 600
    prompt: str = "datagen_pair"
    prompt_dir: str | None = None

    def check(self) -> None:
        for name in ("candidates_per_pair", "max_attempts", "batch_pairs", "max_tokens"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"generation.{name} must be >= 1, got {getattr(self, name)}")
        if self.max_slots_factor < 1:
            raise ConfigError(f"generation.max_slots_factor must be >= 1, got {self.max_slots_factor}")


def _seed(*parts: int) -> int:
    """A per-request seed from its coordinates (llama.cpp takes 32-bit seeds)."""
    value = 0
    for p in parts:
        value = (value * 1_000_003 + int(p)) % (2**31 - 1)
    return value


class DataGenerator:
    """Generates `n` QA pairs into a journal; `rag.datagen.main` writes the data folder and report from it."""

    def __init__(self, *, engine: LLMEngine, judge: LLMEngine, categories: CategorySet, pool: DocumentPool,
                 filters: Filters, settings: GenerationSettings, retriever: Retriever | None,
                 prepare_retriever: Callable[[], None] | None, embedder: Embedder | None, n: int, seed: int,
                 journal_path: Path, fingerprint: str):
        if n < 1:
            raise ConfigError(f"n must be >= 1, got {n}")
        settings.check()
        if categories.multi_doc_probability > 0 and len(pool.eligible) < 2:
            raise ConfigError(f"categories={categories.name}: multi-document categories need two documents of at "
                              f"least {pool.min_words} words; the corpus has {len(pool.eligible)}")
        self.engine, self.judge, self.categories, self.pool = engine, judge, categories, pool
        self.filters, self.settings, self.retriever = filters, settings, retriever
        self._prepare_retriever, self._retriever_ready = prepare_retriever, False
        self.embedder = embedder if "near_duplicate" in filters.enabled else None
        self.n, self.seed = int(n), int(seed)
        self.journal = JsonlJournal(journal_path)
        self.fingerprint = fingerprint
        self.template = load_prompt(settings.prompt, settings.prompt_dir)
        self.pairs_this_run = 0

    # -- journal ----------------------------------------------------------------------------------------------
    def finished(self) -> dict[int, dict[str, Any]]:
        """Finished slots from the journal (checked to come from the same settings)."""
        rows = self.journal.read()
        if not rows:
            self.journal.append([{"type": "header", "fingerprint": self.fingerprint}])
            return {}
        header = rows[0]
        if header.get("type") != "header" or header.get("fingerprint") != self.fingerprint:
            raise ConfigError(f"{self.journal.path}: this folder holds a generation run with other settings "
                              f"(corpus, categories, engine, seed, filters or prompts differ); choose a new `out` "
                              f"or delete the journal to start over")
        return {int(r["slot"]): r for r in rows[1:] if r.get("type") == "slot"}

    # -- the loop ---------------------------------------------------------------------------------------------
    def run(self) -> dict[int, dict[str, Any]]:
        """Generate until `n` pairs are kept (or slots run out); returns every finished slot row."""
        done = self.finished()
        kept_rows = [r for r in done.values() if r["status"] == "kept"]
        failed = sum(r["status"] == "failed" for r in done.values())
        max_slots = int(np.ceil(self.n * self.settings.max_slots_factor))
        opened = min(self.n + failed, max_slots)
        queue = deque(Slot(i) for i in range(opened) if i not in done)
        if done:
            log.info("resuming: %d pairs kept, %d slots failed, %d slots to go", len(kept_rows), failed, len(queue))
        kept_vectors = self._embed([r["pair"]["question"] for r in kept_rows])
        progress = tqdm(total=self.n, initial=min(len(kept_rows), self.n), unit="pair", desc="datagen",
                        dynamic_ncols=True)
        kept = len(kept_rows)
        try:
            while queue and kept < self.n:
                batch = [queue.popleft() for _ in range(min(self.settings.batch_pairs, len(queue)))]
                chosen = self._round(batch, kept_vectors)
                rows, retry = [], []
                for slot in batch:
                    candidate = chosen.get(slot.index)
                    if candidate is not None:
                        rows.append(self._row(slot, "kept", candidate))
                        kept += 1
                        self.pairs_this_run += 1
                        progress.update(1)
                    elif slot.attempt + 1 < self.settings.max_attempts:
                        slot.attempt += 1
                        retry.append(slot)
                    else:
                        rows.append(self._row(slot, "failed", None))
                        if opened < max_slots:
                            queue.append(Slot(opened))
                            opened += 1
                self.journal.append(rows)
                for row in rows:
                    done[row["slot"]] = row
                new = [r["pair"]["question"] for r in rows if r["status"] == "kept"]
                if new and self.embedder is not None:
                    kept_vectors = np.vstack([kept_vectors, self._embed(new)]) if kept_vectors is not None \
                        else self._embed(new)
                queue.extendleft(reversed(retry))
                n_failed = sum(r["status"] == "failed" for r in done.values())
                progress.set_postfix(failed_slots=n_failed, refresh=False)
        finally:
            progress.close()
        if kept < self.n:
            log.warning("datagen: %d of %d pairs obtained; %d slots failed after %d attempts each (limit "
                        "max_slots_factor=%s); see report.md for the filters that rejected them", kept, self.n,
                        sum(r["status"] == "failed" for r in done.values()), self.settings.max_attempts,
                        self.settings.max_slots_factor)
        return done

    def _row(self, slot: Slot, status: str, candidate: Candidate | None) -> dict[str, Any]:
        row: dict[str, Any] = {"type": "slot", "slot": slot.index, "status": status, "stats": slot.stats,
                               "categories": {k: c.name for k, c in self.categories.draw(self.seed, slot.index).items()}}
        if candidate is not None:
            docs: list[Document] = candidate.detail.pop("_documents")
            row["pair"] = {"question": candidate.question, "answer": candidate.answer,
                           "document_ids": [d.doc_id for d in docs], "context": [d.text for d in docs],
                           "attempt": slot.attempt, "candidate": candidate.number,
                           "generation_timestamp": datetime.now(timezone.utc).replace(tzinfo=None).isoformat(),
                           "checks": candidate.detail}
        return row

    def _embed(self, questions: list[str]) -> np.ndarray | None:
        if self.embedder is None or not questions:
            return None
        return self.embedder.encode(questions)

    def _documents(self, batch: list[Slot], draws: dict[int, dict[str, Category]]) -> dict[int, list[Document]]:
        """One document per slot, plus a related second one for multi-document slots (one retriever batch)."""
        firsts = {s.index: self.pool.pick(np.random.default_rng([self.seed, s.index, s.attempt, 17])) for s in batch}
        multi = [s for s in batch if any(c.is_multi_doc for c in draws[s.index].values())]
        docs = {s.index: [firsts[s.index]] for s in batch}
        if multi:
            if not self._retriever_ready and self._prepare_retriever is not None:
                self._prepare_retriever()
                self._retriever_ready = True
            seconds = self.pool.related(self.retriever, [firsts[s.index] for s in multi])
            for slot, second in zip(multi, seconds):
                if second is None:
                    slot.add("no_related_document", 1)
                    docs.pop(slot.index)
                else:
                    docs[slot.index].append(second)
        return docs

    def _round(self, batch: list[Slot], kept_vectors: np.ndarray | None) -> dict[int, Candidate]:
        """One attempt for every slot of the batch; returns the chosen candidate per slot that got one."""
        s = self.settings
        draws = {slot.index: self.categories.draw(self.seed, slot.index) for slot in batch}
        docs = self._documents(batch, draws)
        schema = {"type": "object", "additionalProperties": False, "required": ["question", "answer"],
                  "properties": {"question": {"type": "string", "minLength": s.question_min_chars,
                                              "maxLength": s.question_max_chars},
                                 "answer": {"type": "string", "minLength": 1, "maxLength": s.answer_max_chars}}}
        requests, owners = [], []
        for slot in batch:
            slot.add("attempts", 1)
            if slot.index not in docs:
                continue
            draw = draws[slot.index]
            shown = [{"label": i + 1, "text": d.excerpt(self.pool.max_prompt_words)}
                     for i, d in enumerate(docs[slot.index])]
            messages = self.template.messages(
                documents=shown,
                question_categories=[draw[c.column] for c in self.categories.question],
                user_categories=[draw[c.column] for c in self.categories.user])
            for number in range(s.candidates_per_pair):
                params = SamplingParams(temperature=s.temperature, top_p=s.top_p, max_tokens=s.max_tokens,
                                        seed=_seed(self.seed, slot.index, slot.attempt, number),
                                        json_schema=schema if self.engine.supports_json_schema else None)
                requests.append(LLMRequest(messages=messages, params=params, stop_plain=self.template.stop_plain))
                owners.append((slot, number, [d["text"] for d in shown]))
        answers = ask_with_retries(self.engine, requests, lambda _i, text: parse_pair(text), max_retries=s.parse_retries,
                                   retry_temperature=RETRY_TEMPERATURE, desc="datagen pairs")
        candidates: list[Candidate] = []
        for (slot, number, shown_texts), asked in zip(owners, answers):
            slot.add("candidates", 1)
            slot.add("parse_retries", asked.attempts - 1)
            if asked.value is None:
                slot.add("unparsable", 1)
                continue
            question, answer = asked.value
            cand = Candidate(slot=slot.index, number=number, question=question, answer=answer, shown=shown_texts)
            cand.detail["_documents"] = docs[slot.index]
            candidates.append(cand)

        self.filters.text_checks(candidates)
        alive = [c for c in candidates if c.rejected_by is None]
        vectors = self._embed([c.question for c in alive])
        vector_of = {id(c): v for c, v in zip(alive, vectors if vectors is not None else [])}
        self.filters.near_duplicates(alive, vectors, kept_vectors)
        self.filters.answerable(self.judge, candidates, self.seed, s.judge_retries)
        self.filters.closed_book(self.judge, candidates, self.seed)

        chosen: dict[int, Candidate] = {}
        chosen_vectors: list[np.ndarray] = []
        for cand in candidates:  # slot order, then candidate number: the first survivor of each slot wins
            if cand.rejected_by is not None or cand.slot in chosen:
                continue
            vector = vector_of.get(id(cand))
            if vector is not None and self.filters.is_duplicate(vector, chosen_vectors):
                cand.rejected_by = "near_duplicate"
                continue
            chosen[cand.slot] = cand
            if vector is not None:
                chosen_vectors.append(vector)
        by_slot = {slot.index: slot for slot in batch}
        for slot_index in {c.slot for c in candidates}:
            mine = [c for c in candidates if c.slot == slot_index]
            by_slot[slot_index].add_filters(tally(mine))
            by_slot[slot_index].add("judge_unreadable",
                                    sum("answerable" in c.checked and c.detail.get("answerable") is None
                                        for c in mine))
        for cand in candidates:
            if cand.slot not in chosen or chosen[cand.slot] is not cand:
                cand.detail.pop("_documents", None)
        return chosen
