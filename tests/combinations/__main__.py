"""`python -m tests.combinations`: the combinations test's cells and the pairs they cover, without running them.

Prints every cell (one line each: its options), the cells each launcher runs as one multirun, the refused
combinations with their reasons, the costly ones with the test that covers them, and how many of the pairs of
options across groups the completing cells cover.
"""

from __future__ import annotations

import argparse

from tests.combinations import design as d
from tests.combinations import table as t
from tests.combinations.test_combinations import DESIGN, GROUPS, _cell_id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.combinations", description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", action="store_true", help="also list every covered pair with its first cell")
    args = parser.parse_args(argv)
    print(f"groups: {', '.join(f'{g} ({len(o)})' for g, o in GROUPS.items())}")
    print(f"\n{len(DESIGN.pairwise)} in-process cells (hydra/launcher={d.IN_PROCESS}):")
    for i, cell in enumerate(DESIGN.pairwise):
        print(f"  c{i:03d} {_cell_id(cell)}")
    for launcher, cells in DESIGN.by_launcher.items():
        print(f"\nhydra/launcher={launcher}: {len(cells)} cells in one multirun")
        for i, cell in enumerate(cells):
            print(f"  {launcher}-c{i:02d} {_cell_id(cell)}")
    print(f"\n{len(DESIGN.edges)} edge cells:")
    for name, _cell, extra in DESIGN.edges:
        print(f"  {name}: {' '.join(extra)}")
    print(f"\n{len(t.REFUSALS)} refused combinations (each run alone, expected to end in one line):")
    for refusal in t.REFUSALS:
        print(f"  {refusal.name}: {refusal.why}")
    wanted = d.all_pairs(GROUPS)
    ran = d.covered(DESIGN.pairwise)
    refused = {p for p in wanted if t.refusal_for(dict(p))}
    costly = {p for p in wanted - refused if not t.allowed(dict(p))}
    print(f"\n{len(costly)} costly pairs, left out:")
    for item in t.COSTLY:
        print(f"  {item.why}; covered by {item.covered_by}")
    print(f"\npairs of options across groups: {len(wanted)}; in a completing cell: {len(ran & wanted)}; refused: "
          f"{len(refused)}; costly: {len(costly)}; in none: {len(wanted - ran - refused - costly)}")
    if args.pairs:
        for pair in sorted(ran & wanted):
            first = next(i for i, c in enumerate(DESIGN.pairwise) if all(c.get(g) == o for g, o in pair))
            print(f"  {pair[0][0]}={pair[0][1]} x {pair[1][0]}={pair[1][1]}: c{first:03d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
