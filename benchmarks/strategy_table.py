"""Cost and Crucible metrics per generation strategy, from finished run folders (issue 11's benchmark table).

Usage: `python benchmarks/strategy_table.py FOLDER... [--json out.json]`: each FOLDER is a run folder or a sweep
folder (its cells are read). Prints three markdown tables: generation cost per question (LLM calls incl. cache
hits, prompt and completion tokens, generation wall time, answer words, cited sentences); the five Crucible
metrics (`crucible/<metric>/all`, with uncited answers and judge parse failures), for runs judged by
`judge=crucible`; and answer quality and parse failures per model (token F1 by hop, the generator's parse
failures, each judge's parse failures, engine tokens per second and engine seconds per question), which is
issue 14's model comparison (benchmarks/llm_compare.sh). The judge's own calls are not in the cost table (they
are `eval/*` in metrics.json).
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


def choices(run: Path) -> dict[str, str]:
    """The config-group options Hydra composed for this run (generator, llm, ...)."""
    import yaml

    hydra = yaml.safe_load((run / ".hydra" / "hydra.yaml").read_text())["hydra"]
    return hydra["runtime"]["choices"]


def judge_parse_failures(metrics: dict) -> dict[str, int]:
    """Parse failures per judge that ran: `judge/<name>/parse_failures`, `nuggets/...` and `crucible/...`."""
    out = {key.split("/")[1]: value for key, value in metrics.items()
           if key.startswith("judge/") and key.endswith("/parse_failures")}
    for name in ("nuggets", "crucible"):
        if f"{name}/parse_failures" in metrics:
            out[name] = metrics[f"{name}/parse_failures"]
    return out


def row(run: Path) -> dict:
    metrics = json.loads((run / "metrics.json").read_text())
    answers = read_jsonl(run / "answers.jsonl")
    n = max(1, int(metrics.get("n_questions") or len(answers)))
    cited = [len(a.get("sentences") or []) for a in answers]
    chosen = choices(run)
    out = {"strategy": chosen["generator"], "llm": chosen.get("llm"), "run": str(run), "questions": n,
           "llm_calls_per_q": (metrics.get("llm_calls", 0) + metrics.get("llm_cache_hits", 0)) / n,
           "prompt_tokens_per_q": metrics.get("prompt_tokens", 0) / n,
           "completion_tokens_per_q": metrics.get("completion_tokens", 0) / n,
           "generate_s_per_q": metrics.get("time/generate_s", 0.0) / n,
           "answer_words": statistics.mean(len(str(a.get("answer") or "").split()) for a in answers),
           "cited_sentences": statistics.mean(cited) if any(cited) else None,
           "answer_f1": {split: metrics.get(f"answer/f1/{split}") for split in ("all", "single", "multi")},
           "generator_parse_failures": metrics.get("parse_failures"),
           "judge_parse_failures": judge_parse_failures(metrics),
           "llm_tokens_per_s": metrics.get("llm_tokens_per_s"),
           "engine_s_per_q": metrics.get("llm_seconds", 0.0) / n}
    for name in CRUCIBLE:
        out[name] = metrics.get(f"crucible/{name}/all")
    for name in ("uncited_answers", "n_scored"):
        out[name] = metrics.get(f"crucible/{name}")
    return out


def fmt(value, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def markdown(rows: list[dict]) -> str:
    lines = ["| strategy | llm | questions | LLM calls / q | prompt tokens / q | completion tokens / q | generate wall / q "
             "| answer words | sentences cited |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['strategy']} | {r['llm']} | {r['questions']} | {fmt(r['llm_calls_per_q'], 1)} | "
                     f"{fmt(r['prompt_tokens_per_q'], 0)} | {fmt(r['completion_tokens_per_q'], 0)} | "
                     f"{fmt(r['generate_s_per_q'], 1)} s | {fmt(r['answer_words'], 0)} | {fmt(r['cited_sentences'], 1)} |")
    crucible = [r for r in rows if r["n_scored"] is not None]
    if crucible:
        lines += ["", "| strategy | Nugget Recall | Nugget Density | Sentence Novelty | Relevant Sentences | Citation Support "
                  "| uncited | judge parse failures |", "|---|---|---|---|---|---|---|---|"]
        for r in crucible:
            lines.append(f"| {r['strategy']} | " + " | ".join(fmt(r[m]) for m in CRUCIBLE)
                         + f" | {fmt(r['uncited_answers'])} | {fmt(r['judge_parse_failures'].get('crucible'))} |")
    judges = sorted({name for r in rows for name in r["judge_parse_failures"]})
    lines += ["", "| strategy | llm | questions | token F1 (all / single / multi) | generator parse failures | "
              + "".join(f"{name} judge parse failures | " for name in judges)
              + "engine tokens/s (prompt + completion) | engine s / q |",
              "|---|---|---|---|---|" + "---|" * len(judges) + "---|---|"]
    for r in rows:
        f1 = " / ".join(fmt(r["answer_f1"][split], 3) for split in ("all", "single", "multi"))
        lines.append(f"| {r['strategy']} | {r['llm']} | {r['questions']} | {f1} | {fmt(r['generator_parse_failures'])} | "
                     + "".join(f"{fmt(r['judge_parse_failures'].get(name))} | " for name in judges)
                     + f"{fmt(r['llm_tokens_per_s'], 1)} | {fmt(r['engine_s_per_q'], 1)} |")
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
