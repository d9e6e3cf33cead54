"""Battle ratings: each cell's Bradley-Terry rating with its bootstrap interval, and its Elo beside it.

TREC RAG 2026 ranks systems by side-by-side battles; `python -m eval.battles SWEEP` (or the sweep's own
`hydra.callbacks.sweep_summary.battles=true`) judges them and writes SWEEP/battles/ratings.json. The report draws
that file as it is: the ratings (Chatbot Arena's scale, 1000 + 400 log10 strength, centred), their percentile
intervals from the bootstrap over topics, the cells' win / tie / loss counts, and the judge's tie and position-bias
rates. A sweep over several question sets was rated within each (`eval.battles`): its rows carry the set, ranks
count within it, and the figure groups them. Nothing is fitted again here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rag.report.data import SweepData, is_number


@dataclass(frozen=True)
class BattleRating:
    rank: int
    cell: str
    rating: float
    rating_lo: float | None
    rating_hi: float | None
    elo: float | None
    elo_lo: float | None
    elo_hi: float | None
    wins: int
    ties: int
    losses: int
    #: the question set the cell was rated within ("" when the sweep answered one)
    questions: str = ""

    def flat(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class BattleBoard:
    """The ratings of one sweep's battles, best first, and how they were judged (ratings.json's header)."""

    ratings: list[BattleRating] = field(default_factory=list)
    tie_model: str = ""
    n_topics: int = 0
    confidence: float = 0.95
    rates: dict[str, Any] = field(default_factory=dict)
    #: cells alone in their question set: no battle, no rating (ratings.json's `unrated`)
    unrated: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.ratings)

    @property
    def by_set(self) -> bool:
        """True when the cells were rated within several question sets."""
        return len({r.questions for r in self.ratings}) > 1


def _number(value: Any) -> float | None:
    return float(value) if is_number(value) else None


def battle_board(sweep: SweepData) -> BattleBoard:
    """The sweep's battle ratings (empty without `eval.battles`' ratings.json)."""
    data = sweep.battles
    if not data:
        return BattleBoard()
    header = data.get("ratings") or {}
    ratings = [BattleRating(int(c.get("rank") or i + 1), str(c["cell"]), float(c["rating"]), _number(c.get("rating_lo")),
                            _number(c.get("rating_hi")), _number(c.get("elo")), _number(c.get("elo_lo")),
                            _number(c.get("elo_hi")), int(c.get("wins") or 0), int(c.get("ties") or 0),
                            int(c.get("losses") or 0), str(c.get("questions") or ""))
               for i, c in enumerate(data["cells"])]
    sets = list(dict.fromkeys(r.questions for r in ratings))
    return BattleBoard(sorted(ratings, key=lambda r: (sets.index(r.questions), r.rank)),
                       str(header.get("tie_model") or ""),
                       int(header.get("n_topics") or 0), float(header.get("confidence") or 0.95),
                       dict(data.get("rates") or {}), [str(u.get("cell")) for u in data.get("unrated") or []])


def _interval(lo: float | None, hi: float | None) -> str:
    return "-" if lo is None or hi is None else f"[{lo:.0f}, {hi:.0f}]"


def _pct(value: Any) -> str:
    return "-" if not is_number(value) else f"{100 * float(value):.1f}%"


def to_markdown(board: BattleBoard) -> str:
    """report.md's battles section: how they were judged, then one row per cell, best first."""
    r = board.rates
    level = f"{100 * board.confidence:g}%"
    lines = [f"{r.get('n_judgments', '?')} judgments over {board.n_topics} topics, every pair in both orders "
             f"(`battles/battles.jsonl`); Bradley-Terry with {board.tie_model} ties, {level} bootstrap intervals over "
             f"topics; tie rate {_pct(r.get('tie_rate'))}, position-bias rate {_pct(r.get('position_bias_rate'))}, "
             f"self-consistency {_pct(r.get('self_consistency'))}, unparseable {r.get('unparseable', 0)}."
             + (" Rated within each question set: ratings compare only cells of one set." if board.by_set else ""),
             "", f"|{' questions |' if board.by_set else ''} rank | cell | rating | {level} interval | Elo | "
             "Elo interval | wins | ties | losses |", "|---" * (10 if board.by_set else 9) + "|"]
    for x in board.ratings:
        elo = "-" if x.elo is None else f"{x.elo:.0f}"
        lines.append(f"|{f' {x.questions} |' if board.by_set else ''} {x.rank} | `{x.cell}` | {x.rating:.0f} | "
                     f"{_interval(x.rating_lo, x.rating_hi)} | {elo} | {_interval(x.elo_lo, x.elo_hi)} | {x.wins} | "
                     f"{x.ties} | {x.losses} |")
    if board.unrated:
        lines += ["", "Not rated (no other cell answered their questions): "
                  + ", ".join(f"`{cell}`" for cell in board.unrated)]
    return "\n".join(lines) + "\n"


def plot(board: BattleBoard):
    """Two panels, Bradley-Terry and Elo: a point per cell (best on top) with its bootstrap interval."""
    from matplotlib.figure import Figure

    rows = board.ratings
    fig = Figure(figsize=(10, 1.2 + 0.35 * len(rows)), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    ys = list(range(len(rows)))[::-1]
    for ax, (value, lo, hi, title) in zip(axes, (
            ("rating", "rating_lo", "rating_hi", f"Bradley-Terry ({board.tie_model} ties)"),
            ("elo", "elo_lo", "elo_hi", "Elo (ragnarok, K = 5)"))):
        for y, r in zip(ys, rows):
            centre, low, high = getattr(r, value), getattr(r, lo), getattr(r, hi)
            if centre is None:
                continue
            if low is not None and high is not None:
                ax.plot([low, high], [y, y], color="C0", linewidth=2)
            ax.plot([centre], [y], "o", color="C0")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3, axis="x")
    axes[0].set_yticks(ys, [f"{r.cell} ({r.questions})" if board.by_set else r.cell for r in rows], fontsize=7)
    fig.suptitle(f"Battles: ratings with {100 * board.confidence:g}% bootstrap intervals over {board.n_topics} "
                 "topics", fontsize=9)
    return fig
