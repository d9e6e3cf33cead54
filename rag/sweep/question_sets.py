"""Which cells of a sweep answered the same questions.

A sweep over `dataset=hotpotqa,musique,liverag_dev` holds three question sets: a best cell, a group tied with it
or a paired test means something only among cells that answered the same questions. Cells whose answered questions
overlap form one set (connected components), so `dataset.limit=10` and `dataset.limit=20` of one file stay one set,
compared as before over the questions both answered; cells of different files never share a question, even where
both files number their questions alike (a question is its id within its file: `question_source`).
The sweep summary ranks each column within each set (`eval.summary`), the paired tests pair cells only within one
(`eval.significance`), battles are scheduled and rated within each (`eval.battles`) and each set gets its own
AutoJudge leaderboards (`eval.autojudge`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rag.core.errors import DataError
from rag.sweep.cells import Cell


def question_source(cell: Cell) -> str:
    """Where a cell's questions come from, from its saved config: the questions file (`dataset.questions.path`),
    else the dataset's name. Two files may number their questions alike (LiveRAG's dev set and its live-day file
    both have a question "1"), so a question is its id within its source."""
    dataset = (cell.run.saved_config or {}).get("dataset") or {}
    questions = dataset.get("questions") if isinstance(dataset, dict) else None
    path = questions.get("path") if isinstance(questions, dict) else None
    return str(path or dataset.get("name") or cell.values.get("dataset") or "")


def answered_ids(cell: Cell) -> list[str]:
    """The questions of a complete cell's answers.jsonl, as `source<TAB>id` (`question_source`); none when the
    file cannot be read: the cell is then a set of its own, and the summary's own reading of it reports the
    fault."""
    source = question_source(cell)
    try:
        return [f"{source}\t{row.get('id')}" for row in cell.run.rows()]
    except (DataError, OSError, ValueError):
        return []


def set_label(cell: Cell) -> str:
    """The dataset a cell answered from its saved config: `name`, with `(multi-hop)` / `(single-hop)` when
    `dataset.hop` kept one kind."""
    dataset = (cell.run.saved_config or {}).get("dataset") or {}
    name = str(dataset.get("name") or cell.values.get("dataset") or "questions")
    hop = dataset.get("hop")
    return f"{name} ({hop}-hop)" if hop else name


def components(ids_of: dict[str, Iterable[str]]) -> list[list[str]]:
    """Cell names grouped by shared question ids (union-find), each group in the given order, groups by their
    first member."""
    parent = {name: name for name in ids_of}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    owner: dict[str, str] = {}
    for name, ids in ids_of.items():
        for qid in ids:
            if qid in owner:
                parent[root(name)] = root(owner[qid])
            else:
                owner[qid] = name
    groups: dict[str, list[str]] = {}
    for name in ids_of:
        groups.setdefault(root(name), []).append(name)
    return list(groups.values())


def question_sets(cells: Sequence[Cell]) -> dict[str, str]:
    """Complete cell name -> the label of its question set; every label is "" when the cells form one set (the
    usual sweep), so nothing downstream changes for it. Labels name the dataset, numbered where two sets share
    one (e.g. `musique #2` for a slice by `dataset.offset` that no other cell overlaps)."""
    complete = [c for c in cells if c.complete]
    groups = components({c.name: answered_ids(c) for c in complete})
    if len(groups) <= 1:
        return {c.name: "" for c in complete}
    by_name = {c.name: c for c in complete}
    labels = [set_label(by_name[group[0]]) for group in groups]
    out: dict[str, str] = {}
    for index, (group, label) in enumerate(zip(groups, labels)):
        number = labels[:index + 1].count(label)
        named = label if labels.count(label) == 1 else f"{label} #{number}"
        out.update({name: named for name in group})
    return out
