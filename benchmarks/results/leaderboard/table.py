"""Print docs/benchmarks.md's LiveRAG leaderboard table from this folder: `leaderboard.csv` (the report's table of the
sweep, `python -m rag.report SWEEP`) and `cpu.json` (each cell's CPU seconds, sampled from /proc while the sweep ran).
A value carries the sweep summary's mark: `best`, or `tied` (not significantly different from the best)."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path


def number(row: dict[str, str], key: str, digits: int) -> str:
    value = row.get(key, "")
    return "-" if value in ("", None) else f"{float(value):.{digits}f}"


def marked(row: dict[str, str], key: str) -> str:
    mark = row.get(f"{key} mark", "")
    return number(row, key, 3) + (f" {mark}" if mark in ("best", "tied") else "")


def main(folder: Path) -> str:
    with open(folder / "leaderboard.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    cpu = json.loads((folder / "cpu.json").read_text())
    head = ["system", "questions", "answer F1", "correctness (-1..2)", "faithfulness (-1..1)",
            "gold recall after retrieval / after rerank (any gold document, prompt depth)", "LLM calls / q",
            "tokens / q", "wall s / q", "CPU s / q", "published correctness / faithfulness"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        n = int(float(row["questions"]))
        seconds = cpu.get(row["run"], {}).get("cpu_s")
        lines.append("| " + " | ".join([
            row["system"], str(n), marked(row, "answer F1"), marked(row, "correctness"), marked(row, "faithfulness"),
            f"{number(row, 'recall after retrieval', 2)} / {number(row, 'recall after rerank', 2)}",
            number(row, "LLM calls / q", 1), number(row, "tokens / q", 0), number(row, "seconds / q", 0),
            "-" if seconds is None else f"{seconds / n:.0f}",
            f"{row['published correctness']} / {row['published faithfulness']}"]) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(main(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)))
