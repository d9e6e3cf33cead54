"""Is one run's token F1 really above another's? A paired comparison over the questions both runs answered.

Usage: `python benchmarks/paired_f1.py --a SRC [SRC ...] --b SRC [SRC ...] [--names A B] [--n-boot 10000]
[--json out.json] [--export DIR]` (or the two-run form `paired_f1.py RUN_A RUN_B`). A source is a run folder with an
answers.jsonl whose records carry `scores.f1`, or a JSONL file of such records; several sources on one side are
joined by question id (slices of one benchmark run with `dataset.offset`, some of them committed under
benchmarks/results/). For all questions and by hop (single, multi), from the sweep summary's own paired test
(`rag.metrics.stats.paired_comparison`): the mean F1 of each side, the mean per-question difference A - B with a
paired percentile bootstrap 95% interval over questions, the two-sided p of the paired randomization test
(seeded; exact when 2^k swaps of the k differing questions fit in the resamples), the paired effect size d_z and
the minimum detectable difference at this n (alpha 0.05, power 0.8); plus wins / ties / losses of A. The
splits are not corrected for multiple comparisons (three looks at one pair; `python -m eval.summary` corrects a
sweep's). `--export DIR` writes each side's per-question F1 as `DIR/<name>.jsonl` (id, hop,
scores.f1), small enough to keep beside the figures they back. Used by benchmarks/llm_compare.sh to compare two
models on the same questions and passages: a 20-question gap can be noise, and this says how much of it is.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag.core.io import atomic_write_jsonl, iter_jsonl_numbered  # noqa: E402
from rag.metrics.stats import paired_comparison  # noqa: E402


def f1_by_id(source: Path) -> dict[str, tuple[str, float]]:
    """Question id -> (hop, token F1) for every scored answer of a run folder or a JSONL file of records."""
    path = source / "answers.jsonl" if source.is_dir() else source
    if not path.is_file():
        raise SystemExit(f"{source}: neither a finished run folder (no answers.jsonl) nor a JSONL file")
    out = {}
    for line, record in iter_jsonl_numbered(path):
        f1 = (record.get("scores") or {}).get("f1")
        if f1 is None:
            raise SystemExit(f"{path}:{line}: record {record.get('id')!r} has no scores.f1")
        out[str(record["id"])] = (record.get("hop") or "unknown", float(f1))
    return out


def joined(sources: list[Path]) -> dict[str, tuple[str, float]]:
    """One side's answers from several sources; a question answered in two of them is refused (slices of one
    benchmark must not overlap, or its answer would count once with either value)."""
    out: dict[str, tuple[str, float]] = {}
    for source in sources:
        part = f1_by_id(source)
        twice = sorted(set(part) & set(out))
        if twice:
            raise SystemExit(f"{source}: questions {twice[:3]} also come from an earlier source of the same side")
        out.update(part)
    return out


def export(scores: dict[str, tuple[str, float]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_jsonl(path, [{"id": q, "hop": hop, "scores": {"f1": f1}} for q, (hop, f1) in sorted(scores.items())])


def _round(value: float, digits: int) -> float | None:
    return None if np.isnan(value) else round(value, digits)


def compare(a: dict[str, tuple[str, float]], b: dict[str, tuple[str, float]], n_boot: int, seed: int = 0,
            permutations: int = 10000) -> dict:
    shared = sorted(set(a) & set(b))
    out: dict = {"questions_a": len(a), "questions_b": len(b), "shared": len(shared)}
    for split in ("all", "single", "multi"):
        ids = [q for q in shared if split == "all" or a[q][0] == split]
        if not ids:
            continue
        r = paired_comparison([a[q][1] for q in ids], [b[q][1] for q in ids], permutations=permutations,
                              bootstrap=n_boot, seed=seed)
        diff = np.array([a[q][1] - b[q][1] for q in ids])
        out[split] = {"n": r.n, "f1_a": round(r.mean_a, 4), "f1_b": round(r.mean_b, 4),
                      "difference": round(r.difference, 4),
                      "ci95": [_round(r.interval.low, 4), _round(r.interval.high, 4)],
                      "ci_note": r.interval.reason,
                      "wins_ties_losses": [int((diff > 0).sum()), int((diff == 0).sum()), int((diff < 0).sum())],
                      "p_randomization": round(r.p_value, 5), "test": r.test,
                      "effect_size_dz": _round(r.effect_size, 4), "mdd": _round(r.mdd, 4)}
    return out


def to_markdown(result: dict, name_a: str, name_b: str) -> str:
    lines = [f"| questions | F1 {name_a} | F1 {name_b} | difference (95% CI) | {name_a} wins / ties / losses "
             "| randomization p | d_z | MDD |", "|---|---|---|---|---|---|---|---|"]
    for split in ("all", "single", "multi"):
        if split in result:
            r = result[split]
            w, t, lo = r["wins_ties_losses"]
            ci = f"({r['ci95'][0]:+.3f}, {r['ci95'][1]:+.3f})" if r["ci95"][0] is not None else \
                f"(no interval: {r['ci_note']})"
            dz = "-" if r["effect_size_dz"] is None else f"{r['effect_size_dz']:+.2f}"
            mdd = "-" if r["mdd"] is None else f"{r['mdd']:.3f}"
            lines.append(f"| {split} ({r['n']}) | {r['f1_a']:.3f} | {r['f1_b']:.3f} | {r['difference']:+.3f} "
                         f"{ci} | {w} / {t} / {lo} | {r['p_randomization']:.3g} | {dz} | {mdd} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, nargs="*", help="RUN_A RUN_B (the two-run form)")
    parser.add_argument("--a", type=Path, nargs="+", default=[], help="side A: run folders or JSONL files")
    parser.add_argument("--b", type=Path, nargs="+", default=[], help="side B: run folders or JSONL files")
    parser.add_argument("--n-boot", type=int, default=10000)
    parser.add_argument("--names", nargs=2, default=["A", "B"], help="labels of the two sides in the table")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--export", type=Path, default=None, help="write DIR/<name>.jsonl per side")
    args = parser.parse_args()
    if args.runs:
        if len(args.runs) != 2 or args.a or args.b:
            parser.error("give two runs (RUN_A RUN_B) or --a ... --b ..., not both")
        args.a, args.b = [args.runs[0]], [args.runs[1]]
    if not (args.a and args.b):
        parser.error("both sides are needed: RUN_A RUN_B, or --a ... --b ...")
    side_a, side_b = joined(args.a), joined(args.b)
    result = compare(side_a, side_b, args.n_boot)
    result.update(sources_a=[str(p) for p in args.a], sources_b=[str(p) for p in args.b])
    print(to_markdown(result, *args.names))
    for name, sources in zip(args.names, (args.a, args.b)):
        print(f"{name} = {' + '.join(map(str, sources))}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    if args.export:
        for name, scores in zip(args.names, (side_a, side_b)):
            export(scores, args.export / f"{name}.jsonl")


if __name__ == "__main__":
    main()
