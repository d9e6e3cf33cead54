"""LLM judges: the LiveRAG prompt (RAGtifier Fig. 2), a CRAG-style grade and a pairwise comparison.

A judge renders one prompt per answer, asks its own engine for all answers in one batch (JSON schema where the
engine supports it, tolerant parsing otherwise), re-asks only the unparsable ones, and writes one result dict per
record. Results are never guessed: an output that cannot be read becomes `{"parse_failed": true, ...}`, and a
field that needs a gold answer is skipped (listed under `skipped`) when the record has none.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval.parsing import parse_fields
from eval.retry import ask_with_retries, make_params
from rag.llm.base import LLMEngine, LLMRequest
from rag.prompts import PromptTemplate, load_prompt

log = logging.getLogger(__name__)

EVAL_PROMPT_DIR = Path(__file__).parent / "prompts"
NO_GOLD = "no gold answer"


@dataclass(frozen=True)
class JudgeKind:
    """What a judge prompt asks for and how its answers become numbers."""

    prompt: str
    #: field -> allowed values, in the order shown in reports (best first)
    fields: dict[str, tuple[Any, ...]]
    #: fields that are meaningless without a gold answer (dropped, counted and warned about)
    needs_gold: tuple[str, ...] = ()
    #: the whole judge needs a gold answer (pairwise, CRAG): records without one are not sent at all
    requires_gold: bool = False
    #: free-text fields copied from the output when present (explanations)
    free_text: tuple[str, ...] = ()
    #: label field -> (numeric field name, label -> number): e.g. CRAG grade -> score
    numeric: dict[str, tuple[str, dict[str, float]]] = field(default_factory=dict)

    def schema(self, max_free_text_chars: int = 400) -> dict[str, Any]:
        """JSON schema with `enum` for every scored field: llama.cpp grammars ignore minimum/maximum.

        Free-text fields (explanations) come first, as the prompts ask, and get a length cap so that a
        rambling model still closes the object within its token budget.
        """
        props: dict[str, Any] = {}
        for name in self.free_text:
            props[name] = {"type": "string", "maxLength": max_free_text_chars}
        for name, allowed in self.fields.items():
            kind = "integer" if all(isinstance(a, int) for a in allowed) else "string"
            props[name] = {"type": kind, "enum": list(allowed)}
        return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}

    def numeric_fields(self) -> list[str]:
        """Fields whose mean is reported (ints directly, labels through their numeric mapping)."""
        out = [n for n, allowed in self.fields.items() if all(isinstance(a, int) for a in allowed)]
        return out + [target for target, _ in self.numeric.values()]


#: Grades and scores: LiveRAG (RAGtifier Fig. 2), CRAG (Yang et al. 2024: perfect 1, acceptable 0.5, missing 0,
#: incorrect -1), pairwise (generated vs ground truth; better 1, tie 0.5, worse 0, i.e. a win rate).
KINDS: dict[str, JudgeKind] = {
    "liverag": JudgeKind(prompt="liverag", fields={"correctness": (2, 1, 0, -1), "faithfulness": (1, 0, -1)},
                         needs_gold=("correctness",)),
    "crag": JudgeKind(prompt="crag", fields={"grade": ("perfect", "acceptable", "missing", "incorrect")},
                      requires_gold=True, free_text=("explanation",),
                      numeric={"grade": ("score", {"perfect": 1.0, "acceptable": 0.5, "missing": 0.0,
                                                   "incorrect": -1.0})}),
    "pairwise": JudgeKind(prompt="pairwise", fields={"verdict": ("better", "tie", "worse")},
                          requires_gold=True, free_text=("explanation",),
                          numeric={"verdict": ("score", {"better": 1.0, "tie": 0.5, "worse": 0.0})}),
}


def has_gold(record: Mapping[str, Any]) -> bool:
    gold = record.get("gold_answer")
    return isinstance(gold, str) and bool(gold.strip())


def _cut(text: str, max_chars: int | None) -> str:
    text = (text or "").strip()
    if max_chars and len(text) > max_chars:
        return text[:max_chars].rstrip() + " ..."
    return text


def passage_texts(record: Mapping[str, Any], max_passages: int | None, max_chars: int | None) -> list[str]:
    """Retrieved passages as submitted (`passages[*].passage`), cut to the judge's context budget."""
    out = []
    for p in record.get("passages") or []:
        text = p.get("passage", "") if isinstance(p, Mapping) else str(p)
        out.append(_cut(text, max_chars))
    return out[:max_passages] if max_passages else out


