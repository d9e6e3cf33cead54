"""What `eval.battles` wrote into a sweep folder, read back: its judgments, each cell's per-topic points share (the
battle ranking as one more evaluation of the agreement table) and summary.md's line. Kept apart from eval.battles
so that the summary and the agreement table read battles without importing the command that writes the summary.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag.core.io import read_jsonl
from rag.metrics.registry import REGISTRY, MetricSpec
from rag.report.data import BATTLE_RATINGS, BATTLES_DIR

#: where the battle files go, inside the sweep folder (the report reads ratings.json: rag.report.data)
BATTLES_FILE = "battles.jsonl"
RATINGS_CSV = "ratings.csv"
RATINGS_JSON = BATTLE_RATINGS
#: a verdict names a position (the answer shown first is A), never a cell
VERDICTS = ("A", "B", "tie")
TIE = "tie"
#: the evaluation the agreement table gets: per topic, a cell's points share (wins + ties / 2) in its battles
SCORE = "battles/score"
REGISTRY.declare(MetricSpec(SCORE + "/{split}", "per_answer",
                            "a cell's share of points (wins + ties / 2) in its battles on a topic (eval.battles)",
                            (0.0, 1.0), True))


# -- judgments ------------------------------------------------------------------------------------------------
@dataclass
class Judgment:
    """One presentation of a pair and the judge's verdict on it (one line of battles.jsonl)."""

    topic: str
    pair: int
    #: 1: the matchup's first presentation; 2: the same pair with the answers swapped
    order: int
    #: the cell shown as Response A, and as Response B
    cell_a: str
    cell_b: str
    #: "A", "B", "tie", or None (unparseable after the re-asks)
    verdict: str | None
    attempts: int = 0
    raw: str = ""
    #: the question set of the topic (`rag.sweep.question_sets`; "" when the sweep answered one)
    questions: str = ""

    @property
    def winner(self) -> str | None:
        """The winning cell, "tie", or None (unparseable)."""
        return {"A": self.cell_a, "B": self.cell_b, TIE: TIE}.get(self.verdict or "")

    @property
    def score_a(self) -> float | None:
        """The points of the cell shown first: 1, 0.5 (tie), 0; None when unparseable."""
        return {"A": 1.0, TIE: 0.5, "B": 0.0}.get(self.verdict or "")

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "pair": self.pair, "order": self.order, "cell_a": self.cell_a,
                "cell_b": self.cell_b, "verdict": self.verdict, "winner": self.winner, "attempts": self.attempts,
                "raw": self.raw, "questions": self.questions}

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> Judgment:
        return cls(str(row["topic"]), int(row["pair"]), int(row["order"]), str(row["cell_a"]), str(row["cell_b"]),
                   row.get("verdict"), int(row.get("attempts") or 0), str(row.get("raw") or ""),
                   str(row.get("questions") or ""))


def topic_scores(judgments: Sequence[Judgment]) -> dict[str, dict[str, float]]:
    """Cell -> topic -> its share of points (wins + ties / 2) over its parsed judgments on that topic."""
    points: dict[tuple[str, str], list[float]] = {}
    for j in judgments:
        if j.score_a is None:
            continue
        points.setdefault((j.cell_a, j.topic), []).append(j.score_a)
        points.setdefault((j.cell_b, j.topic), []).append(1 - j.score_a)
    out: dict[str, dict[str, float]] = {}
    for (cell, topic), values in points.items():
        out.setdefault(cell, {})[topic] = sum(values) / len(values)
    return out


def read_judgments(sweep_dir: str | Path) -> list[Judgment]:
    """SWEEP/battles/battles.jsonl as judgments."""
    return [Judgment.from_json(row) for row in read_jsonl(Path(sweep_dir) / BATTLES_DIR / BATTLES_FILE)]


def attach(runs: Sequence[Any], sweep_dir: str | Path) -> bool:
    """Give each `eval.agreement.Run` of the sweep its per-topic `battles/score` (from battles.jsonl, when
    SWEEP/battles/ratings.json exists), so the battle ranking is one more evaluation in the agreement table; False
    when the sweep has no battles. The run-level ranking is the mean over topics like every evaluation's: with
    every pair judged equally often on every topic it orders the cells as the Bradley-Terry ratings do (each
    cell's points total is Davidson's sufficient statistic)."""
    root = Path(sweep_dir)
    if not (root / BATTLES_DIR / RATINGS_JSON).is_file():
        return False
    scores = topic_scores(read_judgments(root))
    found = False
    for run in runs:
        path = Path(run.path).resolve() if run.path is not None else None
        cell = path.name if path is not None and path.parent == root.resolve() else None
        for topic, value in (scores.get(cell, {}) if cell else {}).items():
            if topic in run.topics:
                run.topics[topic][SCORE] = value
                found = True
    return found


def summary_line(sweep_dir: str | Path) -> str | None:
    """summary.md's line about the sweep's battles (ranking, tie and position-bias rates), or None without them."""
    path = Path(sweep_dir) / BATTLES_DIR / RATINGS_JSON
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        rates, cells = data["rates"], data["cells"]
        by_set: dict[str, list[str]] = {}
        for c in cells:  # ranked within each question set (eval.battles), sets in sweep order
            by_set.setdefault(str(c.get("questions") or ""), []).append(f"`{c['cell']}` {c['rating']:.0f}")
        ranking = "; ".join(f"{label + ': ' if label else ''}{' > '.join(ranked)}" for label, ranked in by_set.items())
    except (OSError, ValueError, KeyError, TypeError) as err:
        return f"Battles: `{path}` unreadable ({err})  "

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    unrated = data.get("unrated") or []
    alone = f"; not rated, alone in their question set: {len(unrated)} cell(s)" if unrated else ""
    return (f"Battles ({rates['n_judgments']} judgments, both orders; `battles/ratings.csv`): {ranking} "
            f"(Bradley-Terry, {data['ratings']['tie_model']} ties); tie rate {pct(rates['tie_rate'])}, "
            f"position-bias rate {pct(rates['position_bias_rate'])}, unparseable {rates['unparseable']}{alone}  ")
