"""The organizers' TREC RAG checker (autojudge-base's `report_tool check`) run as a subprocess, as the track documents
it (TREC-RAG/trec-rag-skills, validate-trec-rag-2026-submissions): shared by the export tests and the
documented-commands test of the demo's rag26 export."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: The one declared exception to "the organizers' checker passes": its document-id pattern finding for an export
#: whose documents are not the track's collection (ClimbMix-400b for rag26, MS MARCO v2.1 segments for rag25).
#: The pattern is the collection's rule, not the format's; our collections (LiveRAG's FineWeb, HotpotQA, and the
#: ClimbMix ids of these tests under the 2025 spec) cannot match it. Every other finding fails the test.
FOREIGN_COLLECTION_IDS = re.compile(r"doc-id '[^']*' is not a valid document id( for collection \S+)? "
                                    r"\(must match docid pattern ")

CHECKER = (sys.executable, "-m", "autojudge_base.report_tool", "check")


@dataclass
class Checked:
    """The checker's verdict on one file: its exit status and findings (each kind once, as it collates them)."""

    rc: int
    problems: list[str] = field(default_factory=list)
    smells: list[str] = field(default_factory=list)
    coverage: list[str] = field(default_factory=list)
    output: str = ""

    def unexcepted(self, foreign_ids: bool) -> list[str]:
        """Problems and coverage failures, less the declared document-id exception where `foreign_ids`."""
        return [p for p in self.problems if not (foreign_ids and FOREIGN_COLLECTION_IDS.search(p))] + \
            [c for c in self.coverage if "(smell)" not in c]


def organizers_check(report: Path, spec: str | None, requests: Path | None, nltk_data: Path) -> Checked:
    """`report_tool check` on one file against `spec` (None: structural checks only) and the topics (a Request
    JSONL; None: no coverage checks)."""
    command = [*CHECKER, str(report), *(["--topics", str(requests)] if requests else []),
               *(["--spec", spec] if spec else [])]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NLTK_DATA": str(nltk_data)})
    out = done.stdout + done.stderr
    assert done.returncode in (0, 255) and "reports valid" in done.stdout, out  # not a crash
    found = re.findall(r"^(PROBLEM|SMELL) \(affects \d+ report\(s\)\):\s+(.*)$", done.stdout, re.MULTILINE)
    coverage = re.findall(r"^\[(?:MISSING|NEW|DUP|NARRATIVE)\] .*$", done.stdout, re.MULTILINE)
    return Checked(done.returncode, [m for k, m in found if k == "PROBLEM"], [m for k, m in found if k == "SMELL"],
                   coverage, out)


def write_topics(folder: Path, topics: dict[str, str]) -> tuple[Path, Path]:
    """The track's topics TSV (ours to read) and the checker's Request JSONL of the same topics (the organizers'
    validator converts the TSV the same way: `{"request_id", "title"}`)."""
    folder.mkdir(parents=True, exist_ok=True)
    tsv = folder / "trec_rag_2026_queries.tsv"
    tsv.write_text("".join(f"{t}\t{text}\n" for t, text in topics.items()), encoding="utf-8")
    requests = folder / "requests.jsonl"
    requests.write_text("".join(json.dumps({"request_id": t, "title": text}, ensure_ascii=False) + "\n"
                                for t, text in topics.items()), encoding="utf-8")
    return tsv, requests


def as_checker_report(row: dict) -> dict:
    """A 2024 row in the checker's binding: its `Report` requires `metadata` (2024 put the run and topic at the top
    level), so the same references and answer go under a minimal one, checked structure-only."""
    return {"metadata": {"team_id": "ragtifier", "run_id": row["run_id"], "narrative_id": row["topic_id"],
                         "narrative": row["topic"]}, "references": row["references"], "answer": row["answer"]}