class PromptJudge:
    """One named judge: a kind (prompt + fields), its decoding settings and retry policy."""

    def __init__(self, name: str, kind: str = "liverag", prompt: str | None = None, prompt_dir: str | None = None,
                 params: Mapping[str, Any] | None = None, max_retries: int = 2, retry_temperature: float = 0.2,
                 max_passages: int | None = 10, max_passage_chars: int | None = 2000,
                 max_gold_chars: int | None = 4000, max_explanation_chars: int = 400, **_ignored: Any):
        if kind not in KINDS:
            raise ValueError(f"judge {name!r}: unknown kind {kind!r} (known: {', '.join(KINDS)})")
        self.name = name
        self.kind = KINDS[kind]
        self.kind_name = kind
        self.prompt_name = prompt or self.kind.prompt
        self.prompt_dir = str(prompt_dir or EVAL_PROMPT_DIR)
        self.params = dict(params or {"temperature": 0.0, "max_tokens": 128})
        self.max_retries = max_retries
        self.retry_temperature = retry_temperature
        self.max_passages = max_passages
        self.max_passage_chars = max_passage_chars
        self.max_gold_chars = max_gold_chars
        self.max_explanation_chars = max_explanation_chars

    @property
    def template(self) -> PromptTemplate:
        return load_prompt(self.prompt_name, prompt_dir=self.prompt_dir)

    def variables(self, record: Mapping[str, Any]) -> dict[str, Any]:
        gold = has_gold(record)
        gold_docs = [d for d in (record.get("gold_docs") or []) if isinstance(d, str) and d.strip()]
        return {
            "question": record.get("question", ""),
            "answer": (record.get("answer") or "").strip() or "(no answer)",
            "gold_answer": record["gold_answer"].strip() if gold else "",
            "gold_passage": "\n\n".join(_cut(d, self.max_gold_chars) for d in gold_docs) if gold else "",
            "passages": passage_texts(record, self.max_passages, self.max_passage_chars),
        }

    def request(self, engine: LLMEngine, record: Mapping[str, Any]) -> LLMRequest:
        template = self.template
        return LLMRequest(messages=template.messages(**self.variables(record)),
                          params=make_params(self.params, engine, self.kind.schema(self.max_explanation_chars)),
                          stop_plain=template.stop_plain)

    def parse(self, text: str) -> dict[str, Any] | None:
        return parse_fields(text, self.kind.fields, free_text=self.kind.free_text)

    def judge(self, engine: LLMEngine, records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """One result dict per record, in order (see the module docstring for the three shapes)."""
        results: list[dict[str, Any]] = [{} for _ in records]
        asked: list[int] = []
        for i, record in enumerate(records):
            if self.kind.requires_gold and not has_gold(record):
                results[i] = {"skipped": list(self.kind.fields) + [t for t, _ in self.kind.numeric.values()],
                              "skip_reason": NO_GOLD}
            else:
                asked.append(i)
        if not asked:
            return results
        requests = [self.request(engine, records[i]) for i in asked]
        outcomes = ask_with_retries(engine, requests, lambda _i, text: self.parse(text),
                                    max_retries=self.max_retries, retry_temperature=self.retry_temperature,
                                    desc=f"judge {self.name}")
        for i, outcome in zip(asked, outcomes):
            if outcome.value is None:
                results[i] = {"parse_failed": True, "raw": outcome.raw[:2000], "attempts": outcome.attempts,
                              "finish_reason": outcome.finish_reason}
                continue
            value = dict(outcome.value)
            for label_field, (target, mapping) in self.kind.numeric.items():
                value[target] = mapping[value[label_field]]
            if not has_gold(records[i]) and self.kind.needs_gold:
                for name in self.kind.needs_gold:
                    value.pop(name, None)
                value["skipped"] = list(self.kind.needs_gold)
                value["skip_reason"] = NO_GOLD
            value["attempts"] = outcome.attempts
            results[i] = value
        n_skipped = sum(1 for r in results if r.get("skip_reason") == NO_GOLD)
        if n_skipped:
            what = "the whole judge" if self.kind.requires_gold else ", ".join(self.kind.needs_gold)
            log.warning("judge %s: %d of %d records have no gold answer; skipped %s for them",
                        self.name, n_skipped, len(records), what)
        return results


def build_judge(spec: Mapping[str, Any]) -> PromptJudge:
    """A judge from its config entry (`name`, `kind`, `params`, ...; the `llm` entry is used by the caller)."""
    spec = dict(spec)
    name = spec.pop("name", None) or spec.get("kind", "liverag")
    spec.pop("llm", None)
    return PromptJudge(name=name, **spec)
