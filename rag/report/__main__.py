"""`python -m rag.report SWEEP_DIR [--latency FILE ...] [--out DIR]`: write SWEEP_DIR/report/."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from rag.core.errors import DataError, MissingDataError


def main(argv: Sequence[str] | None = None) -> int:
    import matplotlib

    matplotlib.use("Agg")
    from rag.report.build import build_report

    parser = argparse.ArgumentParser(prog="python -m rag.report",
                                     description="Table 1, Fig. 4, Fig. 5, agreement heatmap and strategy cost "
                                                 "of a sweep (or run) folder, as PNG/PDF and report.md.")
    parser.add_argument("sweep_dir", type=Path, help="a sweep folder, a run folder, or a folder of runs")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default SWEEP_DIR/report)")
    parser.add_argument("--latency", type=Path, nargs="*", default=[],
                        help="benchmarks/latency_at_k.py results for Fig. 5 (default: SWEEP_DIR/latency_at_k*.json)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for the 95%% CIs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--formats", default="png,pdf", help="figure formats, comma-separated")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        report = build_report(args.sweep_dir, out_dir=args.out, latency=args.latency,
                              formats=[f for f in args.formats.split(",") if f], n_boot=args.bootstrap,
                              seed=args.seed)
    except (DataError, MissingDataError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"report: {report.dir / 'report.md'}")
    for name, files in report.figures.items():
        print(f"  {name}: " + ", ".join(files.values()))
    for name, why in report.skipped.items():
        print(f"  {name}: not drawn ({why})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
