"""Print docs/benchmarks.md's multi-hop table from a sweep folder of experiment=multihop, or from this folder
(`cells/<cell>/metrics.json` and `significance.json`, kept from that sweep): one row per cell, bold where the
sweep summary marks the value best or tied with the best of its dataset."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

COLUMNS = ["dataset", "generator", "F1", "gold recall, top 5", "gold recall, used", "passages used", "LLM calls / q",
           "prompt tokens / q", "completion tokens / q", "searches / q", "budget stops", "parse failures",
           "generate s / q"]


def cells(folder: Path) -> list[Path]:
    root = folder / "cells" if (folder / "cells").is_dir() else folder
    found = [p for p in root.iterdir() if (p / "metrics.json").is_file() and p.name[:1].isdigit()]
    return sorted(found, key=lambda p: int(p.name.split("_", 1)[0]))


def number(metrics: dict, key: str, digits: int = 3) -> str:
    return "" if metrics.get(key) is None else f"{metrics[key]:.{digits}f}"


def main(folder: Path) -> str:
    marks = json.loads((folder / "significance.json").read_text())["marks"]

    def bold(column: str, cell: str, text: str) -> str:
        group = marks.get(column) or {}
        return f"**{text}**" if cell in group.get("best", []) + group.get("tied", []) else text

    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for cell in cells(folder):
        m = json.loads((cell / "metrics.json").read_text())
        n = m["n_questions"]
        values = dict(re.findall(r"(dataset|generator)=([^,]+)", cell.name))

        loop = "loop/searches_per_question" in m
        lines.append("| " + " | ".join([
            values["dataset"], values["generator"], bold("answer/f1/all", cell.name, number(m, "answer/f1/all")),
            number(m, "recall/rerank@5/all", 2), bold("recall/used/all", cell.name, number(m, "recall/used/all", 2)),
            number(m, "passages/used/all", 1), f"{(m['llm_calls'] + m['llm_cache_hits']) / n:.1f}",
            f"{m['prompt_tokens'] / n:,.0f}", f"{m['completion_tokens'] / n:,.0f}",
            number(m, "loop/searches_per_question", 2) if loop else "-", number(m, "loop/budget_stop_rate", 2) if loop else "-",
            str(m.get("parse_failures", 0)), f"{m['time/generate_s'] / n:.1f}"]) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(main(Path(sys.argv[1])))
