"""AutoNuggetizer (Pradeep et al., TREC 2024 RAG): nugget creation, importance, assignment and scores.

Follows the published method and castorini/nuggetizer 0.0.5: nuggets are created iteratively over windows of
10 passages (at most 30 nuggets of 1-12 words), labelled vital/okay 10 at a time, sorted vital first (stable)
and cut to the top 20; each answer then gets support / partial_support / not_support per nugget, 10 at a time.
Every LLM step is one batched `engine.generate` over all topics (plus batched re-asks of unparsable outputs).

`AutoNuggetizer` is the run's nugget source (`rag.judge.nugget_sets.NuggetSource`, built from the one
`judge.nuggetizer` config node): it makes one nugget set per run (gold documents where a topic has them, else the
record's best-ranked passages; or a nuggetizer create file, `nugget_file`) that every nugget-based judge receives,
and its assignment settings serve them all. Nuggets are created once per topic and stored under
`<cache_dir>/nuggets/` (`rag.llm.cache.OutputCache`), keyed by the topic id, a hash of its passages, the engine's
identity (model by content and engine settings, as the response cache), the prompts and the settings.
Records are read and written in nuggetizer's JSONL shapes (create: `{qid, query, nuggets: [{text,
importance}]}`, ours with `source`; assign: the same nuggets with `assignment`, plus the answer text), so either
tool's files score.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import Any

from eval.judges import EVAL_PROMPT_DIR, cut_text
from rag.core.errors import ConfigError
from rag.core.hashing import stable_hash
from rag.core.io import atomic_write_jsonl
from rag.core.parsing import parse_label_list, parse_string_list
from rag.judge.base import SPLITS, EvalContext, Judge, split_of
from rag.judge.nugget_sets import NuggetSet, NuggetSource, TopicNuggets
from rag.llm.asking import ask_choices, ask_with_retries, make_params
from rag.llm.base import LLMEngine, LLMRequest
from rag.llm.cache import OutputCache
from rag.metrics.registry import MetricSpec
from rag.prompts import load_prompt
from rag.records import AnswerRecord, read_nugget_file

log = logging.getLogger(__name__)

IMPORTANCE = ("vital", "okay")
ASSIGNMENTS = ("support", "partial_support", "not_support")
SCORE_NAMES = ("vital_strict", "all_strict", "vital", "all")
_ASSIGN_ALIASES = {"supported": "support", "full_support": "support", "fully_supported": "support",
                   "partial": "partial_support", "partially_supported": "partial_support",
                   "partially_support": "partial_support", "partial_supported": "partial_support",
                   "not_supported": "not_support", "no_support": "not_support", "unsupported": "not_support",
                   "none": "not_support"}
_IMPORTANCE_ALIASES = {"important": "vital", "essential": "vital", "ok": "okay", "non_vital": "okay"}


# -- scores ---------------------------------------------------------------------------------------------------
def nugget_scores(nuggets: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Per-answer scores, the formulas of nuggetizer 0.0.5 (`nuggetizer.core.metrics.calculate_nugget_scores`).

    With V the vital nuggets, N all nuggets, s(n)=1 for support, 0.5 for partial_support, 0 otherwise:
    vital_strict = |{n in V: support}| / |V|  (the paper's primary metric, "Vital Strict")
    all_strict   = |{n in N: support}| / |N|
    vital        = sum_{n in V} s(n) / |V|
    all          = sum_{n in N} s(n) / |N|
    An empty V (or N) gives 0.0, as in nuggetizer.
    """
    vital = [n for n in nuggets if n.get("importance") == "vital"]

    def strict(group: Sequence[Mapping[str, Any]]) -> float:
        return sum(1 for n in group if n.get("assignment") == "support") / len(group) if group else 0.0

    def partial(group: Sequence[Mapping[str, Any]]) -> float:
        if not group:
            return 0.0
        return sum(1.0 if n.get("assignment") == "support" else 0.5 if n.get("assignment") == "partial_support"
                   else 0.0 for n in group) / len(group)

    return {"vital_strict": strict(vital), "all_strict": strict(nuggets), "vital": partial(vital),
            "all": partial(nuggets)}


