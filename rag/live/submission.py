"""The LiveRAG submission file: one JSON line per question, checked against the challenge's rules first.

Fields per line (the organisers' answer format): `id` (as in the question file), `question`, `passages`
(`[{"passage": text, "doc_IDs": [ids]}]`, the passages the prompt was augmented with), `final_prompt` (the prompt
given to the generator; empty for an extractive answer, which used no model) and `answer`. The limits are
settings (`live.submission.*`), since each session's rules set them: LiveRAG 2025 limited answers to 200 tokens;
we count whitespace-separated words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag.core.errors import DataError
from rag.core.io import atomic_write_jsonl
from rag.core.text import cut_words

FIELDS = ("id", "question", "passages", "final_prompt", "answer")


class SubmissionSpec:
    """What a valid submission line looks like, and how a pipeline record becomes one."""

    def __init__(self, required: Sequence[str] = FIELDS, max_answer_words: int | None = 200,
                 max_passages: int | None = None, max_passage_words: int | None = None,
                 allow_empty_answer: bool = False):
        self.required = tuple(required)
        self.max_answer_words = max_answer_words
        self.max_passages = max_passages
        self.max_passage_words = max_passage_words
        self.allow_empty_answer = allow_empty_answer

    def line(self, record: Mapping[str, Any], raw_id: Any) -> dict[str, Any]:
        """A submission line from an answers.jsonl record; the answer is cut to the word limit."""
        passages = [{"passage": p.get("passage", ""), "doc_IDs": list(p.get("doc_IDs") or [])}
                    for p in record.get("passages") or []]
        return {"id": raw_id, "question": record.get("question"), "passages": passages,
                "final_prompt": record.get("final_prompt") or "",
                "answer": cut_words(record.get("answer") or "", self.max_answer_words)}

    def problems(self, lines: Sequence[Mapping[str, Any]], question_ids: Sequence[Any]) -> list[str]:
        """Every rule a set of lines breaks (empty when the submission is valid)."""
        out: list[str] = []
        expected = {str(q) for q in question_ids}
        seen: dict[str, int] = {}
        for n, line in enumerate(lines, start=1):
            where = f"line {n} (id {line.get('id')!r})"
            missing = [f for f in self.required if f not in line]
            if missing:
                out.append(f"{where}: missing field(s) {', '.join(missing)}")
                continue
            qid = str(line["id"])
            seen[qid] = seen.get(qid, 0) + 1
            if qid not in expected:
                out.append(f"{where}: id not in the question file")
            answer = line["answer"]
            if not isinstance(answer, str):
                out.append(f"{where}: answer is not a string")
            elif not answer.strip() and not self.allow_empty_answer:
                out.append(f"{where}: empty answer")
            elif self.max_answer_words and len(answer.split()) > self.max_answer_words:
                out.append(f"{where}: answer has {len(answer.split())} words (limit {self.max_answer_words})")
            if not isinstance(line["final_prompt"], str):
                out.append(f"{where}: final_prompt is not a string")
            passages = line["passages"]
            if not isinstance(passages, list):
                out.append(f"{where}: passages is not a list")
                continue
            if self.max_passages and len(passages) > self.max_passages:
                out.append(f"{where}: {len(passages)} passages (limit {self.max_passages})")
            for i, p in enumerate(passages):
                if not isinstance(p, Mapping) or not isinstance(p.get("passage"), str) \
                        or not isinstance(p.get("doc_IDs"), list) or not p.get("doc_IDs"):
                    out.append(f"{where}: passage {i} needs a text `passage` and a non-empty `doc_IDs` list")
                elif self.max_passage_words and len(p["passage"].split()) > self.max_passage_words:
                    out.append(f"{where}: passage {i} has more than {self.max_passage_words} words")
        out += [f"id {q!r} answered {c} times" for q, c in seen.items() if c > 1]
        out += [f"id {q!r} not answered" for q in sorted(expected - set(seen))]
        return out

    def write(self, path: Path, lines: Sequence[Mapping[str, Any]], question_ids: Sequence[Any]) -> None:
        """Validate, then write atomically; an invalid submission raises and writes nothing."""
        problems = self.problems(lines, question_ids)
        if problems:
            shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
            raise DataError(f"submission {path} not written: {len(problems)} problem(s): {shown}")
        atomic_write_jsonl(path, lines)
