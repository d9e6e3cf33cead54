"""ARGUE's sentence flow and its metrics, for any strategy's answers (`judge=argue`).

Source: Mayfield et al., "On the Evaluation of Machine-Generated Reports" (ARGUE, SIGIR 2024), as automated by
Walden et al., "Auto-ARGUE: LLM-Based Report Generation Evaluation" (arXiv 2509.26184; hltcoe/auto-argue), the
evaluator Crucible's paper reports with. Every sentence of an answer goes through one path of binary judgments:

- cited sentence: does *every* cited passage support it? If any does not, the sentence is penalised. If all do,
  it is rewarded once for each nugget it answers (ignored when it answers none). Only such sentences earn nugget
  credit.
- uncited sentence:
  - a negative assertion ("X has not been reported") is rewarded when a nugget confirms it, else penalised;
  - otherwise, a claim that needs a citation is penalised the first time it is made and ignored when an earlier
    sentence made it;
  - anything else (introductions, transitions) is ignored.

Per answer, with N the question's nuggets and C the nuggets credited by rewarded sentences:

- nugget_recall      = |C| / |N|                 (ARGUE nugget recall; Auto-ARGUE "nugget coverage")
- sentence_precision = correct / judged          (ARGUE sentence precision as Auto-ARGUE computes "sentence
  support": judged = cited sentences, uncited negative assertions and uncited first claims needing a citation;
  correct = cited sentences supported by all their citations and confirmed negative assertions)
- citation_support   = supporting citations / citations  (Auto-ARGUE "citation support"; 0 without citations)
- f1                 = harmonic mean of nugget_recall and sentence_precision  (Auto-ARGUE "f1")

Sentence precision is 0 when no sentence is judged, as in Auto-ARGUE. A decision the judge model could not give
in a readable form (after the re-asks) is the least favourable one: the sentence is penalised and earns no
credit, and the decision is counted in `parse_failures`, so a failure can only lower a score. An unreadable
nugget-matching window matches nothing (as nuggetizer scores it). Crucible's five columns are defined on the same
flow (`eval.crucible_metrics`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Any

from eval.judges import EVAL_PROMPT_DIR
from eval.nuggets import AutoNuggetizer, received_nuggets
from rag.core.errors import ConfigError
from rag.core.io import atomic_write_jsonl
from rag.core.parsing import parse_fields
from rag.core.text import marked_sentences
from rag.judge.base import SPLITS, EvalContext, Judge, split_of
from rag.judge.nugget_sets import TopicNuggets
from rag.llm.asking import ask_choices, ask_with_retries, make_params
from rag.llm.base import LLMEngine, LLMRequest
from rag.metrics.registry import BUILTIN, MetricSpec
from rag.prompts import load_prompt
from rag.records import AnswerRecord

log = logging.getLogger(__name__)

ARGUE_METRICS = ("nugget_recall", "sentence_precision", "citation_support", "f1")
#: how a YES/NO judgment is read: "text" parses the reply (JSON {"answer": ...} or a bare YES/NO, re-asked when
#: unreadable); "logprobs" takes the more likely of the two first tokens
DECISION_MODES = ("text", "logprobs")
YES_NO_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "enum": ["YES", "NO"]}},
                 "required": ["answer"], "additionalProperties": False}
#: how a marker beyond the answer's passages is recorded as a citation (it supports nothing: the sentence is
#: penalised, as for a cited passage that does not support it)
INVALID_CITATION = "invalid:[{n}]"
_BARE = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)


def parse_yes_no(text: str) -> bool | None:
    """True for YES, False for NO: a JSON {"answer": ...}, an `answer: ...` line, or a reply starting with the word."""
    fields = parse_fields(text, {"answer": ["yes", "no"]})
    if fields is not None:
        return fields["answer"] == "yes"
    m = _BARE.match(text or "")
    return None if m is None else m.group(1).lower() == "yes"


# -- one answer's sentences -----------------------------------------------------------------------------------
def answer_sentences(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """[{text, citations: [doc_id], passages: [passage text or "" when the run never saw it]}] for any strategy:
    Crucible and GINGER records carry `sentences`; other answers are split into sentences and their `[n]` passage
    markers read as citations (`rag.core.text.marked_sentences`, as the TREC export reads them). A marker beyond the answer's passages (`[7]` of 5) is
    an invalid citation (`INVALID_CITATION`, no passage text): it is never asked about and counts as not
    supporting, so its sentence is penalised and citation support counts it."""
    passages = record.get("passages") or []
    context = record.get("context") or []
    by_pid = {pid: p for pid, p in zip(context, passages)}

    def by_doc(doc_id: str) -> str:
        for p in passages:
            if doc_id in (p.get("doc_IDs") or []):
                return p.get("passage", "")
        return ""

    if record.get("sentences") is not None:
        out = []
        for s in record["sentences"]:
            cites = list(s.get("citations") or [])
            pid = s.get("passage_id")
            texts = [by_pid[pid]["passage"]] * len(cites) if pid in by_pid and cites else [by_doc(d) for d in cites]
            out.append({"text": s["text"], "citations": cites, "passages": texts})
        return out
    out = []
    for text, labels in marked_sentences(record.get("answer") or ""):
        citations, texts = [], []
        for n in labels:
            if 1 <= n <= len(passages):
                citations.append((passages[n - 1].get("doc_IDs") or [""])[0])
                texts.append(passages[n - 1].get("passage", ""))
            else:  # `[7]` of 5 passages: a citation of nothing the answer had, which supports nothing
                citations.append(INVALID_CITATION.format(n=n))
                texts.append("")
        out.append({"text": text, "citations": citations, "passages": texts})
    return out


# -- the flow -------------------------------------------------------------------------------------------------
@dataclass
class JudgedSentence:
    """One sentence and the judgments its ARGUE path asked for (None: not asked, or unreadable where `failed`)."""

    text: str
    citations: list[str] = field(default_factory=list)
    #: per cited passage: True supports the sentence, False does not, None unreadable
    attested: list[bool | None] = field(default_factory=list)
    negative: bool | None = None
    needs_citation: bool | None = None
    first_instance: bool | None = None
    #: indices into the question's nuggets that the sentence answers (asked only where the path needs it)
    matched: set[int] = field(default_factory=set)
    #: decisions on this sentence's path that stayed unreadable
    failed: int = 0


@dataclass(frozen=True)
class Outcome:
    """Where a sentence's path ends: ARGUE's reward / penalty / ignore, the nuggets it earns, and how sentence
    precision counts it."""

    verdict: str
    credited: frozenset[int]
    #: counted in sentence precision's denominator
    judged: bool
    #: counted in its numerator
    correct: bool
    step: str


def sentence_outcome(s: JudgedSentence) -> Outcome:
    """ARGUE's decision flow for one sentence (module docstring); an unreadable decision on the path penalises."""
    none: frozenset[int] = frozenset()
    if s.citations:
        if not s.attested or any(a is not True for a in s.attested):
            step = "citation unreadable" if any(a is None for a in s.attested) else "citation does not support"
            return Outcome("penalty", none, True, False, step)
        if s.matched:
            return Outcome("reward", frozenset(s.matched), True, True, "supported, answers nuggets")
        return Outcome("ignore", none, True, True, "supported, answers no nugget")
    if s.negative is None:
        return Outcome("penalty", none, True, False, "negative-assertion check unreadable")
    if s.negative:
        if s.matched:
            return Outcome("reward", frozenset(s.matched), True, True, "negative assertion confirmed by a nugget")
        return Outcome("penalty", none, True, False, "negative assertion no nugget confirms")
    if s.needs_citation is None:
        return Outcome("penalty", none, True, False, "needs-citation check unreadable")
    if not s.needs_citation:
        return Outcome("ignore", none, False, False, "needs no citation")
    if s.first_instance is None:
        return Outcome("penalty", none, True, False, "first-instance check unreadable")
    if s.first_instance:
        return Outcome("penalty", none, True, False, "uncited claim, first instance")
    return Outcome("ignore", none, False, False, "uncited claim made before")


