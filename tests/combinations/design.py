"""The combinations of options, generated from `conf/`: a pairwise covering design over the swept config groups.

Every option file of every group in `GROUPS` is a factor level; a cell is one option per group. The design covers
every pair of options from two different groups in at least one cell (`allpairspy`, a maintained greedy
covering-array generator from PyPI, with a filter for the combinations `tests/combinations/table.py` declares:
refused ones get a cell of their own, costly ones are named with their reason). Hydra launchers other than the
in-process default get cells of their own, which together hold every option of every other group (one multirun per
launcher: a launcher starts processes, so the pairs it forms are covered by fewer, larger sweeps). Numeric knobs
that change behaviour are crossed as edge cells. A new option file in `conf/` joins the design with no test change.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from allpairspy import AllPairs

CONF = Path(__file__).resolve().parents[2] / "conf"
#: the groups a sweep crosses (the pipeline's stages, its engines and what it reports to), in pipeline order
GROUPS = ("dataset", "query", "retriever", "rerank", "ordering", "compress", "generator", "attribution",
          "judge", "metrics", "attack", "llm", "logger", "substitutions")
LAUNCHER = "hydra/launcher"
#: the launcher a plain `python -m rag.main` (and a multirun without hydra/launcher=...) uses: Hydra's own
IN_PROCESS = "basic"


def options(group: str) -> list[str]:
    """The option files of one config group, sorted: what `group=NAME` may name."""
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def launchers() -> list[str]:
    return [IN_PROCESS, *options(LAUNCHER)]


Cell = dict[str, str]


@dataclass
class Design:
    """The cells of the combinations test and what they cover."""

    #: in-process cells from the pairwise design
    pairwise: list[Cell] = field(default_factory=list)
    #: launcher -> the cells it runs as one multirun
    by_launcher: dict[str, list[Cell]] = field(default_factory=dict)
    #: (name, cell, extra overrides): numeric knobs at the values where behaviour changes
    edges: list[tuple[str, Cell, list[str]]] = field(default_factory=list)
    #: (refusal name, cell): one cell per declared refusal, run alone
    refused: list[tuple[str, Cell]] = field(default_factory=list)

    def completing(self) -> list[Cell]:
        return [*self.pairwise, *(c for cells in self.by_launcher.values() for c in cells),
                *(cell for _, cell, _ in self.edges)]


def pairs_of(cell: Mapping[str, str]) -> set[tuple[tuple[str, str], tuple[str, str]]]:
    """Every pair of (group, option) of a cell, from two different groups, in a canonical order."""
    items = sorted(cell.items())
    return {(a, b) for a, b in itertools.combinations(items, 2)}


def all_pairs(groups: Mapping[str, list[str]]) -> set[tuple[tuple[str, str], tuple[str, str]]]:
    names = sorted(groups)
    return {((g, o), (h, p)) for g, h in itertools.combinations(names, 2) for o in groups[g] for p in groups[h]}


def pairwise_cells(groups: Mapping[str, list[str]], allowed: Callable[[Cell], bool]) -> list[Cell]:
    """A pairwise covering design over `groups` that never holds a combination `allowed` rejects (it sees partial
    cells: the groups chosen so far, in `groups`' order)."""
    names = list(groups)

    def keep(row: list[str]) -> bool:
        return allowed(dict(zip(names, row)))

    cells = [dict(zip(names, row)) for row in AllPairs([groups[g] for g in names], filter_func=keep)]
    return cells + missing_pair_cells(cells, groups, allowed)


def missing_pair_cells(cells: list[Cell], groups: Mapping[str, list[str]],
                       allowed: Callable[[Cell], bool]) -> list[Cell]:
    """Cells for the pairs a filtered greedy generator leaves out (allpairspy may skip a pair its filter makes hard
    to reach): each starts from one missing pair and fills every other group with the option that covers the most
    pairs still missing, keeping the cell allowed."""
    missing = {p for p in all_pairs(groups) - covered(cells) if allowed(dict(p))}
    out: list[Cell] = []
    while missing:
        (g1, o1), (g2, o2) = min(missing)
        cell: Cell = {g1: o1, g2: o2}
        for group in groups:
            if group in cell:
                continue
            fits = [o for o in groups[group] if allowed({**cell, group: o})]
            cell[group] = max(fits, key=lambda o, g=group, c=dict(cell): _gain(c, g, o, missing)) if fits \
                else groups[group][0]
        cell = {g: cell[g] for g in groups}
        out.append(cell)
        missing -= pairs_of(cell)
    return out


def cheapen(cells: list[Cell], groups: Mapping[str, list[str]], allowed: Callable[[Cell], bool],
            cost: Callable[[str, str], float]) -> list[Cell]:
    """The same coverage at less cost: in each cell, an option that costs more than another of its group (a W&B
    run, a real model, a corpus to encode) is swapped for the cheapest allowed one wherever every pair it formed
    there is also in another cell. Greedy, most expensive first; every pair the cells covered stays covered."""
    cells = [dict(c) for c in cells]
    counts = Counter(pair for cell in cells for pair in pairs_of(cell))  # how many cells hold each pair
    for group, option in sorted({(g, o) for c in cells for g, o in c.items()}, key=lambda go: -cost(*go)):
        for i, cell in enumerate(cells):
            if cell.get(group) != option:
                continue
            mine = {p for p in pairs_of(cell) if (group, option) in p}
            if any(counts[p] < 2 for p in mine):  # a pair only this cell holds
                continue
            cheaper = sorted((o for o in groups[group] if cost(group, o) < cost(group, option)
                              and allowed({**cell, group: o})), key=lambda o: cost(group, o))
            if cheaper:
                counts.subtract(pairs_of(cell))
                cells[i] = {**cell, group: cheaper[0]}
                counts.update(pairs_of(cells[i]))
    return cells


def _gain(cell: Cell, group: str, option: str, missing: set) -> int:
    """How many still-missing pairs `group=option` would cover beside the cell's chosen options."""
    return sum(1 for g, o in cell.items() if tuple(sorted([(g, o), (group, option)])) in missing)


def launcher_cells(groups: Mapping[str, list[str]], allowed: Callable[[Cell], bool], shift: int) -> list[Cell]:
    """Few cells that together hold every option of every group, each cell allowed: what one launcher runs as one
    multirun. Each cell starts from an option not yet run and fills the other groups with options not yet run
    (rotated by `shift`, so two launchers see other crossings), else any that keeps the cell allowed."""
    unseen = {(g, o) for g, opts in groups.items() for o in opts if allowed({g: o})}
    out: list[Cell] = []
    while unseen:
        first = min(unseen)
        cell: Cell = dict([first])
        for group, opts in groups.items():
            if group in cell:
                continue
            rotated = opts[shift % len(opts):] + opts[:shift % len(opts)]
            fits = [o for o in rotated if allowed({**cell, group: o})]
            cell[group] = next((o for o in fits if (group, o) in unseen), fits[0] if fits else opts[0])
        cell = {g: cell[g] for g in groups}
        out.append(cell)
        unseen -= set(cell.items())
    return out


def covered(cells: Iterable[Mapping[str, str]]) -> set[tuple[tuple[str, str], tuple[str, str]]]:
    return set().union(*(pairs_of(c) for c in cells)) if cells else set()
