"""Every metric the project writes, declared once: its name pattern, kind, range and direction.

`metrics.json`, the sweep summary, agreement, the W&B logger and the eval reports read this registry instead of
guessing from key names. A name pattern has `{placeholders}` (`recall/{stage}@{k}{mode}/{split}`); each
placeholder matches one path segment unless `PLACEHOLDERS` gives it a narrower expression. Specific entries
come before general ones, and the first match wins. A metric name that matches no entry is a bug: the test
`tests/eval/test_metric_registry.py` scans a real run's `metrics.json` against this list.

Kinds:
  per_answer  the mean over answers of a per-answer score (agreement pairs these)
  rate        a run-level share or throughput
  counter     bookkeeping: counts of calls, tokens, failures, cache hits (never ranked against quality)
  timing      wall-clock seconds
  correlation agreement between two evaluations over runs (sweep-summary only)
  identity    which ruler scored a run: a nugget-based judge's nugget set, a mapping (never a number, never ranked)
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

Kind = Literal["per_answer", "rate", "counter", "timing", "correlation", "identity"]
KINDS: tuple[str, ...] = ("per_answer", "rate", "counter", "timing", "correlation", "identity")

#: placeholder -> regular expression (default: one path segment)
PLACEHOLDERS: dict[str, str] = {
    "k": r"\d+",
    "mode": r"(?:_any|_all)?",
    "split": r"[A-Za-z0-9_.\-]+",
    "value": r"-?[A-Za-z0-9_.]+",
}
_SEGMENT = r"[^/]+"
_FIELD = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class MetricSpec:
    """One declared metric (or family of metrics sharing a name pattern)."""

    pattern: str
    kind: Kind
    description: str
    #: (low, high); None for an open end
    range: tuple[float | None, float | None] = (None, None)
    #: True: more is better; False: less is better (cost); None: not ranked (bookkeeping, distributions)
    higher_is_better: bool | None = None
    placeholders: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"metric {self.pattern!r}: unknown kind {self.kind!r} (known: {', '.join(KINDS)})")

    @cached_property
    def regex(self) -> re.Pattern[str]:
        parts, pos = [], 0
        for m in _FIELD.finditer(self.pattern):
            parts.append(re.escape(self.pattern[pos:m.start()]))
            name = m.group(1)
            expr = self.placeholders.get(name) or PLACEHOLDERS.get(name, _SEGMENT)
            parts.append(f"(?P<{name}>{expr})")
            pos = m.end()
        parts.append(re.escape(self.pattern[pos:]))
        return re.compile("".join(parts))

    def match(self, name: str) -> dict[str, str] | None:
        m = self.regex.fullmatch(name)
        return None if m is None else m.groupdict()

    def in_range(self, value: float) -> bool:
        lo, hi = self.range
        if isinstance(value, float) and math.isnan(value):
            return True  # undefined values (NaN) are allowed; they are never out of range
        return (lo is None or value >= lo - 1e-9) and (hi is None or value <= hi + 1e-9)

    @property
    def ranked(self) -> bool:
        """Whether a "best" value makes sense (quality, cost); bookkeeping is never ranked."""
        return self.higher_is_better is not None


class MetricRegistry:
    """An ordered list of specs; judges and other components may declare more specific ones at run time."""

    def __init__(self, specs: Iterable[MetricSpec] = ()):
        self._specs: list[MetricSpec] = []
        self._cache: dict[str, MetricSpec | None] = {}
        for spec in specs:
            self.declare(spec)

    def declare(self, spec: MetricSpec, first: bool = False, replace: bool = False) -> MetricSpec:
        """Add a spec (a more specific one goes `first`). Declaring a pattern again with other settings is an
        error, unless `replace` (a judge rebuilt from a changed YAML in the same process)."""
        for i, known in enumerate(self._specs):
            if known.pattern == spec.pattern:
                if known == spec:
                    return known
                if not replace:
                    raise ValueError(f"metric {spec.pattern!r} declared twice with different settings")
                self._specs[i] = spec
                self._cache.clear()
                return spec
        if first:
            self._specs.insert(0, spec)
        else:
            self._specs.append(spec)
        self._cache.clear()
        return spec

    @property
    def specs(self) -> list[MetricSpec]:
        return list(self._specs)

    def lookup(self, name: str) -> MetricSpec | None:
        if name not in self._cache:
            self._cache[name] = next((s for s in self._specs if s.match(name) is not None), None)
        return self._cache[name]

    def spec(self, name: str) -> MetricSpec:
        """The spec of `name`, or a KeyError naming the metric (undeclared metrics are bugs)."""
        found = self.lookup(name)
        if found is None:
            raise KeyError(f"metric {name!r} is not declared in rag/metrics/registry.py")
        return found

    def undeclared(self, names: Iterable[str]) -> list[str]:
        return [n for n in names if self.lookup(n) is None]

    def out_of_range(self, metrics: dict[str, object]) -> list[str]:
        """Names whose numeric value lies outside their declared range."""
        bad = []
        for name, value in metrics.items():
            spec = self.lookup(name)
            if spec is not None and isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and not spec.in_range(float(value)):
                bad.append(name)
        return bad

    def kind(self, name: str) -> str | None:
        spec = self.lookup(name)
        return spec.kind if spec else None

    def direction(self, name: str) -> int:
        """+1 higher is better, -1 lower is better, 0 not ranked or undeclared."""
        spec = self.lookup(name)
        if spec is None or spec.higher_is_better is None:
            return 0
        return 1 if spec.higher_is_better else -1


def _s(pattern: str, kind: Kind, description: str, range: tuple[float | None, float | None] = (None, None),
       higher_is_better: bool | None = None, **placeholders: str) -> MetricSpec:
    return MetricSpec(pattern, kind, description, range, higher_is_better, placeholders)


UNIT = (0.0, 1.0)
NONNEG = (0.0, None)
#: ir-measures' measure families whose values lie in [0, 1] (with parameters and a cutoff: `P(rel=2)@10`)
IR_UNIT_MEASURES = (r"(?:nDCG|RR|R|P|AP|Judged|Success|Bpref|infAP|Rprec|SetP|SetR|SetF|SetAP|ERR|alpha_nDCG|"
                    r"nERR_IA|NERR\d*|IPrec|RBP|SDCG|Compat|AP_IA|P_IA|nDCG_IA)(?:\([^/]*\))?(?:@\d+)?")
USAGE = "llm_calls|llm_retries|llm_cache_hits|prompt_tokens|completion_tokens|llm_cost_usd"

#: the project's metrics, specific entries first
BUILTIN: tuple[MetricSpec, ...] = (
    # -- answers and retrieval (rag/pipeline.py metrics()) --
    _s("answer/{metric}/{split}", "per_answer", "answer string metric vs the gold answer (token F1, exact match), "
       "mean over answers with a gold answer", UNIT, True, metric="f1|em"),
    _s("recall/used{mode}/{split}", "per_answer", "share of gold documents among the passages an answer was "
       "written from (the prompt's, or every passage a multi-step strategy's own searches returned; _any, _all "
       "as for recall@k), mean over questions with gold documents", UNIT, True),
    _s("passages/used/{split}", "counter", "passages an answer was written from (the prompt's, or every "
       "passage a multi-step strategy's searches returned), mean over questions with gold documents", NONNEG,
       None),
    _s("recall/{stage}@{k}{mode}/{split}", "per_answer", "share of gold documents in the top k of a stage "
       "(_any: at least one found, _all: all found), mean over questions with gold documents", UNIT, True),
    _s("ir/{stage}/{measure}/{split}", "per_answer", "a trec_eval measure (ir-measures' name: nDCG@10, RR@10, "
       "R@100, AP, Judged@10...) of a stage's list against the judgments, mean over judged questions",
       UNIT, True, stage="retrieval|rerank", measure=IR_UNIT_MEASURES),
    _s("ir/{stage}/{count}/{split}", "counter", "a trec_eval count (queries, retrieved, relevant, relevant "
       "retrieved) of a stage's list, mean over judged questions", NONNEG, None, stage="retrieval|rerank",
       count=r"Num(?:Q|Ret|Rel|RelRet)(?:\([^/]*\))?(?:@\d+)?"),
    _s("ir/{stage}/{other}/{split}", "per_answer", "another ir-measures measure of a stage's list, mean over "
       "judged questions", (None, None), True, stage="retrieval|rerank"),
    _s("citation/{metric}/{split}", "per_answer", "citations of the answer's sentences against the gold documents "
       "(our gold-document variant of ALCE's citation precision / recall; rag/metrics/citation.py): share of "
       "citations naming a gold document, share of sentences citing one, share of sentences citing anything",
       UNIT, True, metric="gold_precision|gold_recall|coverage"),
    # -- bookkeeping of the run --
    _s("n_questions", "counter", "questions in the run", NONNEG),
    _s("retrieval_depth", "counter", "passages the retrieve stage fetched per question (the largest k the run or "
       "its sweep needs, at most the corpus); what its latency is paid for", NONNEG),
    _s("n_{split}", "counter", "questions in a split (all, single-hop, multi-hop)", NONNEG),
    _s("gold_docs", "counter", "gold documents over all questions", NONNEG),
    _s("gold_docs_missing_from_corpus", "counter", "gold documents the corpus lacks (recall can never reach 1)",
       NONNEG),
    _s("query/fallbacks", "counter", "query-stage outputs that fell back to the question as asked", NONNEG, False),
    _s("query/questions_fell_back", "counter", "questions with at least one query-stage fallback", NONNEG, False),
    _s("query/fallback_rate", "rate", "share of questions with a query-stage fallback", (0.0, 1.0), False),
    _s("compress/ratio", "rate", "words of the passages the generator read over their words before "
       "compression, mean over answers (compress=...; rag/compress/)", NONNEG, None),
    _s("parse_failures", "counter", "answers whose generator output could not be parsed", NONNEG, False),
    _s("unscored/{metric}", "counter", "answers a configured metric could not score (no gold answer, no "
       "judgments, no attack target): its column is absent because nothing was measured, and this says so",
       NONNEG, None, metric=r".+"),
    _s("empty_answers", "counter", "answers an LLM generator left empty (failure=empty_answer; generated again "
       "on resume)", NONNEG, False),
    _s("llm_empty_completions", "counter", "completions still empty after re-asking (never cached)", NONNEG,
       False),
    _s("fallbacks", "counter", "answers produced by a generator's fallback path", NONNEG, False),
    _s("retrieval_calls", "counter", "questions sent to the retriever (cache misses)", NONNEG, False),
    _s("rerank_calls", "counter", "questions sent to the reranker (cache misses)", NONNEG, False),
    _s("retrieval_cache_hits", "counter", "retrieval results read from the stage cache", NONNEG),
    _s("rerank_cache_hits", "counter", "rerank results read from the stage cache", NONNEG),
    _s("model_loads", "counter", "models loaded into memory during the run", NONNEG, False),
    _s("engines_released", "counter", "engines closed to free memory before the generator's loaded "
       "(generation.release_reranker)", NONNEG, False),
    # -- generation cost (the generator's engine), and evaluation cost apart from it --
    _s("llm_calls", "counter", "generation requests answered by the backend (not the cache)", NONNEG, False),
    _s("llm_retries", "counter", "extra attempts of generation requests (timeouts, rate limits): work too",
       NONNEG, False),
    _s("llm_cache_hits", "counter", "generation requests answered by the response cache", NONNEG),
    _s("prompt_tokens", "counter", "prompt tokens of real generation calls", NONNEG, False),
    _s("completion_tokens", "counter", "completion tokens of real generation calls", NONNEG, False),
    _s("llm_seconds", "timing", "seconds in the generation backend", NONNEG, False),
    _s("llm_tokens_per_s", "rate", "generation throughput (prompt + completion tokens per backend second)",
       NONNEG, True),
    _s("llm_cost_usd", "counter", "dollars spent on hosted generation calls", NONNEG, False),
    _s("wasted/{counter}", "counter", "work of executions stopped before finishing the folder (SIGTERM, "
       "preemption, a failure) after their last kept answer: done, never used (rag.folders.RunFolder.record_work)",
       NONNEG, False),
    _s("eval/{usage}", "counter", "the same usage counters for judge and nugget LLM calls (eval/llm_calls, "
       "eval/llm_retries, eval/prompt_tokens, ...), apart from generation", NONNEG, False, usage=USAGE),
    _s("eval/llm_seconds", "timing", "seconds in the judges' LLM backends, apart from generation", NONNEG, False),
    _s("eval/engines_released", "counter", "engines closed to free memory before a judge model loaded", NONNEG),
    # -- timing --
    _s("time/{stage}_s", "timing", "wall seconds of a stage (load, index, retrieve, rerank, generate, evaluate)"
       " or of the whole run (total)", NONNEG, False),
    _s("latency/{name}", "timing", "latency figures in seconds (e.g. per question)", NONNEG, False),
    # -- LLM rerankers (Rank-R1) --
    _s("rerank/seconds_per_question", "timing", "LLM reranker seconds per question", NONNEG, False),
    _s("rerank/seconds", "timing", "LLM reranker seconds", NONNEG, False),
    _s("rerank/parse_failures", "counter", "LLM reranker outputs that named no valid passage", NONNEG, False),
    _s("rerank/{stat}", "counter", "LLM reranker bookkeeping (questions, steps, calls, tokens)", NONNEG),
    # -- LLM judges (eval/judges.py): <field> is a judge's numeric field --
    _s("judge/{judge}/n_judged", "counter", "answers the judge returned a result for", NONNEG),
    _s("judge/{judge}/parse_failures", "counter", "answers whose judge output stayed unreadable after the "
       "re-asks (never scored)", NONNEG, False),
    _s("judge/{judge}/skipped_no_gold", "counter", "answers (or fields) skipped for lack of a gold answer",
       NONNEG),
    _s("judge/{judge}/skipped_no_passages", "counter", "answers whose passage-based fields (faithfulness) are "
       "undefined: the answer had no retrieved passages", NONNEG),
    _s("judge/{judge}/{field}_n", "counter", "answers that have a value for the field", NONNEG),
    _s("judge/{judge}/{field}_share_{value}/{split}", "rate", "share of scored answers at one value of a field "
       "(RAGtifier Table 1 layout)", UNIT),
    _s("judge/{judge}/{field}/{split}", "per_answer", "mean of a judge's per-answer score", (None, None), True),
    # -- the nugget set each nugget-based judge scored with (rag/judge/nugget_sets.py) --
    _s("judge/{judge}/nugget_set", "identity", "the nugget set the judge scored the run's answers against: "
       "{identity, source, topics: {qid: identity}}; the summary ranks cells only where these agree"),
    _s("{judge}/nugget_set", "identity", "the nugget set a nugget-based judge (nuggets, argue, crucible) scored the "
       "run's answers against: {identity, source, topics: {qid: identity}}; the summary ranks cells only where "
       "these agree"),
    # -- AutoNuggetizer (eval/nuggets.py) --
    _s("nuggets/{metric}/{split}", "per_answer", "AutoNuggetizer score (Vital Strict is the primary), mean over "
       "scored answers", UNIT, True, metric="vital_strict|all_strict|vital|all"),
    _s("nuggets/mean_nuggets_per_topic", "rate", "nuggets per scored topic", NONNEG),
    _s("nuggets/{count}", "counter", "AutoNuggetizer bookkeeping", NONNEG,
       count="n_scored|parse_failures|create_failures|assign_failures|importance_failures|skipped|cached_topics"),
    # -- ARGUE (eval/argue.py) and Crucible's answer metrics on its flow (eval/crucible_metrics.py), declared here
    # so that a sweep summary in a fresh process ranks them without building the judges --
    _s("argue/{metric}/{split}", "per_answer", "ARGUE answer metric (Auto-ARGUE's definitions), mean over scored "
       "answers (eval/README.md)", UNIT, True, metric="nugget_recall|sentence_precision|citation_support|f1"),
    _s("argue/{count}", "counter", "ARGUE evaluation bookkeeping", NONNEG,
       count="n_scored|uncited_answers|skipped|parse_failures"),
    _s("crucible/{metric}/{split}", "per_answer", "Crucible answer metric, mean over scored answers "
       "(eval/README.md)", UNIT, True,
       metric="nugget_recall|nugget_density|sentence_novelty|relevant_sentences|citation_support"),
    _s("crucible/{count}", "counter", "Crucible evaluation bookkeeping", NONNEG,
       count="n_scored|uncited_answers|skipped|parse_failures"),
    # -- judge noise (rag/judge/repeats.py, judge.repeats=N): <evaluation> is a judge's per-answer evaluation --
    _s("noise/{evaluation}/alpha", "correlation", "Krippendorff's alpha of a judge's repeated verdicts on the same "
       "answers (self-agreement)", (-1.0, 1.0), None, evaluation=r".+"),
    _s("noise/{evaluation}/{stat}", "rate", "spread of a judge's repeated verdicts: mean per-answer sd, share of "
       "answers whose verdict changed, sd of the run mean over repeats", NONNEG, None, evaluation=r".+",
       stat="answer_sd|changed|run_mean_sd"),
    _s("noise/{evaluation}/repeats", "counter", "judgements per answer (judge.repeats)", NONNEG, None,
       evaluation=r".+"),
    # -- search loops (rag/generate/search_loop.py: ircot, search_o1, search_r1) --
    _s("loop/budget_stops/{budget}", "counter", "questions a search loop's budget forced to answer",
       NONNEG, False, budget="max_searches|max_generated_tokens|max_seconds|max_turns"),
    _s("loop/budget_stop_rate", "rate", "share of questions a search loop's budget forced to answer", UNIT, False),
    _s("loop/{count}_per_question", "counter", "searches (retrieval calls) or reasoning turns of a search loop, "
       "mean per question", NONNEG, None, count="searches|turns"),
    # -- generation consistency (rag/generate/repeats.py, generation.repeats=N): <score> is a per-answer score --
    _s("consistency/repeats", "counter", "answers drawn per question (generation.repeats)", NONNEG),
    _s("consistency/answer_changed", "rate", "share of questions whose answer text changed across the repeats",
       UNIT, None),
    _s("consistency/{usage}", "counter", "LLM work of the repeated answers, apart from the run's own", NONNEG,
       False, usage="llm_calls|prompt_tokens|completion_tokens"),
    _s("consistency/eval/{usage}", "counter", "the judges' LLM work on the repeated answers, apart from the run's "
       "own judging", NONNEG, False, usage="llm_calls|llm_cache_hits|prompt_tokens|completion_tokens"),
    _s("consistency/{score}/run_mean_cv", "rate", "coefficient of variation of the run mean over the repeats",
       (None, None), None, score=r".+"),
    _s("consistency/{score}/{stat}", "rate", "spread of a per-answer score over repeated answers: mean per-question "
       "sd, share of questions whose score changed, sd of the run mean over repeats", NONNEG, None, score=r".+",
       stat="answer_sd|changed|run_mean_sd"),
    # -- agreement (the sweep summary's W&B run) --
    _s("agreement/{judge}/{field}/{nugget}/{stat}", "correlation", "Kendall tau-b / tau_ap_a (the key names its "
       "reference side) / tau_ap_b (and CI bounds) "
       "between a judge field and a nugget metric over the sweep's runs", (-1.0, 1.0), None,
       stat="|".join(f"{s}{b}" for s in ("tau_b", "tau_ap_a_ref_nuggets", "tau_ap_a_ref_judge",
                                          "tau_ap_b", "tau_topic") for b in ("", "_lo", "_hi"))),
    _s("agreement/{judge}/{field}/{nugget}/{count}", "counter", "runs and topics behind an agreement cell",
       NONNEG, None, count="n_runs|n_topics|n_topics_dropped"),
    _s("n_cells", "counter", "cells of a sweep", NONNEG),
    _s("n_complete", "counter", "complete cells of a sweep", NONNEG),
)

#: the process-wide registry
REGISTRY = MetricRegistry(BUILTIN)


def spec(name: str) -> MetricSpec:
    return REGISTRY.spec(name)


def lookup(name: str) -> MetricSpec | None:
    return REGISTRY.lookup(name)


def direction(name: str) -> int:
    return REGISTRY.direction(name)


def kind(name: str) -> str | None:
    return REGISTRY.kind(name)
