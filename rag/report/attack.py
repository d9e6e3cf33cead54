"""Attack figure: attack success rate and accuracy against the number of planted passages, one line per strategy
(TrustRAG's figure: ASR and accuracy as the poisoned passages per question grow), for sweeps over
`attack.n_passages` (`experiment=poisoning`).

Points carry the sweep summary's marks (`significance.json`): a filled marker is the best cell of its column or
statistically tied with it (lowest ASR, highest accuracy), a hollow one is significantly worse. The table beside
it lists every cell with the poisoned share of its prompts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rag.metrics.marks import marked
from rag.report.data import RunData, SweepData, is_number

ASR, ACCURACY = "attack/asr/all", "attack/attack_accuracy/all"
PROMPT_SHARE = "attack/poisoned_precision/prompt/all"
#: swept keys that are the figure's axes (the rest name a line)
AXES = ("attack.n_passages", "generator")


@dataclass(frozen=True)
class AttackPoint:
    line: str
    n_passages: int
    run: str
    asr: float | None
    accuracy: float | None
    prompt_share: float | None
    asr_mark: str | None
    accuracy_mark: str | None

    def flat(self) -> dict[str, Any]:
        return {"line": self.line, "n_passages": self.n_passages, "run": self.run, "asr": self.asr,
                "asr mark": self.asr_mark or "", "accuracy": self.accuracy, "accuracy mark": self.accuracy_mark or "",
                "poisoned share of prompt": self.prompt_share}


def _number(run: RunData, key: str) -> float | None:
    value = run.metrics.get(key)
    return round(float(value), 4) if is_number(value) else None


def attack_points(sweep: SweepData) -> list[AttackPoint]:
    """A point per attacked run (a run whose config has an attack and whose metrics hold ASR), by line then n."""
    points = []
    for run in sweep.runs:
        n = run.setting("attack.n_passages")
        if n is None or ASR not in run.metrics:
            continue
        line = sweep.label(run, lead=run.strategy, skip=AXES)
        points.append(AttackPoint(line, int(n), run.name, _number(run, ASR), _number(run, ACCURACY),
                                  _number(run, PROMPT_SHARE), sweep.mark(ASR, run.name),
                                  sweep.mark(ACCURACY, run.name)))
    return sorted(points, key=lambda p: (p.line, p.n_passages))


def to_markdown(points: list[AttackPoint]) -> str:
    lines = ["| strategy | planted per question | ASR | accuracy | poisoned share of prompt |", "|---|---|---|---|---|"]
    for p in points:
        asr = marked(f"{p.asr:.3f}", p.asr_mark) if p.asr is not None else "-"
        acc = marked(f"{p.accuracy:.3f}", p.accuracy_mark) if p.accuracy is not None else "-"
        share = f"{p.prompt_share:.3f}" if p.prompt_share is not None else "-"
        lines.append(f"| {p.line} | {p.n_passages} | {asr} | {acc} | {share} |")
    return "\n".join(lines) + "\n"


def plot(points: list[AttackPoint]):
    """Two panels, ASR and accuracy against planted passages per question, a line per strategy."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.6), layout="constrained")
    axes = fig.subplots(1, 2)
    lines = list(dict.fromkeys(p.line for p in points))
    for ax, (value, mark, title) in zip(axes, (("asr", "asr_mark", "attack success rate (TrustRAG)"),
                                              ("accuracy", "accuracy_mark", "accuracy under attack"))):
        for i, line in enumerate(lines):
            mine = [p for p in points if p.line == line and getattr(p, value) is not None]
            colour = f"C{i % 10}"
            shift = (i - (len(lines) - 1) / 2) * 0.06  # lines that coincide stay visible side by side
            xs, ys = [p.n_passages + shift for p in mine], [getattr(p, value) for p in mine]
            ax.plot(xs, ys, color=colour, label=line)
            for p, x, y in zip(mine, xs, ys):
                filled = getattr(p, mark) in ("best", "tied")
                ax.plot([x], [y], "o", color=colour, markerfacecolor=colour if filled else "white")
        ax.set_xlabel("planted passages per target question")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("Corpus poisoning: filled points are the best cell or tied with it (sweep summary)", fontsize=9)
    return fig
