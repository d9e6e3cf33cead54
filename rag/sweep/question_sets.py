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

from collections.abc import Iterable, Mapping, Sequence

from rag.core.errors import DataError
from rag.folders import RunFolder
from rag.sweep.cells import Cell


def question_source(folder: RunFolder, dataset_value: str = "") -> str:
    """Where a run's questions come from, from its saved config: the questions file (`dataset.questions.path`),
    else the dataset's name (`dataset_value`: the swept `dataset=` value, for a config without one). Two files may
    number their questions alike (LiveRAG's dev set and its live-day file both have a question "1"), so a question
    is its id within its source."""
    dataset = (folder.saved_config or {}).get("dataset") or {}
    questions = dataset.get("questions") if isinstance(dataset, dict) else None
    path = questions.get("path") if isinstance(questions, dict) else None
    return str(path or dataset.get("name") or dataset_value)


def answered_ids(folder: RunFolder, dataset_value: str = "") -> list[str]:
    """The questions of a complete run's answers.jsonl, as `source<TAB>id` (`question_source`); none when the
    file cannot be read: the run is then a set of its own, and the summary's own reading of it reports the
    fault."""
    source = question_source(folder, dataset_value)
    try:
        return [f"{source}\t{row.get('id')}" for row in folder.rows()]
    except (DataError, OSError, ValueError):
        return []


def set_label(folder: RunFolder, dataset_value: str = "") -> str:
    """The dataset a run answered from its saved config: `name`, with `(multi-hop)` / `(single-hop)` when
    `dataset.hop` kept one kind."""
    dataset = (folder.saved_config or {}).get("dataset") or {}
    name = str(dataset.get("name") or dataset_value or "questions")
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
    return run_question_sets({c.name: (c.run, c.values.get("dataset", "")) for c in cells if c.complete})


def run_question_sets(runs: Mapping[str, tuple[RunFolder, str]]) -> dict[str, str]:
    """`question_sets` over any finished run folders: name -> (folder, its swept `dataset=` value or "")."""
    groups = components({name: answered_ids(folder, value) for name, (folder, value) in runs.items()})
    if len(groups) <= 1:
        return {name: "" for name in runs}
    labels = [set_label(*runs[group[0]]) for group in groups]
    out: dict[str, str] = {}
    for index, (group, label) in enumerate(zip(groups, labels)):
        number = labels[:index + 1].count(label)
        named = label if labels.count(label) == 1 else f"{label} #{number}"
        out.update({name: named for name in group})
    return out
