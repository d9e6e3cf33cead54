"""Crucible's five answer metrics for every strategy (Dietz, Li et al., 2026): definitions and runner.

An answer is a list of sentences s_1..s_m, each with zero or more citations (Crucible and GINGER store them in
`record["sentences"]`; other strategies' answers are split into sentences and their `[n]` passage markers read
as citations, as `rag.export.trec` does). N is the question's AutoNuggetizer nugget set (made from its gold
documents, cached per topic), C(s) the nuggets the judge says sentence s supports, and cs(s) the citation
support of s: 1 when a cited passage supports it, 0.5 when the best cited passage supports it partially, 0
when none does or it cites nothing.

- Nugget Recall       = |U_i C(s_i)| / |N|
- Nugget Density      = |U_i C(s_i)| / m                      (distinct nuggets per sentence)
- Sentence Novelty    = |{i : C(s_i) \\ U_{j<i} C(s_j) != {}}| / m  (sentences adding a new nugget)
- Relevant Sentences  = |{i : C(s_i) != {}}| / m
- Citation Support    = sum_i cs(s_i) / m

All are 0 for an empty answer (m = 0); Nugget Recall is undefined (the record is skipped) when N is empty.
An answer without any citation scores Citation Support 0 and is counted in `crucible/uncited_answers`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Any

from eval.nuggets import AutoNuggetizer, topic_from_record
from rag.core.errors import ConfigError
from rag.core.io import atomic_write_jsonl
from rag.export.trec import split_sentences
from rag.generate.crucible import SUPPORT_SCHEMA, parse_support_label
from rag.judge.base import EvalContext, Judge
from rag.llm.asking import ask_with_retries, make_params
from rag.llm.base import LLMEngine, LLMRequest
from rag.metrics.registry import BUILTIN, MetricSpec
from rag.prompts import load_prompt
from rag.records import AnswerRecord

log = logging.getLogger(__name__)

METRICS = ("nugget_recall", "nugget_density", "sentence_novelty", "relevant_sentences", "citation_support")
CITATION_VALUE = {"support": 1.0, "partial": 0.5, "none": 0.0}
_MARKER = re.compile(r"\s*\[(\d+(?:\s*,\s*\d+)*)\]")


@dataclass
class JudgedSentence:
    """One answer sentence with the judge's decisions."""

    text: str
    citations: list[str] = field(default_factory=list)
    #: indices into the question's nugget list that this sentence supports
    nuggets: set[int] = field(default_factory=set)
    #: best support label over its cited passages; None when it cites nothing
    citation_label: str | None = None


def crucible_scores(sentences: Sequence[JudgedSentence], n_nuggets: int) -> dict[str, float]:
    """The five metrics of one answer (module docstring); `n_nuggets` = |N| > 0."""
    if n_nuggets <= 0:
        raise ValueError("crucible_scores needs at least one nugget (|N| > 0)")
    m = len(sentences)
    if m == 0:
        return dict.fromkeys(METRICS, 0.0)
    covered: set[int] = set()
    novel = 0
    for s in sentences:
        if s.nuggets - covered:
            novel += 1
        covered |= s.nuggets
    return {
        "nugget_recall": len(covered) / n_nuggets,
        "nugget_density": len(covered) / m,
        "sentence_novelty": novel / m,
        "relevant_sentences": sum(1 for s in sentences if s.nuggets) / m,
        "citation_support": sum(CITATION_VALUE.get(s.citation_label or "none", 0.0) for s in sentences) / m,
    }


def best_label(labels: Sequence[str | None]) -> str:
    """The most favourable of several cited passages' labels (unreadable counts as none)."""
    for label in ("support", "partial"):
        if label in labels:
            return label
    return "none"