def argue_scores(sentences: Sequence[JudgedSentence], n_nuggets: int) -> dict[str, float]:
    """ARGUE's per-answer metrics (module docstring); `n_nuggets` = |N| > 0."""
    if n_nuggets <= 0:
        raise ValueError("argue_scores needs at least one nugget (|N| > 0)")
    outcomes = [sentence_outcome(s) for s in sentences]
    credited = set().union(*(o.credited for o in outcomes)) if outcomes else set()
    judged = sum(o.judged for o in outcomes)
    recall = len(credited) / n_nuggets
    precision = sum(o.correct for o in outcomes) / judged if judged else 0.0
    citations = [a for s in sentences for a in s.attested]
    return {"nugget_recall": recall, "sentence_precision": precision,
            "citation_support": sum(a is True for a in citations) / len(citations) if citations else 0.0,
            "f1": 2 * recall * precision / (recall + precision) if recall + precision else 0.0}


@dataclass
class JudgedAnswer:
    """One answer after the flow: its sentences, the nugget set they were matched against."""

    sentences: list[JudgedSentence]
    nuggets: TopicNuggets

    @property
    def parse_failures(self) -> int:
        return sum(s.failed for s in self.sentences)

    def details(self) -> list[dict[str, Any]]:
        out = []
        for s in self.sentences:
            o = sentence_outcome(s)
            out.append({"text": s.text, "citations": s.citations, "attested": s.attested, "negative": s.negative,
                        "needs_citation": s.needs_citation, "first_instance": s.first_instance,
                        "matched": sorted(s.matched), "credited": sorted(o.credited), "verdict": o.verdict,
                        "step": o.step, "failed": s.failed})
        return out


