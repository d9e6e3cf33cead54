"""Each evaluation's system ranking as a TREC AutoJudge leaderboard file, so `autojudge-evaluate` compares our
judges with anyone's (and anyone's with ours).

    python -m eval.summary SWEEP --no-wandb --leaderboards      # writes SWEEP/leaderboards/<evaluation>.txt

A leaderboard holds one evaluation over the sweep's complete cells (the systems): a line `run_id measure topic_id
value` per cell and topic with a value, and a line with topic `all` per cell holding the mean of its topics, the
format autojudge-evaluate reads as `tot` (`--eval-format tot`; its loader `autojudge_evaluate.eval_results.load`).
The run id is the cell's name, the measure the evaluation's name (`judge/liverag/correctness`,
`nuggets/vital_strict`, `scores/ir/retrieval/nDCG@10`...); which evaluations: every per-answer one present in all
cells (`eval.agreement.present_evaluations`), or those matching the given glob patterns.

A run's `all` row is its mean over its topics, so runs rank on it only where they answered the same topics. A sweep
over several question sets (`dataset=hotpotqa,musique`; `rag.sweep.question_sets`) gets one folder of leaderboards
per set, `leaderboards/<set>/<evaluation>.txt`, each holding that set's cells only; a sweep of one set writes
`leaderboards/<evaluation>.txt` as before.

A leaderboard is a ranking, so only of an evaluation the sweep's comparability gate lets rank
(`rag.judge.nugget_sets.NuggetSetGate`, the summary's): a nugget-based evaluation whose cells scored some topic
against different nugget sets gets no file (a stale one of an earlier write is removed, since autojudge-evaluate
would read it as a ranking); its one-line notice goes to `leaderboards/NOT_RANKED.md` instead (a Markdown file, so
a reader of the folder's `*.txt` leaderboards never takes it for one).
"""

from __future__ import annotations

import fnmatch
import logging
import math
from collections.abc import Sequence
from pathlib import Path

from rag.core.hashing import slug
from rag.core.io import atomic_write_text
from rag.sweep.cells import load_sweep
from rag.sweep.question_sets import question_sets

log = logging.getLogger(__name__)

#: the folder in the sweep that holds the files
LEADERBOARD_DIR = "leaderboards"
#: AutoJudge's topic id of a run's aggregate row
ALL_TOPICS = "all"
#: the notices of the evaluations left without a leaderboard (different nugget sets), in the same folder
NOT_RANKED_FILE = "NOT_RANKED.md"


def _token(text: str) -> str:
    """A whitespace-free field (the format splits on whitespace)."""
    return "_".join(str(text).split()) or "_"


def leaderboard_lines(runs: Sequence, evaluation: str) -> list[str]:
    """`run_id measure topic_id value` per run and topic with a value, then the run's `all` row (their mean)."""
    lines: list[str] = []
    measure = _token(evaluation)
    for run in runs:
        values = {topic: v[evaluation] for topic, v in run.topics.items()
                  if isinstance(v.get(evaluation), (int, float)) and math.isfinite(v[evaluation])}
        if not values:
            continue
        run_id = _token(run.name)
        lines += [f"{run_id} {measure} {_token(topic)} {value!r}" for topic, value in values.items()]
        lines.append(f"{run_id} {measure} {ALL_TOPICS} {sum(values.values()) / len(values)!r}")
    return lines


def _file(out: Path, evaluation: str) -> Path:
    return out / f"{slug(evaluation.replace('/', '-'))}.txt"


def write_leaderboards(sweep_dir: str | Path, patterns: Sequence[str] = (), out_dir: str | Path | None = None
                       ) -> dict[str, Path]:
    """One leaderboard file per evaluation of the sweep's complete cells that the gate lets rank (evaluation ->
    file; `evaluation@set` -> a question set's file when the sweep answered several), atomically; the notices of
    the others in `NOT_RANKED_FILE` (key `not_ranked`), none when all rank."""
    from eval.agreement import evaluation_kind, load_run, present_evaluations
    from rag.sweep.gate import sweep_gate

    sweep = load_sweep(sweep_dir)
    cells = [c for c in sweep.cells if c.complete and c.run.has_answers]
    runs = [load_run(c.dir, c.name) for c in cells]
    names = [e for e in present_evaluations(runs) if evaluation_kind(e) in (None, "per_answer")]
    if patterns:
        names = [e for e in names if any(fnmatch.fnmatchcase(e, p) for p in patterns)]
    out = Path(out_dir) if out_dir else sweep.dir / LEADERBOARD_DIR
    sets = question_sets(cells)
    gate = sweep_gate(sweep, question_sets=sets)
    by_set: dict[str, list] = {}
    for run in runs:
        by_set.setdefault(sets.get(run.name, ""), []).append(run)
    folders = {label: out / slug(label) if label else out for label in by_set}
    written: dict[str, Path] = {}
    notices = []
    for evaluation in names:
        if not gate.rankable(evaluation):
            notices.append(gate.notice(evaluation))
            for folder in folders.values():
                _file(folder, evaluation).unlink(missing_ok=True)
            continue
        for label, members in by_set.items():
            lines = leaderboard_lines(members, evaluation)
            if lines:
                key = f"{evaluation}@{label}" if label else evaluation
                written[key] = _file(folders[label], evaluation)
                atomic_write_text(written[key], "\n".join(lines) + "\n")
    (out / NOT_RANKED_FILE).unlink(missing_ok=True)
    if notices:
        log.warning("no AutoJudge leaderboard for %d evaluation(s) scored against different nugget sets: %s",
                    len(notices), "; ".join(str(n) for n in notices))
        written["not_ranked"] = out / NOT_RANKED_FILE
        atomic_write_text(written["not_ranked"], "No leaderboard (cells scored against different nugget sets):\n\n"
                          + "".join(f"- {n}\n" for n in notices))
    return written