def answer_sentences(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """[{text, citations: [doc_id], passages: [passage text]}] for any strategy's record."""
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
            texts = [by_pid[pid]["passage"]] if pid in by_pid else [by_doc(d) for d in cites]
            out.append({"text": s["text"], "citations": cites, "passages": [t for t in texts if t]})
        return out
    out = []
    for sentence in split_sentences(record.get("answer") or ""):
        labels = [int(n) for m in _MARKER.findall(sentence) for n in m.split(",")]
        text = _MARKER.sub("", sentence).strip()
        if not text:
            continue
        cited = [passages[n - 1] for n in dict.fromkeys(labels) if 1 <= n <= len(passages)]
        out.append({"text": text, "citations": [(p.get("doc_IDs") or [""])[0] for p in cited],
                    "passages": [p.get("passage", "") for p in cited]})
    return out


class CrucibleEvaluator:
    """Runs the judge decisions the metrics need, batched over all records, and scores each answer."""

    def __init__(self, nuggets: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None,
                 count_partial_nugget: bool = False, max_passage_chars: int = 2000, max_retries: int = 2,
                 retry_temperature: float = 0.2, prompt: str = "crucible_support"):
        self.nuggetizer_options = dict(nuggets or {})
        self.params = dict(params or {"temperature": 0.0, "max_tokens": 16})
        #: count partial_support as covering a nugget (default: strict, support only)
        self.count_partial_nugget = count_partial_nugget
        self.max_passage_chars = max_passage_chars
        self.max_retries, self.retry_temperature = max_retries, retry_temperature
        self.prompt = prompt

    def citation_labels(self, engine: LLMEngine, pairs: Sequence[tuple[str, str]]) -> list[str | None]:
        """support / partial / none for each (sentence, passage), one batch plus re-asks of unreadable ones."""
        template = load_prompt(self.prompt)
        params = make_params(self.params, engine, SUPPORT_SCHEMA)
        requests = [LLMRequest(messages=template.messages(sentence=s, passage=p[: self.max_passage_chars]),
                               params=params, stop_plain=template.stop_plain) for s, p in pairs]
        results = ask_with_retries(engine, requests, lambda _i, text: parse_support_label(text), self.max_retries,
                                   self.retry_temperature, desc="crucible citation support") if requests else []
        return [r.value for r in results]

    def evaluate(self, engine: LLMEngine, records: Sequence[dict[str, Any]], cache_dir: Path
                 ) -> tuple[list[dict[str, Any]], list[Any]]:
        """Per-record results (stored under `record.judges[<name>]`) and the nugget sets used."""
        nuggetizer = AutoNuggetizer(cache_dir=cache_dir, **self.nuggetizer_options)
        topics = [topic_from_record(AnswerRecord.from_json(r) if isinstance(r, Mapping) else r, nuggetizer.max_passages)
                  for r in records]
        sets = nuggetizer.create(engine, topics)
        sentences = [answer_sentences(r) for r in records]
        # sentence -> nugget decisions: AutoNuggetizer assignment with the sentence as the "answer"
        jobs = [(i, j) for i, s in enumerate(sets) if s.failure is None for j in range(len(sentences[i]))]
        assigned = nuggetizer.assign(engine, [(records[i].get("question", ""), sentences[i][j]["text"],
                                               sets[i].nuggets) for i, j in jobs])
        covered = {job: a for job, a in zip(jobs, assigned)}
        # sentence -> citation decisions: each cited passage
        cjobs = [(i, j, k) for i, s in enumerate(sentences) for j, sent in enumerate(s)
                 for k in range(len(sent["passages"]))]
        labels = self.citation_labels(engine, [(sentences[i][j]["text"], sentences[i][j]["passages"][k])
                                               for i, j, k in cjobs])
        per_sentence: dict[tuple[int, int], list[str | None]] = {}
        for (i, j, _k), label in zip(cjobs, labels):
            per_sentence.setdefault((i, j), []).append(label)
        hits = ("support", "partial_support") if self.count_partial_nugget else ("support",)
        out = []
        for i, nset in enumerate(sets):
            if nset.failure is not None:
                out.append({"skipped": True, "skip_reason": nset.failure})
                continue
            judged, failures = [], 0
            for j, sent in enumerate(sentences[i]):
                a = covered[(i, j)]
                failures += a.failed_windows
                labs = per_sentence.get((i, j), [])
                failures += sum(lab is None for lab in labs)
                judged.append(JudgedSentence(sent["text"], sent["citations"],
                                             {k for k, n in enumerate(a.nuggets) if n["assignment"] in hits},
                                             best_label(labs) if sent["citations"] else None))
            uncited = not any(s.citations for s in judged)
            out.append({**crucible_scores(judged, len(nset.nuggets)), "uncited": uncited,
                        "n_sentences": len(judged), "n_nuggets": len(nset.nuggets), "parse_failures": failures,
                        "sentences": [{"text": s.text, "citations": s.citations, "nuggets": sorted(s.nuggets),
                                       "citation_label": s.citation_label} for s in judged]})
        return out, sets


def crucible_summary(records: Sequence[Mapping[str, Any]], name: str = "crucible") -> dict[str, Any]:
    """Flat metrics `crucible/<metric>/<all|single|multi>` over scored answer rows (`judges[name]`, or the
    top-level `crucible` field of earlier files), plus counts."""
    results = [(r, (r.get("judges") or {}).get(name, r.get("crucible"))) for r in records]
    results = [(r, res) for r, res in results if isinstance(res, Mapping)]
    scored = [(r, res) for r, res in results if not res.get("skipped")]
    out: dict[str, Any] = {}
    for split in ("all", "single", "multi"):
        rows = [res for r, res in scored if split == "all" or r.get("hop") == split]
        for metric in METRICS:
            if rows:
                out[f"crucible/{metric}/{split}"] = round(mean(res[metric] for res in rows), 6)
    out["crucible/n_scored"] = len(scored)
    out["crucible/uncited_answers"] = sum(1 for _, res in scored if res["uncited"])
    out["crucible/skipped"] = sum(1 for _, res in results if res.get("skipped"))
    out["crucible/parse_failures"] = sum(res["parse_failures"] for _, res in scored)
    return out


class CrucibleJudge(Judge):
    """Crucible's five metrics as a judge (`judge=crucible`), for any strategy: per answer in
    `record.judges[<name>]` (declared as `crucible/<metric>` values), run means as `crucible/<metric>/<split>`; files `crucible/scores.jsonl` and
    `crucible/nuggets.jsonl` (castorini/nuggetizer's create shape, also the trainer's weak labels)."""

    def __init__(self, name: str = "crucible", llm: Mapping[str, Any] | None = None, **options: Any):
        super().__init__(name, llm)
        self.evaluator = CrucibleEvaluator(**options)  # a misspelt setting fails when the judge is built

    @property
    def metric_prefix(self) -> str:
        return "crucible/"

    def declaration(self) -> dict[str, Any]:
        return {"prefix": self.metric_prefix, "fields": list(METRICS)}

    def metric_specs(self) -> list[MetricSpec]:
        """Crucible's metrics are declared statically in the registry (`rag.metrics.registry.BUILTIN`)."""
        return [s for s in BUILTIN if s.pattern.startswith("crucible/")]

    def evaluate(self, records: Sequence[AnswerRecord], engine: LLMEngine | None,
                 ctx: EvalContext) -> dict[str, Any]:
        if engine is None:
            raise ConfigError(f"judge.{self.name} needs an `llm`")
        rows = [r.to_json() for r in records]
        results, sets = self.evaluator.evaluate(engine, rows, Path(ctx.cache_dir))
        for record, row, result in zip(records, rows, results):
            self.store(record, result)
            row.setdefault("judges", {})[self.name] = result
        atomic_write_jsonl(Path(ctx.run_dir) / "crucible" / "scores.jsonl",
                           [{"id": r.get("id"), "generator": r.get("generator"), **r["judges"][self.name]}
                            for r in rows])
        atomic_write_jsonl(Path(ctx.run_dir) / "crucible" / "nuggets.jsonl",
                           [s.record() for s in sets if s.failure is None])
        uncited = [str(r.get("id")) for r in rows if r["judges"][self.name].get("uncited")]
        if uncited:
            log.info("crucible: %d answers cite nothing (citation support 0): %s", len(uncited), ", ".join(uncited))
        return crucible_summary(rows, self.name)
