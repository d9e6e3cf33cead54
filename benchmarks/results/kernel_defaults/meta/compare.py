"""Two `eval.meta` runs' judgments of the same answers, side by side: how many agree, and each side's spread.

Usage: `python compare.py OLD/judged.jsonl NEW/judged.jsonl` (the files `python -m eval.meta` writes).
"""

from __future__ import annotations

import json
import sys
from collections import Counter


def judgments(path: str) -> dict[str, dict]:
    with open(path) as handle:
        records = [json.loads(line) for line in handle]
    return {record["id"]: record["judges"] for record in records}


def main(old_path: str, new_path: str) -> None:
    old, new = judgments(old_path), judgments(new_path)
    ids = sorted(set(old) & set(new))
    same_correctness = sum(old[i]["liverag"].get("correctness") == new[i]["liverag"].get("correctness") for i in ids)
    same_verdict = sum(old[i]["pairwise"].get("verdict") == new[i]["pairwise"].get("verdict") for i in ids)
    print(len(ids), "answers; liverag correctness same:", same_correctness, "; pairwise verdict same:", same_verdict)
    for name, side in (("old", old), ("new", new)):
        attempts = sum(side[i]["liverag"].get("attempts", 1) + side[i]["pairwise"].get("attempts", 1) for i in ids)
        print(name, Counter(side[i]["liverag"].get("correctness") for i in ids),
              Counter(side[i]["pairwise"].get("verdict") for i in ids), "attempts", attempts)


if __name__ == "__main__":
    main(*sys.argv[1:3])
