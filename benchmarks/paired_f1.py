"""Is one run's token F1 really above another's? A paired comparison over the questions both runs answered.

Usage: `python benchmarks/paired_f1.py RUN_A RUN_B [--names A B] [--n-boot 10000] [--json out.json]` (run folders with an
answers.jsonl whose records carry `scores.f1`). For all questions and by hop (single, multi): the mean F1 of each
run, the mean per-question difference A - B with a percentile bootstrap CI over questions (one set of resamples,
rag.report.stats), wins / ties / losses of A, and the two-sided Wilcoxon signed-rank p-value of the differences
(scipy; ties dropped). Used by benchmarks/llm_compare.sh to compare two models on the same questions and passages:
a 20-question gap can be noise, and this says how much of it is.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag.core.io import iter_jsonl_numbered  # noqa: E402
from rag.report.stats import bootstrap_means  # noqa: E402


def f1_by_id(run: Path) -> dict[str, tuple[str, float]]:
    """Question id -> (hop, token F1) for every answer of a run that was scored."""
    path = run / "answers.jsonl"
    if not path.is_file():
        raise SystemExit(f"{run}: no answers.jsonl (not a finished run folder)")
    out = {}
    for line, record in iter_jsonl_numbered(path):
        f1 = (record.get("scores") or {}).get("f1")
        if f1 is None:
            raise SystemExit(f"{path}:{line}: record {record.get('id')!r} has no scores.f1")
        out[str(record["id"])] = (record.get("hop") or "unknown", float(f1))
    return out


def compare(a: dict[str, tuple[str, float]], b: dict[str, tuple[str, float]], n_boot: int, seed: int = 0) -> dict:
    from scipy.stats import wilcoxon

    shared = sorted(set(a) & set(b))
    out: dict = {"questions_a": len(a), "questions_b": len(b), "shared": len(shared)}
    for split in ("all", "single", "multi"):
        ids = [q for q in shared if split == "all" or a[q][0] == split]
        if not ids:
            continue
        pairs = np.array([[a[q][1], b[q][1], a[q][1] - b[q][1]] for q in ids])
        mean, low, high = bootstrap_means(pairs, n_boot=n_boot, seed=seed)
        diff = pairs[:, 2]
        nonzero = diff[diff != 0]
        p = float(wilcoxon(nonzero).pvalue) if len(nonzero) >= 2 else float("nan")
        out[split] = {"n": len(ids), "f1_a": round(mean[0], 4), "f1_b": round(mean[1], 4),
                      "difference": round(mean[2], 4), "ci95": [round(low[2], 4), round(high[2], 4)],
                      "wins_ties_losses": [int((diff > 0).sum()), int((diff == 0).sum()), int((diff < 0).sum())],
                      "wilcoxon_p": round(p, 5)}
    return out


def to_markdown(result: dict, name_a: str, name_b: str) -> str:
    lines = [f"| questions | F1 {name_a} | F1 {name_b} | difference (95% CI) | {name_a} wins / ties / losses "
             "| Wilcoxon p |", "|---|---|---|---|---|---|"]
    for split in ("all", "single", "multi"):
        if split in result:
            r = result[split]
            w, t, lo = r["wins_ties_losses"]
            lines.append(f"| {split} ({r['n']}) | {r['f1_a']:.3f} | {r['f1_b']:.3f} | {r['difference']:+.3f} "
                         f"({r['ci95'][0]:+.3f}, {r['ci95'][1]:+.3f}) | {w} / {t} / {lo} | {r['wilcoxon_p']:.3g} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    parser.add_argument("--n-boot", type=int, default=10000)
    parser.add_argument("--names", nargs=2, default=["A", "B"], help="labels of the two runs in the table")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = compare(f1_by_id(args.run_a), f1_by_id(args.run_b), args.n_boot)
    result.update(run_a=str(args.run_a), run_b=str(args.run_b))
    print(to_markdown(result, *args.names))
    print(f"{args.names[0]} = {args.run_a}\n{args.names[1]} = {args.run_b}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
