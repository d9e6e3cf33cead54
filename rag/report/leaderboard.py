"""The leaderboard: one row per named system of a sweep (`system:` in its experiment file, e.g.
`experiment=ragtifier,liverag_preqrag,liverag_magikarp,liverag_topclust,liverag_grag`), with what this sweep measured
beside what the system's paper and the LiveRAG organisers published.

Measured: answer token F1 and the LiveRAG judge's correctness (-1..2) and faithfulness (-1..1) means, each with the
sweep summary's mark (bold: best or statistically tied with it); gold-document recall after retrieval and after
reranking at the prompt's depth; LLM calls, tokens and seconds per question (without the index build).
Published: the live day's correctness and faithfulness as the system's `system.published` names them, with their
source. Measured and published numbers come from different models, corpora and questions: the table puts them side
by side, it does not compare them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rag.metrics.marks import marked
from rag.report.data import RunData, SweepData, is_number

F1 = "answer/f1/all"
JUDGED = {"correctness": "judge/liverag/correctness/all", "faithfulness": "judge/liverag/faithfulness/all"}


@dataclass(frozen=True)
class LeaderboardRow:
    system: str
    run: str
    values: dict[str, float | None]
    marks: dict[str, str | None]
    published: dict[str, Any]
    #: the question set the run answered, when the sweep held several (its marks rank within it)
    questions: str = ""

    def flat(self) -> dict[str, Any]:
        out: dict[str, Any] = {"system": self.system, "run": self.run}
        if self.questions:
            out["question set"] = self.questions  # "questions" is their count
        for key, value in self.values.items():
            out[key] = value
            if key in self.marks:
                out[f"{key} mark"] = self.marks[key] or ""
        for key in ("correctness", "faithfulness", "source"):
            out[f"published {key}"] = self.published.get(key)
        return out


def _get(run: RunData, key: str, per_question: bool = False) -> float | None:
    value = run.metrics.get(key)
    if not is_number(value):
        return None
    value = float(value)
    if per_question:
        value /= max(1, run.n_questions)
    return round(value, 4)


def _seconds_per_question(run: RunData) -> float | None:
    """Wall seconds per question without the index build (made once per corpus and shared by the sweep's cells,
    it lands on whichever cell ran first)."""
    total = run.metrics.get("time/total_s")
    if not is_number(total):
        return None
    index = run.metrics.get("time/index_s")
    return round((float(total) - (float(index) if is_number(index) else 0.0)) / max(1, run.n_questions), 4)


def _recall(run: RunData, stage: str) -> float | None:
    """Gold recall (any gold document) after `stage` at the prompt's depth (`rerank.k`, else `retriever.k`): one
    cutoff for both stages, so the two columns say what reranking added."""
    depth = run.setting("rerank.k") or run.setting("retriever.k")
    return _get(run, f"recall/{stage}@{depth}_any/all") if depth else None


def leaderboard_rows(sweep: SweepData) -> list[LeaderboardRow]:
    """A row per finished run whose config names a system, in the sweep's order."""
    rows = []
    for run in sweep.by_question_set():
        system = run.config.get("system")
        if not isinstance(system, dict) or not system.get("name"):
            continue
        values = {"answer F1": _get(run, F1),
                  **{key: _get(run, metric) for key, metric in JUDGED.items()},
                  "recall after retrieval": _recall(run, "retrieval"), "recall after rerank": _recall(run, "rerank"),
                  "LLM calls / q": _get(run, "llm_calls", True),
                  "tokens / q": (None if _get(run, "prompt_tokens") is None else
                                 round((float(run.metrics.get("prompt_tokens", 0))
                                        + float(run.metrics.get("completion_tokens", 0))) / max(1, run.n_questions), 1)),
                  "seconds / q": _seconds_per_question(run), "questions": float(run.n_questions)}
        marks = {"answer F1": sweep.mark(F1, run.name),
                 **{key: sweep.mark(metric, run.name) for key, metric in JUDGED.items()}}
        rows.append(LeaderboardRow(str(system["name"]), run.name, values, marks, dict(system.get("published") or {}),
                                   sweep.question_sets.get(run.name, "")))
    return rows


def _cell(value: float | None, mark: str | None = None, digits: int = 3) -> str:
    if value is None:
        return "-"
    return marked(f"{value:.{digits}f}", mark)


def to_markdown(rows: list[LeaderboardRow]) -> str:
    by_set = any(row.questions for row in rows)
    head = ("| " + ("question set | " if by_set else "") + "system | answer F1 | correctness | faithfulness | "
            "recall after retrieval | recall after rerank | LLM calls / q | tokens / q | seconds / q | "
            "published correctness | published faithfulness |")
    lines = [head, "|---" * (12 if by_set else 11) + "|"]
    for row in rows:
        v, m = row.values, row.marks
        pub = row.published
        lines.append(" | ".join([
            f"| {row.questions + ' | ' if by_set else ''}{row.system}", _cell(v["answer F1"], m.get("answer F1")),
            _cell(v["correctness"], m.get("correctness")), _cell(v["faithfulness"], m.get("faithfulness")),
            _cell(v["recall after retrieval"]), _cell(v["recall after rerank"]),
            _cell(v["LLM calls / q"], digits=1), _cell(v["tokens / q"], digits=0), _cell(v["seconds / q"], digits=1),
            "-" if pub.get("correctness") is None else f"{pub['correctness']}",
            "-" if pub.get("faithfulness") is None else f"{pub['faithfulness']}"]) + " |")
    sources = {row.system: row.published.get("source") for row in rows if row.published.get("source")}
    if sources:
        lines.append("")
        lines += [f"- {name}: published scores from {source}" for name, source in sources.items()]
    n = {int(row.values["questions"] or 0) for row in rows}
    lines.append("")
    lines.append(f"Measured on {', '.join(map(str, sorted(n)))} questions per system; bold: best or statistically "
                 f"tied with it (the sweep summary's paired tests{', within each question set' if by_set else ''}). Published numbers are the systems' live-day "
                 f"scores (Falcon3-10B, the full FineWeb-10BT indexes, 500 unseen questions, the organisers' judge): "
                 f"beside, not comparable.")
    return "\n".join(lines) + "\n"