def score_assign_records(records: Iterable[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Score nuggetizer-style assign records: per-record scores (with qid) and the run means over records."""
    per = [{"qid": r.get("qid"), **nugget_scores(r.get("nuggets") or [])} for r in records]
    if not per:
        return [], {}
    return per, {name: mean(p[name] for p in per) for name in SCORE_NAMES}


# -- the LLM steps --------------------------------------------------------------------------------------------
def parse_nuggets(text: str) -> list[str] | None:
    """A nugget list; items without a letter or digit ("...", "-") are dropped, and a list of only such
    items is a parse failure (small models copy the prompt's placeholder), so it gets re-asked."""
    items = parse_string_list(text, "nuggets")
    if items is None:
        return None
    kept = [t for t in items if re.search(r"\w", t)]
    return kept if kept or not items else None


@dataclass
class Topic:
    """One question and the passages its nuggets are made from."""

    qid: str
    query: str
    passages: list[str]
    source: str = "gold_docs"


#: how assignment labels are obtained: "list" asks for a JSON list of labels for up to `nuggets_per_call`
#: nuggets (castorini/nuggetizer's way); "logprobs" asks one nugget per request and takes the label whose first
#: token is most likely (`rag.llm.asking.ask_choices`), so no list order can be copied
ASSIGNMENT_MODES = ("list", "logprobs")


@dataclass
class Assignment:
    nuggets: list[dict[str, Any]]
    #: assignment requests whose labels could not be read (0 = the answer is fully assigned): windows of up to
    #: `nuggets_per_call` nuggets in list mode, single nuggets in logprobs mode
    failed_windows: int = 0


def topic_from_record(record: AnswerRecord, max_passages: int | None = 10) -> Topic:
    """Gold documents where the record has them, else its best-ranked passages (`AnswerRecord.ranked_passages`:
    rank order after reranking, not the prompt's order), at most `max_passages`."""
    gold = record.gold_texts()
    if gold:
        return Topic(record.id, record.question, gold, "gold_docs")
    passages = [text for _rank, _pid, text in record.ranked_passages() if text.strip()]
    return Topic(record.id, record.question, passages[:max_passages] if max_passages else passages, "passages")


class AutoNuggetizer(NuggetSource):
    """The run's nugget source (one set per run, cached on disk) and the batched assignment every nugget judge
    uses; built from the `judge.nuggetizer` config node."""

    def __init__(self, window_size: int = 10, max_nuggets: int = 30, keep_top: int = 20, nuggets_per_call: int = 10,
                 max_passages: int | None = 10, max_passage_chars: int | None = 4000,
                 max_answer_chars: int | None = 6000, max_nugget_chars: int = 120, prompt_dir: str | None = None,
                 create_params: Mapping[str, Any] | None = None, label_params: Mapping[str, Any] | None = None,
                 max_retries: int = 2, retry_temperature: float = 0.2, cache_dir: str | Path | None = None,
                 nugget_file: str | None = None, assignment: str = "list", top_logprobs: int = 20,
                 llm: Mapping[str, Any] | None = None, name: str = "nuggetizer"):
        #: the engine config that creates the nuggets (the config node's `${judge.llm}` by default)
        self.llm = llm
        self.name = name
        if assignment not in ASSIGNMENT_MODES:
            raise ConfigError(f"assignment={assignment!r}: one of {', '.join(ASSIGNMENT_MODES)}")
        #: "list" (a JSON list per window, as nuggetizer) or "logprobs" (one nugget per request, label by probability)
        self.assignment = assignment
        #: alternatives read at the reply's first token in logprobs mode (OpenAI-compatible servers allow <= 20)
        self.top_logprobs = top_logprobs
        self.window_size = window_size
        self.max_nuggets = max_nuggets
        self.keep_top = keep_top
        self.nuggets_per_call = nuggets_per_call
        self.max_passages = max_passages
        self.max_passage_chars = max_passage_chars
        self.max_answer_chars = max_answer_chars
        #: schema cap on one nugget's length (1-12 words fit well within 120 characters)
        self.max_nugget_chars = max_nugget_chars
        self.prompt_dir = str(prompt_dir or EVAL_PROMPT_DIR)
        self.create_params = dict(create_params or {"temperature": 0.0, "max_tokens": 1024})
        self.label_params = dict(label_params or {"temperature": 0.0, "max_tokens": 160})
        self.max_retries = max_retries
        self.retry_temperature = retry_temperature
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.nugget_file = nugget_file
        #: nuggets made elsewhere (e.g. by castorini/nuggetizer or by hand, or a sweep's pool): used instead of creating
        self.external = read_nugget_file(nugget_file) if nugget_file else None

    def nugget_set(self, records: Sequence[AnswerRecord], engine: LLMEngine | None, cache_dir: Path) -> NuggetSet:
        """The run's one set: a topic per distinct record id (gold documents, else its best-ranked passages), made
        or read from the cache / `nugget_file` once; every nugget judge of the run receives it."""
        if engine is None and self.external is None:
            raise ConfigError("judge.nuggetizer needs an `llm` to create nuggets (or a nugget_file)")
        self.cache_dir = Path(cache_dir)
        first = {r.id: r for r in reversed(records)}  # records of one topic share it (the first one's passages)
        topics = [topic_from_record(first[qid], self.max_passages) for qid in dict.fromkeys(r.id for r in records)]
        return NuggetSet.of(self.create(engine, topics))  # type: ignore[arg-type]

    # -- creation ---------------------------------------------------------------------------------------------
    @property
    def cache(self) -> OutputCache:
        return OutputCache(self.cache_dir, "nuggets")

    def cache_key(self, engine: LLMEngine, topic: Topic) -> dict[str, Any]:
        """What decides a topic's nuggets besides the engine's identity (which `OutputCache` adds)."""
        prompts = [load_prompt(n, prompt_dir=self.prompt_dir) for n in ("nugget_create", "nugget_importance")]
        return {"qid": topic.qid, "query": topic.query,
                "passages": stable_hash([cut_text(p, self.max_passage_chars) for p in topic.passages]),
                "prompts": stable_hash([[p.system, p.user] for p in prompts]),
                "settings": {"window_size": self.window_size, "max_nuggets": self.max_nuggets,
                             "max_nugget_chars": self.max_nugget_chars,
                             "keep_top": self.keep_top, "nuggets_per_call": self.nuggets_per_call,
                             "create_params": self.create_params, "label_params": self.label_params,
                             "schema": engine.supports_json_schema}}

    def create(self, engine: LLMEngine, topics: Sequence[Topic]) -> list[TopicNuggets]:
        """Nuggets per topic: from an external file where given, else the disk cache, else by the LLM."""
        out: list[TopicNuggets | None] = [None] * len(topics)
        todo: list[int] = []
        cache = self.cache
        for i, topic in enumerate(topics):
            if self.external is not None:
                ext = self.external.get(topic.qid)
                out[i] = (TopicNuggets(topic.qid, topic.query, ext["nuggets"], ext["source"], cached=True)
                          if ext and ext["nuggets"] else
                          TopicNuggets(topic.qid, topic.query, source="nugget_file", failure="not_in_nugget_file"))
                continue
            if not topic.passages:
                out[i] = TopicNuggets(topic.qid, topic.query, source=topic.source, failure="no_passages")
                continue
            entry = cache.get(engine, self.cache_key(engine, topic))
            if entry is not None and isinstance(entry.get("nuggets"), list):
                out[i] = TopicNuggets(topic.qid, topic.query, entry["nuggets"], topic.source, cached=True)
                continue
            todo.append(i)
        if todo:
            made = self._create_uncached(engine, [topics[i] for i in todo])
            for i, nset in zip(todo, made):
                out[i] = nset
                # only complete, clean nugget sets are cached, so failures are retried by the next run
                if nset.failure is None and not nset.create_failures and not nset.importance_failures:
                    cache.put(engine, self.cache_key(engine, topics[i]), nset.record())
        return [o for o in out if o is not None]

    def _create_uncached(self, engine: LLMEngine, topics: Sequence[Topic]) -> list[TopicNuggets]:
        create = load_prompt("nugget_create", prompt_dir=self.prompt_dir)
        schema = {"type": "object", "properties": {"nuggets": {
            "type": "array", "items": {"type": "string", "maxLength": self.max_nugget_chars}, "maxItems": self.max_nuggets}},
            "required": ["nuggets"], "additionalProperties": False}
        params = make_params(self.create_params, engine, schema)
        texts: list[list[str]] = [[] for _ in topics]
        failures = [0] * len(topics)
        windows = [[cut_text(p, self.max_passage_chars) for p in t.passages] for t in topics]
        n_steps = max((len(w) + self.window_size - 1) // self.window_size for w in windows)
        for step in range(n_steps):  # one batched call per window position, across all topics
            active = [i for i, w in enumerate(windows) if step * self.window_size < len(w)]
            requests = [LLMRequest(messages=create.messages(
                query=topics[i].query, max_nuggets=self.max_nuggets,
                passages=windows[i][step * self.window_size:(step + 1) * self.window_size],
                nuggets=texts[i], nuggets_json=json.dumps(texts[i], ensure_ascii=False)),
                params=params, stop_plain=create.stop_plain) for i in active]
            results = ask_with_retries(engine, requests, lambda _i, text: parse_nuggets(text),
                                       self.max_retries, self.retry_temperature, desc=f"nugget create {step + 1}")
            for i, res in zip(active, results):
                if res.value is None:
                    failures[i] += 1  # keep the previous list, as nuggetizer does after its retries
                else:
                    texts[i] = list(dict.fromkeys(res.value))[:self.max_nuggets]
        labels, label_failures = self._importance(engine, topics, texts)
        out = []
        for i, topic in enumerate(topics):
            scored = [{"text": t, "importance": lab} for t, lab in zip(texts[i], labels[i])]
            # stable sort: vital first, then creation order; keep the top `keep_top` (the paper's 20)
            scored = sorted(scored, key=lambda n: 0 if n["importance"] == "vital" else 1)[:self.keep_top]
            failure = None
            if not scored:
                failure = "create" if failures[i] else "empty"
            out.append(TopicNuggets(topic.qid, topic.query, scored, topic.source, failure=failure,
                                    create_failures=failures[i], importance_failures=label_failures[i]))
        return out

    def _label_windows(self, nuggets: Sequence[Sequence[str]]) -> list[tuple[int, int]]:
        return [(i, s) for i, ns in enumerate(nuggets) for s in range(0, len(ns), self.nuggets_per_call)]

    def _label_schema(self, allowed: Sequence[str], n: int) -> dict[str, Any]:
        return {"type": "object", "properties": {"labels": {
            "type": "array", "items": {"type": "string", "enum": list(allowed)}, "minItems": n, "maxItems": n}},
            "required": ["labels"], "additionalProperties": False}

    def _importance(self, engine: LLMEngine, topics: Sequence[Topic],
                    texts: Sequence[Sequence[str]]) -> tuple[list[list[str]], list[int]]:
        """vital/okay per nugget, 10 per call, all topics in one batch; unreadable windows become "failed"."""
        template = load_prompt("nugget_importance", prompt_dir=self.prompt_dir)
        windows = self._label_windows(texts)
        requests, sizes = [], []
        for i, s in windows:
            chunk = list(texts[i][s:s + self.nuggets_per_call])
            sizes.append(len(chunk))
            requests.append(LLMRequest(
                messages=template.messages(query=topics[i].query, nuggets=chunk,
                                           nuggets_json=json.dumps(chunk, ensure_ascii=False)),
                params=make_params(self.label_params, engine, self._label_schema(IMPORTANCE, len(chunk))),
                stop_plain=template.stop_plain))
        results = ask_with_retries(
            engine, requests,
            lambda k, text: parse_label_list(text, sizes[k], IMPORTANCE, aliases=_IMPORTANCE_ALIASES),
            self.max_retries, self.retry_temperature, desc="nugget importance")
        labels: list[list[str]] = [[] for _ in topics]
        failures = [0] * len(topics)
        for (i, _s), size, res in zip(windows, sizes, results):
            if res.value is None:
                failures[i] += 1
                labels[i].extend(["failed"] * size)  # nuggetizer's marker; counted, and not vital in scores
            else:
                labels[i].extend(res.value)
        return labels, failures

    # -- assignment -------------------------------------------------------------------------------------------
    def assign(self, engine: LLMEngine, items: Sequence[tuple[str, str, Sequence[Mapping[str, str]]]]
               ) -> list[Assignment]:
        """support / partial_support / not_support for each (query, answer, nuggets): 10 nuggets per call in list
        mode, one nugget per request in logprobs mode (`assignment`)."""
        out = [Assignment([]) for _ in items]
        todo: list[int] = []
        for i, (_q, answer, nuggets) in enumerate(items):
            if not (answer or "").strip():  # nothing to support: no LLM call, as in nuggetizer
                out[i] = Assignment([{**n, "assignment": "not_support"} for n in nuggets])
            else:
                todo.append(i)
        if self.assignment == "logprobs":
            self._assign_by_logprobs(engine, items, todo, out)
            return out
        template = load_prompt("nugget_assign", prompt_dir=self.prompt_dir)
        windows = [(i, s) for i in todo for s in range(0, len(items[i][2]), self.nuggets_per_call)]
        requests, sizes = [], []
        for i, s in windows:
            query, answer, nuggets = items[i]
            chunk = [n["text"] for n in nuggets[s:s + self.nuggets_per_call]]
            sizes.append(len(chunk))
            requests.append(LLMRequest(
                messages=template.messages(query=query, answer=cut_text(answer, self.max_answer_chars),
                                           nuggets=chunk, nuggets_json=json.dumps(chunk, ensure_ascii=False)),
                params=make_params(self.label_params, engine, self._label_schema(ASSIGNMENTS, len(chunk))),
                stop_plain=template.stop_plain))
        results = ask_with_retries(
            engine, requests,
            lambda k, text: parse_label_list(text, sizes[k], ASSIGNMENTS, aliases=_ASSIGN_ALIASES),
            self.max_retries, self.retry_temperature, desc="nugget assign") if requests else []
        for (i, s), size, res in zip(windows, sizes, results):
            nuggets = items[i][2][s:s + size]
            labels = res.value if res.value is not None else ["failed"] * size
            out[i].failed_windows += res.value is None
            out[i].nuggets.extend({"text": n["text"], "importance": n["importance"], "assignment": lab}
                                  for n, lab in zip(nuggets, labels))
        return out

    def _assign_by_logprobs(self, engine: LLMEngine, items: Sequence[tuple[str, str, Sequence[Mapping[str, str]]]],
                            todo: Sequence[int], out: list[Assignment]) -> None:
        """One request per (answer, nugget), all in one batch; the label is the most likely of the three first
        tokens. A nugget with no label among the alternatives is "failed" (scored as not supported, counted)."""
        template = load_prompt("nugget_assign_one", prompt_dir=self.prompt_dir)
        params = make_params(self.label_params, engine, None)
        jobs = [(i, k) for i in todo for k in range(len(items[i][2]))]
        requests = [LLMRequest(messages=template.messages(query=items[i][0],
                                                          answer=cut_text(items[i][1], self.max_answer_chars),
                                                          nugget=items[i][2][k]["text"]),
                               params=params, stop_plain=template.stop_plain) for i, k in jobs]
        chosen = ask_choices(engine, requests, ASSIGNMENTS, self.top_logprobs, desc="nugget assign (logprobs)")
        for (i, k), choice in zip(jobs, chosen):
            nugget = items[i][2][k]
            out[i].failed_windows += choice.label is None
            out[i].nuggets.append({"text": nugget["text"], "importance": nugget["importance"],
                                   "assignment": choice.label or "failed", "label_probabilities": choice.probabilities})


# -- the judge ------------------------------------------------------------------------------------------------
def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


def received_nuggets(judge: Judge, records: Sequence[AnswerRecord], ctx: EvalContext
                     ) -> tuple[list[TopicNuggets], AutoNuggetizer]:
    """A nugget judge's material: each record's topic in the run's one nugget set (`ctx.nuggets`, made by
    `rag.judge.run.evaluate_records` from `judge.nuggetizer`) and the AutoNuggetizer whose assignment it uses."""
    if ctx.nuggets is None or not isinstance(ctx.nuggetizer, AutoNuggetizer):
        raise ConfigError(f"judge.{judge.name} is scored against nuggets: it receives the run's nugget set from "
                          f"rag.judge.run.evaluate_records (with a judge.nuggetizer node), never builds its own")
    missing = TopicNuggets("", "", failure="no_passages")
    return [ctx.nuggets.get(r.id) or missing for r in records], ctx.nuggetizer


class NuggetJudge(Judge):
    """The AutoNuggetizer as a judge: assignment per answer against the run's nugget set, the four scores.

    Per-answer results go to `record.judges[<name>]`, declared as `nuggets/<score>` values and as the reference
    (the AutoNuggetizer's scores are what the LLM judges are compared with); run metrics are `nuggets/...`.
    Files: `nuggets/create.jsonl` and `nuggets/assign.jsonl` in the run folder, in castorini/nuggetizer's record
    shapes.
    """

    uses_nuggets = True

    def __init__(self, name: str = "nuggets", llm: Mapping[str, Any] | None = None):
        super().__init__(name, llm)

    @property
    def metric_prefix(self) -> str:
        return "nuggets/"

    def declaration(self) -> dict[str, Any]:
        return {"prefix": self.metric_prefix, "fields": list(SCORE_NAMES), "reference": True}

    def metric_specs(self) -> list[MetricSpec]:
        return [MetricSpec(f"nuggets/{n}/{{split}}", "per_answer", f"AutoNuggetizer {n} score, mean over scored "
                           "answers (unreadable assignments count as not supported)", (0.0, 1.0), True)
                for n in SCORE_NAMES]

    def evaluate(self, records: Sequence[AnswerRecord], engine: LLMEngine | None,
                 ctx: EvalContext) -> dict[str, Any]:
        if engine is None:
            raise ConfigError(f"judge.{self.name} needs an `llm`")
        sets, nuggetizer = received_nuggets(self, records, ctx)
        usable = [i for i, s in enumerate(sets) if s.failure is None]
        assigned = nuggetizer.assign(engine, [(records[i].question, records[i].answer, sets[i].nuggets)
                                              for i in usable])
        by_index = dict(zip(usable, assigned))
        assign_rows = []
        skipped = 0
        for i, (record, nset) in enumerate(zip(records, sets)):
            base = {"source": nset.source, "importance_failures": nset.importance_failures,
                    "create_failures": nset.create_failures}
            if nset.failure in ("no_passages", "not_in_nugget_file"):
                skipped += 1
                self.store(record, {**base, "skipped": True, "skip_reason": nset.failure})
                continue
            if nset.failure is not None:
                self.store(record, {**base, "parse_failed": True, "failure_stage": "create", "reason": nset.failure})
                continue
            result = by_index[i]
            # an unreadable assignment window keeps nuggetizer's "failed" label and scores as not supported
            # (as `calculate_nugget_scores` does): counted, and the answer stays in every mean, so a run with
            # more failures never gets a mean over other topics
            failed = {"failure_stage": "assign", "failed_windows": result.failed_windows} \
                if result.failed_windows else {}
            self.store(record, {**base, **nugget_scores(result.nuggets), "nugget_set": nset.identity,
                                "n_nuggets": len(result.nuggets),
                                "n_vital": sum(1 for n in result.nuggets if n["importance"] == "vital"),
                                **failed, "assignments": result.nuggets})
            assign_rows.append({"query": nset.query, "qid": nset.qid, "answer_text": record.answer,
                                "response_length": len(record.answer.split()), "run_id": ctx.run_dir.name,
                                "nuggets": result.nuggets})
        if skipped:
            log.warning("nuggets: %d of %d records have no passages (or no nuggets in nugget_file); skipped",
                        skipped, len(records))
        used = list({s.qid: s for s in sets if s.failure is None}.values())
        atomic_write_jsonl(ctx.run_dir / "nuggets" / "create.jsonl", [s.record() for s in used])
        atomic_write_jsonl(ctx.run_dir / "nuggets" / "assign.jsonl", assign_rows)
        out = self.summary(records, self.name)
        out["nuggets/skipped"] = skipped
        out["nuggets/cached_topics"] = sum(1 for s in used if s.cached)
        return out

    @staticmethod
    def summary(records: Sequence[AnswerRecord], name: str = "nuggets") -> dict[str, Any]:
        """Flat metrics `nuggets/...`: means over scored answers by split, and failure counts.

        An answer with unreadable assignment windows is scored (those nuggets count as not supported) and counted
        in `assign_failures`; a topic whose nuggets could not be created has nothing to score against and is
        counted in `create_failures`. `parse_failures` is both.
        """
        results = [(r, r.judges[name]) for r in records if isinstance(r.judges.get(name), Mapping)]
        scored = [(r, res) for r, res in results if not res.get("parse_failed") and "vital_strict" in res]
        out: dict[str, Any] = {"nuggets/n_scored": len(scored),
                               "nuggets/parse_failures": sum(1 for _, res in results if res.get("parse_failed")
                                                             or res.get("failure_stage") == "assign"),
                               "nuggets/create_failures": sum(1 for _, res in results
                                                              if res.get("failure_stage") == "create"),
                               "nuggets/assign_failures": sum(1 for _, res in results
                                                              if res.get("failure_stage") == "assign"),
                               "nuggets/importance_failures": sum(int(res.get("importance_failures", 0))
                                                                  for _, res in results)}
        for name in SCORE_NAMES:
            for split in SPLITS:
                values = [res[name] for r, res in scored if split_of(r, split)]
                out[f"nuggets/{name}/{split}"] = mean(values) if values else None
        counts = [res.get("n_nuggets", 0) for _, res in scored]
        out["nuggets/mean_nuggets_per_topic"] = mean(counts) if counts else None
        return out

    def report(self, metrics: Mapping[str, Any]) -> str:
        lines = ["## AutoNuggetizer", "",
                 f"scored topics: {metrics.get('nuggets/n_scored')}, parse failures: "
                 f"{metrics.get('nuggets/parse_failures')} (creation {metrics.get('nuggets/create_failures')}, "
                 f"assignment {metrics.get('nuggets/assign_failures')}), importance windows unreadable: "
                 f"{metrics.get('nuggets/importance_failures')}", "",
                 "| score | all | single-hop | multi-hop |", "|---|---|---|---|"]
        for name in SCORE_NAMES:
            lines.append(f"| {name} | " + " | ".join(_num(metrics.get(f"nuggets/{name}/{s}")) for s in SPLITS)
                         + " |")
        return "\n".join(lines) + "\n"
