"""Export answers.jsonl to the TREC 2024 RAG track answer format (one JSON object per topic and line):

`{"run_id", "topic_id", "topic", "references": [doc ids], "response_length": int,
  "answer": [{"text": sentence, "citations": [indices into references]}]}`

Sentences come from the answer text; `[n]` markers (our prompts label passages `[1]..[k]` in prompt order)
become citations and are removed from the sentence text. Cited strategies (Crucible, GINGER) store
`sentences: [{text, citations: [doc_id], nugget, confidence}]` in the record; each sentence is exported with its
own citation(s), as indices into `references`.

`--format neuclir` writes a NeuCLIR-style report instead, one per topic:
`{"request_id", "run_id", "sentences": [{"text", "citations": [doc ids]}]}`.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from rag.core.io import atomic_write_jsonl
from rag.folders import RunFolder
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
    answer = []
    if record.sentences is not None:  # cited strategies (Crucible, GINGER): citations are doc ids
        for s in record.sentences:
            for doc_id in s.get("citations", []):
                if doc_id not in references:  # a cited document is always a reference
                    references.append(doc_id)
            answer.append({"text": s["text"], "citations": sorted({references.index(d)
                                                                   for d in s.get("citations", [])})})
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


def to_neuclir(record: AnswerRecord | dict[str, Any], run_id: str) -> dict[str, Any]:
    """A NeuCLIR-style report: the answer's sentences, each with the doc ids it cites."""
    trec = to_trec(record, run_id)
    refs = trec["references"]
    return {"request_id": trec["topic_id"], "run_id": run_id,
            "sentences": [{"text": a["text"], "citations": [refs[i] for i in a["citations"]]}
                          for a in trec["answer"]]}


FORMATS = {"rag24": to_trec, "neuclir": to_neuclir}


def export(answers: Path, out: Path, run_id: str, fmt: str = "rag24") -> int:
    rows = [FORMATS[fmt](r, run_id) for r in load_answer_records(answers)]
    atomic_write_jsonl(out, rows)
    return len(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("answers", type=Path, help="answers.jsonl of a run (or the run folder)")
    parser.add_argument("--out", type=Path, help="output file (default: <run>/trec_<format>.jsonl)")
    parser.add_argument("--format", choices=sorted(FORMATS), default="rag24",
                        help="rag24: TREC 2024 RAG answers; neuclir: NeuCLIR-style reports")
    parser.add_argument("--run-id", default=None, help="run_id field (default: the run folder name)")
    args = parser.parse_args(argv)
    answers = RunFolder(args.answers).answers_path if args.answers.is_dir() else args.answers
    out = args.out or answers.parent / f"trec_{args.format}.jsonl"
    n = export(answers, out, args.run_id or answers.parent.name, args.format)
    print(f"wrote {n} topics to {out}")


if __name__ == "__main__":
    main()
