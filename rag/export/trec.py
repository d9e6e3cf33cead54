"""Export answers.jsonl to the TREC 2024 RAG track answer format (one JSON object per topic and line):

`{"run_id", "topic_id", "topic", "references": [doc ids], "response_length": int,
  "answer": [{"text": sentence, "citations": [indices into references]}]}`

Sentences come from the answer text; `[n]` markers (our prompts label passages `[1]..[k]` in prompt order)
become citations and are removed from the sentence text. Crucible-style answers that already carry
per-sentence citations under `steps.sentences` are exported as they are.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from rag.core.io import atomic_write_jsonl
from rag.records import AnswerRecord, load_answer_records

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_MARKER = re.compile(r"\s*\[(\d+(?:\s*,\s*\d+)*)\]")


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def to_trec(record: AnswerRecord | dict[str, Any], run_id: str) -> dict[str, Any]:
    if not isinstance(record, AnswerRecord):
        record = AnswerRecord.from_json(record)
    references: list[str] = []
    label_to_ref: dict[int, int] = {}
    for label, passage in enumerate(record.passages, start=1):
        doc_id = (passage.doc_IDs or [""])[0]
        if doc_id not in references:
            references.append(doc_id)
        label_to_ref[label] = references.index(doc_id)
    sentences = (record.steps or {}).get("sentences")
    answer = []
    if sentences:  # already [{text, citations}] with citations as passage labels
        for s in sentences:
            cites = sorted({label_to_ref[c] for c in s.get("citations", []) if c in label_to_ref})
            answer.append({"text": s["text"], "citations": cites})
    else:
        for sentence in split_sentences(record.answer):
            labels = [int(n) for m in _MARKER.findall(sentence) for n in m.split(",")]
            text = _MARKER.sub("", sentence).strip()
            if text:
                answer.append({"text": text,
                               "citations": sorted({label_to_ref[n] for n in labels if n in label_to_ref})})
    return {"run_id": run_id, "topic_id": record.id, "topic": record.question,
            "references": references, "response_length": sum(len(a["text"].split()) for a in answer),
            "answer": answer}


def export(answers: Path, out: Path, run_id: str) -> int:
    rows = [to_trec(r, run_id) for r in load_answer_records(answers)]
    atomic_write_jsonl(out, rows)
    return len(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("answers", type=Path, help="answers.jsonl of a run (or the run folder)")
    parser.add_argument("--out", type=Path, help="output file (default: <run>/trec_rag24.jsonl)")
    parser.add_argument("--run-id", default=None, help="run_id field (default: the run folder name)")
    args = parser.parse_args(argv)
    answers = args.answers / "answers.jsonl" if args.answers.is_dir() else args.answers
    out = args.out or answers.parent / "trec_rag24.jsonl"
    n = export(answers, out, args.run_id or answers.parent.name)
    print(f"wrote {n} topics to {out}")


if __name__ == "__main__":
    main()