class ArgueFlow:
    """Runs ARGUE's judgments for a batch of answers: each step is one engine batch over every sentence of every
    answer that reaches it (plus batched re-asks in text mode), then nugget matching where the path needs it."""

    def __init__(self, decisions: str = "text", params: Mapping[str, Any] | None = None,
                 count_partial_nugget: bool = False, max_passage_chars: int = 2000, max_previous: int = 10,
                 max_retries: int = 2, retry_temperature: float = 0.2, top_logprobs: int = 20,
                 prompt_dir: str | None = None):
        if decisions not in DECISION_MODES:
            raise ConfigError(f"decisions={decisions!r}: one of {', '.join(DECISION_MODES)}")
        self.decisions = decisions
        self.params = dict(params or {"temperature": 0.0, "max_tokens": 16})
        #: count partial_support as answering a nugget (default strict: support only)
        self.count_partial_nugget = count_partial_nugget
        self.max_passage_chars = max_passage_chars
        #: earlier sentences shown to the first-instance check (the most recent ones)
        self.max_previous = max_previous
        self.max_retries, self.retry_temperature = max_retries, retry_temperature
        self.top_logprobs = top_logprobs
        self.prompt_dir = str(prompt_dir or EVAL_PROMPT_DIR)

    def decide(self, engine: LLMEngine, prompt: str, items: Sequence[Mapping[str, Any]], desc: str
               ) -> list[bool | None]:
        """One YES/NO judgment per item (the prompt's variables), all in one batch."""
        if not items:
            return []
        template = load_prompt(prompt, prompt_dir=self.prompt_dir)
        if self.decisions == "logprobs":
            params = make_params(self.params, engine, None)
            requests = [LLMRequest(messages=template.messages(**v), params=params, stop_plain=template.stop_plain)
                        for v in items]
            return [None if c.label is None else c.label == "yes"
                    for c in ask_choices(engine, requests, ("yes", "no"), self.top_logprobs, desc=desc)]
        params = make_params(self.params, engine, YES_NO_SCHEMA)
        requests = [LLMRequest(messages=template.messages(**v), params=params, stop_plain=template.stop_plain)
                    for v in items]
        return [r.value for r in ask_with_retries(engine, requests, lambda _i, text: parse_yes_no(text),
                                                  self.max_retries, self.retry_temperature, desc=desc)]

    def run(self, engine: LLMEngine, records: Sequence[AnswerRecord], sets: Sequence[TopicNuggets],
            nuggetizer: AutoNuggetizer) -> list[JudgedAnswer | TopicNuggets]:
        """Per record: its judged answer against its topic's nuggets (`sets`, the run's one nugget set), or the
        topic's failed nuggets (`failure` says why it cannot be scored). Sentence-nugget matches use
        `nuggetizer`'s assignment settings."""
        rows = [r.to_json() for r in records]
        usable = [i for i, s in enumerate(sets) if s.failure is None]
        raw = {i: answer_sentences(rows[i]) for i in usable}
        judged = {i: [JudgedSentence(s["text"], s["citations"]) for s in raw[i]] for i in usable}
        cut = self.max_passage_chars

        # step 1: the citation check of cited sentences, the negative-assertion check of the others
        cites = [(i, j, k) for i in usable for j, s in enumerate(raw[i]) for k in range(len(s["citations"]))]
        seen = [(i, j, k) for i, j, k in cites if raw[i][j]["passages"][k].strip()]
        verdicts = dict(zip(seen, self.decide(engine, "argue_attest", [
            {"sentence": raw[i][j]["text"], "passage": raw[i][j]["passages"][k][:cut]} for i, j, k in seen],
            "argue citation check")))
        for i, j, k in cites:
            # a citation of a document the run never retrieved cannot support the sentence (not asked)
            judged[i][j].attested.append(verdicts.get((i, j, k), False))
        uncited = [(i, j) for i in usable for j, s in enumerate(judged[i]) if not s.citations]
        for (i, j), value in zip(uncited, self.decide(engine, "argue_negative", [
                {"sentence": judged[i][j].text} for i, j in uncited], "argue negative assertion")):
            judged[i][j].negative = value

        # step 2: nugget matching where the path rewards; the needs-citation check of uncited claims
        matching = [(i, j) for i in usable for j, s in enumerate(judged[i])
                    if (s.citations and s.attested and all(a is True for a in s.attested)) or s.negative]
        assigned = nuggetizer.assign(engine, [(records[i].question, judged[i][j].text, sets[i].nuggets)
                                              for i, j in matching])
        hits = ("support", "partial_support") if self.count_partial_nugget else ("support",)
        for (i, j), a in zip(matching, assigned):
            judged[i][j].matched = {k for k, n in enumerate(a.nuggets) if n["assignment"] in hits}
            judged[i][j].failed += a.failed_windows
        claims = [(i, j) for i, j in uncited if judged[i][j].negative is False]
        for (i, j), value in zip(claims, self.decide(engine, "argue_needs_citation", [
                {"query": records[i].question, "sentence": judged[i][j].text} for i, j in claims],
                "argue needs citation")):
            judged[i][j].needs_citation = value

        # step 3: first instance of uncited claims that need a citation (the first sentence is one by definition)
        firsts = [(i, j) for i, j in claims if judged[i][j].needs_citation]
        asked = [(i, j) for i, j in firsts if j > 0]
        answers = dict(zip(asked, self.decide(engine, "argue_first_instance", [
            {"sentence": judged[i][j].text,
             "previous": "\n".join(s.text for s in judged[i][max(0, j - self.max_previous):j])} for i, j in asked],
            "argue first instance")))
        for i, j in firsts:
            judged[i][j].first_instance = answers.get((i, j), True)

        for i in usable:
            for s in judged[i]:
                s.failed += sum(a is None for a in s.attested) + sum(
                    v is None for v, asked_ in ((s.negative, not s.citations),
                                                (s.needs_citation, s.negative is False),
                                                (s.first_instance, bool(s.needs_citation))) if asked_)
        return [JudgedAnswer(judged[i], sets[i]) if i in judged else sets[i] for i in range(len(records))]


