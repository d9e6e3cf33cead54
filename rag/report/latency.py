"""Fig. 5: runtime per question against k, per retriever and per reranker.

Two sources, plotted together and labelled apart:
- `benchmarks/latency_at_k.py` results (JSON): p50 and p95 seconds per question for k = 1..600 retrieved and
  1..300 reranked candidates, the data of RAGtifier's Fig. 5;
- the sweep's own stage timings (metrics.json `time/retrieve_s`, `time/rerank_s`), as mean seconds per
  question, only for runs whose stage really computed every question (no stage-cache hits), at the depth the
  stage ran at (the `retrieval_depth` the pipeline records).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag.report.data import SweepData, read_latency, stage_seconds, stage_work

KINDS = {"retriever": "retrieval", "reranker": "rerank"}


@dataclass
class LatencyCurve:
    kind: str  # "retriever" | "reranker"
    name: str
    source: str  # "benchmark" | "sweep"
    ks: list[int]
    p50: list[float | None] = field(default_factory=list)
    p95: list[float | None] = field(default_factory=list)
    mean: list[float | None] = field(default_factory=list)
    n_questions: int = 0
    note: str = ""

    def points(self) -> list[dict[str, Any]]:
        out = []
        for i, k in enumerate(self.ks):
            out.append({"kind": self.kind, "curve": f"{self.name} ({self.source})", "source": self.source, "k": k,
                        "p50_s": _at(self.p50, i), "p95_s": _at(self.p95, i), "mean_s": _at(self.mean, i),
                        "n_questions": self.n_questions})
        return out


def _at(values: list[float | None], i: int) -> float | None:
    return values[i] if i < len(values) else None


def benchmark_curves(path: Path) -> tuple[list[LatencyCurve], dict[str, Any]]:
    """Curves from one latency_at_k JSON file, and its header (machine, load, command, skipped)."""
    data = read_latency(path)
    curves = []
    for section, kind, x in (("retrievers", "retriever", "k"), ("rerankers", "reranker", "candidates")):
        for name, entry in (data.get(section) or {}).items():
            curves.append(LatencyCurve(kind=kind, name=name, source="benchmark", ks=list(entry[x]),
                                       p50=list(entry.get("p50_s") or []), p95=list(entry.get("p95_s") or []),
                                       mean=list(entry.get("mean_s") or []),
                                       n_questions=int(entry.get("n_questions") or 0),
                                       note=str(entry.get("note") or "")))
    header = {k: v for k, v in data.items() if k not in ("retrievers", "rerankers")}
    header["file"] = str(path)
    return curves, header


def sweep_curves(sweep: SweepData) -> list[LatencyCurve]:
    """Mean seconds per question from runs whose retrieve / rerank stage computed every question itself."""
    points: dict[tuple[str, str], dict[int, list[float]]] = {}
    for run in sweep.runs:
        n = run.n_questions
        for kind, stage in (("retriever", "retrieve"), ("reranker", "rerank")):
            calls, hits = stage_work(run.metrics, stage)
            seconds = stage_seconds(run.metrics, stage)
            if seconds is None or calls == 0 or hits > 0 or calls < n:
                continue
            if kind == "retriever":
                name = run.retriever
                k = run.retrieval_depth or 0
            else:
                if run.reranker in ("none", "NoRerank"):
                    continue
                name, k = run.reranker, int(run.setting("retriever.k") or 0)
            if k > 0:
                points.setdefault((kind, name), {}).setdefault(k, []).append(seconds / calls)
    curves = []
    for (kind, name), by_k in points.items():
        ks = sorted(by_k)
        curves.append(LatencyCurve(kind=kind, name=name, source="sweep", ks=ks,
                                   mean=[sum(by_k[k]) / len(by_k[k]) for k in ks],
                                   note="sweep stage timings, mean s/question"))
    return curves


def latency_curves(sweep: SweepData | None, files: list[Path] = ()) -> tuple[list[LatencyCurve], list[dict]]:
    """All curves (benchmark files first, then the sweep's own timings) and the benchmark headers."""
    curves: list[LatencyCurve] = []
    headers: list[dict[str, Any]] = []
    for path in files:
        part, header = benchmark_curves(Path(path))
        curves += part
        headers.append(header)
    if sweep is not None:
        curves += sweep_curves(sweep)
    return curves, headers


def plot(curves: list[LatencyCurve]):
    """Two panels (retrievers, rerankers): seconds per question against k; p50 solid, p95 dashed, sweep dots."""
    from matplotlib.figure import Figure

    kinds = [k for k in KINDS if any(c.kind == k for c in curves)]
    fig = Figure(figsize=(5.2 * max(1, len(kinds)), 3.8), layout="constrained")
    axes = fig.subplots(1, max(1, len(kinds)), squeeze=False)[0]
    for ax, kind in zip(axes, kinds):
        for curve in (c for c in curves if c.kind == kind):
            if curve.source == "benchmark":
                ks = [k for k, v in zip(curve.ks, curve.p50) if v is not None]
                line = ax.plot(ks, [v for v in curve.p50 if v is not None], marker="o", markersize=3,
                               label=f"{curve.name} p50 (n={curve.n_questions})")[0]
                if any(v is not None for v in curve.p95):
                    ax.plot([k for k, v in zip(curve.ks, curve.p95) if v is not None],
                            [v for v in curve.p95 if v is not None], linestyle="--", color=line.get_color(),
                            label=f"{curve.name} p95")
            else:
                ax.plot(curve.ks, curve.mean, linestyle="none", marker="s", markersize=6,
                        label=f"{curve.name} (sweep, mean)")
        ax.set_xlabel("k retrieved" if kind == "retriever" else "candidates reranked")
        ax.set_ylabel("seconds per question")
        ax.set_title("retrievers" if kind == "retriever" else "rerankers", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Fig. 5: runtime per question against k", fontsize=10)
    return fig
