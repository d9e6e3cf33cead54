"""Cost and Crucible metrics per generation strategy, from finished run folders (issue 11's benchmark table).

Usage: `python benchmarks/strategy_table.py FOLDER... [--json out.json]`: each FOLDER is a run folder or a sweep
folder (its cells are read). Prints two markdown tables: generation cost per question (LLM calls incl. cache
hits, prompt and completion tokens, generation wall time, answer words, cited sentences) and the five Crucible
metrics (`crucible/<metric>/all`, with uncited answers and judge parse failures). The judge's own calls are not
in the cost table (they are `eval/*` in metrics.json).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag.core.io import read_jsonl  # noqa: E402

CRUCIBLE = ("nugget_recall", "nugget_density", "sentence_novelty", "relevant_sentences", "citation_support")


def run_folders(paths: list[Path]) -> list[Path]:
    found = []
    for path in paths:
        if (path / "metrics.json").is_file():
            found.append(path)
        else:
            found += sorted(p.parent for p in path.glob("*/metrics.json"))
    return found


def strategy(run: Path) -> str:
    import yaml

    hydra = yaml.safe_load((run / ".hydra" / "hydra.yaml").read_text())["hydra"]
    return hydra["runtime"]["choices"]["generator"]


def row(run: Path) -> dict:
    metrics = json.loads((run / "metrics.json").read_text())
    answers = read_jsonl(run / "answers.jsonl")
    n = max(1, int(metrics.get("n_questions") or len(answers)))
    cited = [len(a.get("sentences") or []) for a in answers]
    out = {"strategy": strategy(run), "run": str(run), "questions": n,
           "llm_calls_per_q": (metrics.get("llm_calls", 0) + metrics.get("llm_cache_hits", 0)) / n,
           "prompt_tokens_per_q": metrics.get("prompt_tokens", 0) / n,
           "completion_tokens_per_q": metrics.get("completion_tokens", 0) / n,
           "generate_s_per_q": metrics.get("time/generate_s", 0.0) / n,
           "answer_words": statistics.mean(len(str(a.get("answer") or "").split()) for a in answers),
           "cited_sentences": statistics.mean(cited) if any(cited) else None}
    for name in CRUCIBLE:
        out[name] = metrics.get(f"crucible/{name}/all")
    for name in ("uncited_answers", "parse_failures", "n_scored"):
        out[name] = metrics.get(f"crucible/{name}")
    return out


def fmt(value, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def markdown(rows: list[dict]) -> str:
    lines = ["| strategy | questions | LLM calls / q | prompt tokens / q | completion tokens / q | generate wall / q "
             "| answer words | sentences cited |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['strategy']} | {r['questions']} | {fmt(r['llm_calls_per_q'], 1)} | "
                     f"{fmt(r['prompt_tokens_per_q'], 0)} | {fmt(r['completion_tokens_per_q'], 0)} | "
                     f"{fmt(r['generate_s_per_q'], 1)} s | {fmt(r['answer_words'], 0)} | {fmt(r['cited_sentences'], 1)} |")
    lines += ["", "| strategy | Nugget Recall | Nugget Density | Sentence Novelty | Relevant Sentences | Citation Support "
              "| uncited | judge parse failures |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['strategy']} | " + " | ".join(fmt(r[m]) for m in CRUCIBLE)
                     + f" | {fmt(r['uncited_answers'])} | {fmt(r['parse_failures'])} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows = [row(run) for run in run_folders(args.folders)]
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
