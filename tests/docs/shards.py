"""The documented commands as several pytest sessions: `RAG_TEST_SHARD=k/n` keeps shard k of n (`tests/halves.py`).

Why: one session runs one command at a time on one thread, so on CI's 2 cores the docs session was the last to end
(64.8 of a 69.8-minute `.ci/run`, the other sessions done 20 minutes earlier). Rows are not independent: a row may
read the folder another row makes (`Run.fills` naming a `Run.makes`) or a fixture the session builds once (a judged
sweep, a crucible run), so rows that share a producer or a fixture go to one shard together (connected components),
and the components are dealt out largest first to the lightest shard. The weights are seconds measured in a CI
log (`durations.json`; a row not listed counts `DEFAULT_SECONDS`): a stale weight only unbalances the shards, it
never changes what runs.
"""

from __future__ import annotations

import json
import os
import re
import string
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from tests.docs.table import ROWS, Run

DURATIONS = Path(__file__).with_name("durations.json")
#: the weight of a row the durations file does not list (most rows take seconds to a minute)
DEFAULT_SECONDS = 20.0
ENV = "RAG_TEST_SHARD"


def row_id(text: str) -> str:
    """The pytest id of a documented command's test (`test_documented_commands._params`)."""
    return re.sub(r"\s+", " ", text)[:90]


def parse(value: str | None) -> tuple[int, int] | None:
    """`k/n` -> (k, n), 1 <= k <= n; None when unset."""
    if not value:
        return None
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", value)
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
        raise pytest.UsageError(f"{ENV}={value!r}: expected k/n with 1 <= k <= n, e.g. 1/2")
    return int(match.group(1)), int(match.group(2))


def _needs(text: str) -> set[str]:
    """The folders and fixtures a row reads (its `fills` templates' names)."""
    row = ROWS[text]
    if not isinstance(row, Run):
        return set()
    return {name for template in row.fills.values() for _, name, _, _ in string.Formatter().parse(template) if name}


def components(texts: Iterable[str]) -> list[list[str]]:
    """Rows grouped so that a row, the row making a folder it reads and the rows sharing a fixture with it are in
    one group (union-find over rows and the names they read or make)."""
    texts = list(texts)
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        parent.setdefault(key, key)
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    makes = {r.makes: t for t, r in ROWS.items() if isinstance(r, Run) and r.makes}
    for text in texts:
        for name in _needs(text):
            parent[root(f"name:{name}")] = root(f"row:{text}")
            if name in makes:  # the producing row itself
                parent[root(f"row:{makes[name]}")] = root(f"row:{text}")
    groups: dict[str, list[str]] = {}
    for text in texts:
        groups.setdefault(root(f"row:{text}"), []).append(text)
    return list(groups.values())


def weights() -> dict[str, float]:
    return {k: float(v) for k, v in json.loads(DURATIONS.read_text())["seconds"].items()}


def assign(texts: Sequence[str], n: int) -> dict[str, int]:
    """Row text -> its shard (1..n): components largest first, each to the shard with the least weight so far."""
    known = weights()
    cost = {t: known.get(row_id(t), DEFAULT_SECONDS) for t in texts}
    load = [0.0] * n
    out: dict[str, int] = {}
    for group in sorted(components(texts), key=lambda g: (-sum(cost[t] for t in g), g[0])):
        lightest = min(range(n), key=lambda i: (load[i], i))
        load[lightest] += sum(cost[t] for t in group)
        out.update({t: lightest + 1 for t in group})
    return out


def select(items: list, config) -> None:
    """pytest_collection_modifyitems for the docs sessions: keep this shard's items, deselect the rest. Documented
    commands by `assign`; every other test of tests/docs by its position (cheap tests, dealt out in turn)."""
    shard = parse(os.environ.get(ENV))
    if shard is None:
        return
    k, n = shard
    docs = Path(__file__).resolve().parent
    mine = [i for i in items if docs in Path(i.path).resolve().parents]
    commands = {i.callspec.params["doc"] for i in mine
                if i.originalname == "test_documented_command" and hasattr(i, "callspec")}
    placed = assign(sorted(commands), n)
    keep, drop, turn = [], [], 0
    for item in items:
        if item not in mine:
            keep.append(item)
            continue
        if item.originalname == "test_documented_command" and hasattr(item, "callspec"):
            ours = placed[item.callspec.params["doc"]] == k
        else:
            ours = turn % n == k - 1
            turn += 1
        (keep if ours else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