# -- the judge ------------------------------------------------------------------------------------------------
class FlowJudge(Judge):
    """A judge whose per-answer values are computed from ARGUE's flow: `score(answer)` names them (`fields`)."""

    fields: tuple[str, ...] = ()
    uses_nuggets = True

    def __init__(self, name: str, llm: Mapping[str, Any] | None = None, **options: Any):
        super().__init__(name, llm)
        self.flow = ArgueFlow(**options)  # a misspelt setting fails when the judge is built

    @property
    def metric_prefix(self) -> str:
        return f"{self.name}/"

    def declaration(self) -> dict[str, Any]:
        return {"prefix": self.metric_prefix, "fields": list(self.fields)}

    def metric_specs(self) -> list[MetricSpec]:
        """Under the default name, the registry's static entries (`rag.metrics.registry.BUILTIN`: a sweep summary
        in a fresh process ranks them without building the judge); under another name, the same for that name."""
        builtin = [s for s in BUILTIN if s.pattern.startswith(self.metric_prefix)]
        if builtin:
            return builtin
        return [MetricSpec(f"{self.name}/{{metric}}/{{split}}", "per_answer", f"{type(self).__name__} answer "
                           "metric, mean over scored answers (eval/README.md)", (0.0, 1.0), True,
                           {"metric": "|".join(self.fields)}),
                MetricSpec(f"{self.name}/{{count}}", "counter", f"{type(self).__name__} bookkeeping", (0.0, None),
                           None, {"count": "n_scored|uncited_answers|skipped|parse_failures"})]

    def score(self, answer: JudgedAnswer) -> dict[str, float]:
        raise NotImplementedError

    def evaluate(self, records: Sequence[AnswerRecord], engine: LLMEngine | None,
                 ctx: EvalContext) -> dict[str, Any]:
        if engine is None:
            raise ConfigError(f"judge.{self.name} needs an `llm`")
        sets, nuggetizer = received_nuggets(self, records, ctx)
        results = self.flow.run(engine, records, sets, nuggetizer)
        for record, result in zip(records, results):
            if isinstance(result, TopicNuggets):
                self.store(record, {"skipped": True, "skip_reason": result.failure, "source": result.source})
                continue
            values = self.score(result)
            verdicts = [sentence_outcome(s).verdict for s in result.sentences]
            self.store(record, {**values, "nugget_set": result.nuggets.identity, "source": result.nuggets.source,
                                "uncited": not any(s.citations for s in result.sentences),
                                "n_sentences": len(result.sentences), "n_nuggets": len(result.nuggets.nuggets),
                                "rewarded": verdicts.count("reward"), "penalized": verdicts.count("penalty"),
                                "parse_failures": result.parse_failures, "sentences": result.details()})
        folder = Path(ctx.run_dir) / self.name
        atomic_write_jsonl(folder / "scores.jsonl", [{"id": r.id, "generator": r.generator, **r.judges[self.name]}
                                                     for r in records])
        atomic_write_jsonl(folder / "nuggets.jsonl", list({r.nuggets.qid: r.nuggets.record() for r in results
                                                           if isinstance(r, JudgedAnswer)}.values()))
        uncited = [r.id for r in records if r.judges[self.name].get("uncited")]
        if uncited:
            log.info("%s: %d answers cite nothing: %s", self.name, len(uncited), ", ".join(map(str, uncited)))
        return flow_summary(records, self.name, self.fields)


