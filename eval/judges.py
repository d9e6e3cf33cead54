"""Prompt judges: one class, configured per judge in `conf/judge/<name>.yaml` (LiveRAG, CRAG-style, pairwise).

A prompt judge renders one prompt per answer, asks its engine for all answers in one batch (JSON schema where
the engine supports it, tolerant parsing otherwise), re-asks only the unparsable ones, and writes one result dict
per record under `record.judges[<name>]`. Results are never guessed: an output that cannot be read becomes
`{"parse_failed": true, ...}`, and a field that needs a gold answer is skipped (listed under `skipped`) when the
record has none. What a judge asks for lives in its YAML: the prompt file, the scale of every field (`fields`),
label-to-number mappings (`numeric`), which fields need a gold answer, and its own sampling `params`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import mean
from typing import Any

from rag.core.errors import ConfigError
from rag.core.parsing import parse_fields
from rag.judge.base import SPLITS, EvalContext, Judge, split_of
from rag.llm.asking import ask_with_retries, make_params
from rag.llm.base import LLMEngine, LLMRequest
from rag.metrics.registry import MetricSpec
from rag.prompts import PromptTemplate, load_prompt
from rag.records import AnswerRecord

log = logging.getLogger(__name__)

EVAL_PROMPT_DIR = Path(__file__).parent / "prompts"
NO_GOLD = "no gold answer"
#: the result key listing the fields left undefined because the answer had no retrieved passages
NO_PASSAGES = "no_passages"


def cut_text(text: str, max_chars: int | None) -> str:
    """`text` stripped and cut to `max_chars` characters (marked " ..."), the one cut every judge prompt uses;
    None or 0: no cut."""
    text = (text or "").strip()
    if max_chars and len(text) > max_chars:
        return text[:max_chars].rstrip() + " ..."
    return text


def _fmt_value(value: Any) -> str:
    return str(value)


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


class PromptJudge(Judge):
    """One named LLM judge: a prompt, the scales of its fields, its decoding settings and retry policy."""

    def __init__(self, name: str, prompt: str, fields: Mapping[str, Sequence[Any]],
                 llm: Mapping[str, Any] | None = None, prompt_dir: str | None = None,
                 needs_gold: Sequence[str] = (), requires_gold: bool = False, free_text: Sequence[str] = (),
                 needs_passages: Sequence[str] = (),
                 numeric: Mapping[str, Mapping[str, Any]] | None = None, params: Mapping[str, Any] | None = None,
                 max_retries: int = 2, retry_temperature: float = 0.2, max_passages: int | None = 10,
                 max_passage_chars: int | None = 2000, max_gold_chars: int | None = 4000,
                 max_explanation_chars: int = 400, description: str = ""):
        super().__init__(name, llm)
        if not fields:
            raise ConfigError(f"judge.{name}.fields: a judge needs at least one scored field")
        #: field -> allowed values, in the order shown in reports (best first)
        self.fields = {str(k): tuple(v) for k, v in fields.items()}
        for fname, allowed in self.fields.items():
            if not allowed:
                raise ConfigError(f"judge.{name}.fields.{fname}: list the allowed values")
            if any(isinstance(a, float) for a in allowed):
                raise ConfigError(f"judge.{name}.fields.{fname}: scales are integers or labels, got {allowed}")
        unknown = [f for f in needs_gold if f not in self.fields]
        if unknown:
            raise ConfigError(f"judge.{name}.needs_gold names unknown fields {unknown}")
        self.needs_gold = tuple(needs_gold)
        unknown = [f for f in needs_passages if f not in self.fields]
        if unknown:
            raise ConfigError(f"judge.{name}.needs_passages names unknown fields {unknown}")
        #: fields judged against the answer's retrieved passages (faithfulness): undefined for an answer that had
        #: none, so left out of its result (listed under `no_passages`) rather than scored against nothing
        self.needs_passages = tuple(needs_passages)
        self.requires_gold = requires_gold
        self.free_text = tuple(free_text)
        #: label field -> (numeric field, label -> number): e.g. CRAG grade -> score
        self.numeric: dict[str, tuple[str, dict[str, float]]] = {}
        for label_field, spec in (numeric or {}).items():
            if label_field not in self.fields:
                raise ConfigError(f"judge.{name}.numeric.{label_field}: not one of the fields {list(self.fields)}")
            values = {str(k): float(v) for k, v in (spec.get("values") or {}).items()}
            if set(values) != {str(a) for a in self.fields[label_field]}:
                raise ConfigError(f"judge.{name}.numeric.{label_field}.values must map every label of "
                                  f"{list(self.fields[label_field])} to a number")
            self.numeric[label_field] = (str(spec.get("field", "score")), values)
        self.prompt_name = prompt
        self.prompt_dir = str(prompt_dir or EVAL_PROMPT_DIR)
        self.params = dict(params or {"temperature": 0.0, "max_tokens": 128})
        self.max_retries = max_retries
        self.retry_temperature = retry_temperature
        self.max_passages = max_passages
        self.max_passage_chars = max_passage_chars
        self.max_gold_chars = max_gold_chars
        self.max_explanation_chars = max_explanation_chars
        self.description = description
        _ = self.template  # a missing prompt file fails when the judge is built, not after generation

    # -- the scale ------------------------------------------------------------------------------------------
    def int_fields(self) -> list[str]:
        return [n for n, allowed in self.fields.items() if all(isinstance(a, int) for a in allowed)]

    def numeric_fields(self) -> list[str]:
        """Fields whose mean is reported (ints directly, labels through their numeric mapping)."""
        return self.int_fields() + [target for target, _ in self.numeric.values()]

    def field_range(self, field: str) -> tuple[float, float]:
        if field in self.fields:
            values = [float(a) for a in self.fields[field]]
        else:
            values = next(list(m.values()) for t, m in self.numeric.values() if t == field)
        return min(values), max(values)

    def measurement(self, evaluation: str) -> tuple[str, list[float] | None]:
        """Integer scales (LiveRAG correctness -1..2, faithfulness -1..1) and label fields mapped to numbers
        (CRAG's grades) are ordered categories: ordinal, over the scale's values (a two-valued scale: nominal,
        where every level agrees)."""
        field = evaluation.removeprefix(f"judge/{self.name}/")
        if field in self.fields and field in self.int_fields():
            values = sorted(float(v) for v in self.fields[field])
        else:
            values = next((sorted(set(m.values())) for t, m in self.numeric.values() if t == field), [])
        if not values:
            return super().measurement(evaluation)
        return ("nominal" if len(values) <= 2 else "ordinal"), values

    def schema(self) -> dict[str, Any]:
        """JSON schema with `enum` for every scored field: llama.cpp grammars ignore minimum/maximum.

        Free-text fields (explanations) come first, as the prompts ask, and get a length cap so that a
        rambling model still closes the object within its token budget.
        """
        props: dict[str, Any] = {}
        for name in self.free_text:
            props[name] = {"type": "string", "maxLength": self.max_explanation_chars}
        for name, allowed in self.fields.items():
            kind = "integer" if all(isinstance(a, int) for a in allowed) else "string"
            props[name] = {"type": kind, "enum": list(allowed)}
        return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}

    def context_fields(self) -> list[str]:
        """The result fields judged against retrieved passages (`needs_passages` and their numeric targets)."""
        return [*self.needs_passages, *(t for f, (t, _m) in self.numeric.items() if f in self.needs_passages)]

    def context_evaluations(self) -> list[str]:
        return [f"judge/{self.name}/{f}" for f in self.context_fields() if f in self.numeric_fields()]

    def metric_specs(self) -> list[MetricSpec]:
        p = f"judge/{self.name}/"
        return [MetricSpec(p + f + "/{split}", "per_answer", f"mean {f} of judge {self.name} ({self.prompt_name})",
                           self.field_range(f), True) for f in self.numeric_fields()]

    # -- asking ----------------------------------------------------------------------------------------------
    @property
    def template(self) -> PromptTemplate:
        return load_prompt(self.prompt_name, prompt_dir=self.prompt_dir)

    def variables(self, record: AnswerRecord) -> dict[str, Any]:
        gold = record.has_gold
        passages = [cut_text(t, self.max_passage_chars) for t in record.passage_texts()]
        return {
            "question": record.question,
            "answer": record.answer.strip() or "(no answer)",
            "gold_answer": record.gold_answer.strip() if gold and record.gold_answer else "",
            "gold_passage": "\n\n".join(cut_text(d, self.max_gold_chars) for d in record.gold_texts()) if gold else "",
            "passages": passages[:self.max_passages] if self.max_passages else passages,
        }

    def request(self, engine: LLMEngine, record: AnswerRecord) -> LLMRequest:
        template = self.template
        return LLMRequest(messages=template.messages(**self.variables(record)),
                          params=make_params(self.params, engine, self.schema()), stop_plain=template.stop_plain)

    def parse(self, text: str) -> dict[str, Any] | None:
        return parse_fields(text, self.fields, free_text=self.free_text)

    def judge(self, engine: LLMEngine, records: Sequence[AnswerRecord]) -> list[dict[str, Any]]:
        """One result dict per record, in order (see the module docstring for the three shapes)."""
        results: list[dict[str, Any]] = [{} for _ in records]
        asked: list[int] = []
        for i, record in enumerate(records):
            if self.requires_gold and not record.has_gold:
                results[i] = {"skipped": list(self.fields) + [t for t, _ in self.numeric.values()],
                              "skip_reason": NO_GOLD}
            else:
                asked.append(i)
        if asked:
            requests = [self.request(engine, records[i]) for i in asked]
            outcomes = ask_with_retries(engine, requests, lambda _i, text: self.parse(text),
                                        max_retries=self.max_retries, retry_temperature=self.retry_temperature,
                                        desc=f"judge {self.name}")
            for i, outcome in zip(asked, outcomes):
                results[i] = self._result(records[i], outcome)
        n_skipped = sum(1 for r in results if r.get("skip_reason") == NO_GOLD)
        if n_skipped:
            what = "the whole judge" if self.requires_gold else ", ".join(self.needs_gold)
            log.warning("judge %s: %d of %d records have no gold answer; skipped %s for them",
                        self.name, n_skipped, len(records), what)
        return results

    def _result(self, record: AnswerRecord, outcome: Any) -> dict[str, Any]:
        if outcome.value is None:
            return {"parse_failed": True, "raw": outcome.raw[:2000], "attempts": outcome.attempts,
                    "finish_reason": outcome.finish_reason}
        value = dict(outcome.value)
        for label_field, (target, mapping) in self.numeric.items():
            value[target] = mapping[str(value[label_field])]
        if not record.has_gold and self.needs_gold:
            for name in self.needs_gold:
                value.pop(name, None)
            value["skipped"] = list(self.needs_gold)
            value["skip_reason"] = NO_GOLD
        if self.needs_passages and not any(t.strip() for t in record.passage_texts()):
            for name in self.context_fields():
                value.pop(name, None)
            value[NO_PASSAGES] = list(self.needs_passages)
        value["attempts"] = outcome.attempts
        return value

    def evaluate(self, records: Sequence[AnswerRecord], engine: LLMEngine | None,
                 ctx: EvalContext) -> dict[str, Any]:
        if engine is None:
            raise ConfigError(f"judge.{self.name} needs an `llm`")
        for record, result in zip(records, self.judge(engine, records)):
            self.store(record, result)
        return self.summary(records)

    # -- metrics and report ----------------------------------------------------------------------------------
    def summary(self, records: Sequence[AnswerRecord]) -> dict[str, Any]:
        """Flat metrics `judge/<name>/...` read back from the records' `judges[name]`."""
        results = [(r, r.judges.get(self.name)) for r in records]
        results = [(r, res) for r, res in results if isinstance(res, Mapping)]
        p = f"judge/{self.name}/"
        out: dict[str, Any] = {p + "n_judged": len(results),
                               p + "parse_failures": sum(1 for _, res in results if res.get("parse_failed")),
                               p + "skipped_no_gold": sum(1 for _, res in results
                                                          if res.get("skip_reason") == NO_GOLD),
                               p + "skipped_no_passages": sum(1 for _, res in results if res.get(NO_PASSAGES))}
        ok = [(r, res) for r, res in results if not res.get("parse_failed")]
        for field in self.numeric_fields():
            for split in SPLITS:
                values = [res[field] for r, res in ok if field in res and split_of(r, split)]
                out[p + f"{field}/{split}"] = mean(values) if values else None
                if split == "all":
                    out[p + f"{field}_n"] = len(values)
        for field, allowed in self.fields.items():
            for split in SPLITS:
                values = [res[field] for r, res in ok if field in res and split_of(r, split)]
                for value in allowed:
                    out[p + f"{field}_share_{_fmt_value(value)}/{split}"] = (
                        sum(1 for v in values if v == value) / len(values) if values else None)
        return out

    def report(self, metrics: Mapping[str, Any]) -> str:
        """Means and the Table-1 style distribution (percent, by hop)."""
        p = f"judge/{self.name}/"
        lines = [f"## Judge `{self.name}` ({self.prompt_name})", "",
                 f"answers: {metrics.get(p + 'n_judged')}, parse failures: {metrics.get(p + 'parse_failures')}, "
                 f"skipped for lack of a gold answer: {metrics.get(p + 'skipped_no_gold')}", "",
                 "| field | all | single-hop | multi-hop |", "|---|---|---|---|"]
        for field in self.numeric_fields():
            lines.append(f"| mean {field} (over {metrics.get(p + f'{field}_n')} answers) | "
                         + " | ".join(_num(metrics.get(p + f"{field}/{s}")) for s in SPLITS) + " |")
        lines += ["", "Share of scored answers at each value [%] (RAGtifier Table 1 layout):", ""]
        header = ["hop"] + [f"{field} {v}" for field, allowed in self.fields.items() for v in allowed]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for split in SPLITS:
            cells = [_pct(metrics.get(p + f"{field}_share_{v}/{split}"))
                     for field, allowed in self.fields.items() for v in allowed]
            lines.append(f"| {split} | " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"