def flow_summary(records: Sequence[AnswerRecord], name: str, fields: Sequence[str]) -> dict[str, Any]:
    """`<name>/<field>/<split>` means over scored answers, and the judge's counters."""
    results = [(r, r.judges[name]) for r in records if isinstance(r.judges.get(name), Mapping)]
    scored = [(r, res) for r, res in results if not res.get("skipped")]
    out: dict[str, Any] = {}
    for split in SPLITS:
        rows = [res for r, res in scored if split_of(r, split)]
        for metric in fields:
            if rows:
                out[f"{name}/{metric}/{split}"] = round(mean(res[metric] for res in rows), 6)
    out[f"{name}/n_scored"] = len(scored)
    out[f"{name}/uncited_answers"] = sum(1 for _, res in scored if res.get("uncited"))
    out[f"{name}/skipped"] = sum(1 for _, res in results if res.get("skipped"))
    out[f"{name}/parse_failures"] = sum(int(res.get("parse_failures", 0)) for _, res in scored)
    return out


class ArgueJudge(FlowJudge):
    """ARGUE's nugget recall, sentence precision, citation support and their F1 (`judge=argue`): per answer in
    `record.judges[<name>]` (with every sentence's path), run means `argue/<metric>/<split>`; files
    `argue/scores.jsonl` and `argue/nuggets.jsonl` (nuggetizer's create shape)."""

    fields = ARGUE_METRICS

    def __init__(self, name: str = "argue", llm: Mapping[str, Any] | None = None, **options: Any):
        super().__init__(name, llm, **options)

    def score(self, answer: JudgedAnswer) -> dict[str, float]:
        return argue_scores(answer.sentences, len(answer.nuggets.nuggets))
