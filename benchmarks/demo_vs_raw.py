"""The demo's generation on the project's engine against plain llama-cpp-python, side by side in one process.

Usage: `python benchmarks/demo_vs_raw.py RUN [--n 4] [--llm gemma3_270m] [--set KEY=VALUE ...] [--out f.json]`,
where RUN is a finished Simple run folder (`make demo` writes one: its answers.jsonl keeps each question's
`final_prompt`, the exact text the engine sent).

For each of the first `--n` questions, both sides answer the same final prompt with the same sampling (the run's
generator temperature and max_tokens, the Simple prompt's stop sequences, the engine's repeat penalty, top-k,
min-p and seed) on the same threads and context size, in turn (raw, then engine, question by question, so load
bursts fall on both):
- `raw`: llama-cpp-python's `Llama` on the shipped GGUF file with the library's own defaults for everything
  else (batch size, attention kernel, sliding-window cache, KV cache type): the "plain llama-cpp-python" a user
  would write;
- `engine`: the project's `LlamaCppEngine` as `conf/llm/<--llm>.yaml` configures it (with `--set` applied), the
  model it loaded (its file may be a requantized copy of the shipped one: `llm.requantize`), called the way
  the engine's `_one` calls it.
Both models are loaded and warmed on one short request before timing. Printed: seconds per question for each
side, the ratio, prompt and completion tokens, and whether the two answers are identical (the kernels differ, so
greedy paths may part: the F1 difference over a demo-sized set is `benchmarks/paired_f1.py`'s job).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.llm_throughput import llm_settings, parse_sets  # noqa: E402
from rag.core.io import iter_jsonl_numbered  # noqa: E402
from rag.generate.base import load_prompt  # noqa: E402
from rag.llm.llama_cpp import LlamaCppEngine  # noqa: E402


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a finished Simple run folder (answers.jsonl with final prompts)")
    parser.add_argument("--n", type=int, default=4, help="questions to answer on each side (default 4)")
    parser.add_argument("--llm", default="gemma3_270m", help="a conf/llm/*.yaml on llama.cpp")
    parser.add_argument("--set", dest="sets", nargs="*", default=[], metavar="KEY=VALUE",
                        help="engine options over the config's (flash_attn=false, requantize=null, ...)")
    parser.add_argument("--out", type=Path, help="write the figures as JSON")
    args = parser.parse_args(argv)

    config = json.loads((args.run / "config.json").read_text())
    generator = config.get("generator") or {}
    if not str(generator.get("_target_", "")).endswith("SimpleGenerator"):
        raise SystemExit(f"{args.run}: a Simple run folder is needed (its generator is {generator.get('_target_')})")
    records = [record for _, record in iter_jsonl_numbered(args.run / "answers.jsonl")][: args.n]
    if not records or any(not record.get("final_prompt") for record in records):
        raise SystemExit(f"{args.run}/answers.jsonl: no records with a final_prompt")

    settings = llm_settings(args.llm, parse_sets(args.sets))
    engine = LlamaCppEngine(**{k: v for k, v in settings.items() if k != "model_name"}, cache=None)
    from llama_cpp import Llama

    raw = Llama(model_path=str(engine.shipped_file), n_ctx=engine.n_ctx, n_threads=engine.n_threads,
                n_threads_batch=engine.n_threads_batch, seed=engine.seed, verbose=False)
    template = load_prompt(generator.get("prompt", "simple"), generator.get("prompt_dir"))
    sampling = dict(temperature=generator.get("temperature", 0.1), top_p=1.0,
                    max_tokens=generator.get("max_tokens", 256), stop=list(dict.fromkeys(template.stop_plain)) or None,
                    seed=0, repeat_penalty=engine.repeat_penalty, top_k=engine.top_k, min_p=engine.min_p)
    sides = {"raw": raw, "engine": engine.llm}
    print(f"engine options: {json.dumps(engine._kernel_options())} on {engine.model_file.name}; raw: "
          f"{engine.shipped_file.name}, library defaults; threads {engine.n_threads}; load average "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    for model in sides.values():  # weights paged in, first-call costs paid
        model.create_completion(prompt="Warm up.", **{**sampling, "max_tokens": 4})
    rows = []
    for record in records:
        row: dict[str, Any] = {"id": record["id"]}
        for side, model in sides.items():
            model.reset()
            start = time.perf_counter()
            first, pieces, finish = None, [], None
            for chunk in model.create_completion(prompt=record["final_prompt"], stream=True, **sampling):
                first = first or time.perf_counter()  # the prompt is evaluated before the first token comes
                pieces.append(chunk["choices"][0]["text"])
                finish = chunk["choices"][0].get("finish_reason") or finish
            end = time.perf_counter()
            text = "".join(pieces)
            prompt_tokens = len(model.tokenize(record["final_prompt"].encode(), add_bos=True))
            completion = len(model.tokenize(text.encode(), add_bos=False)) if text else 0
            row[side] = {"seconds": end - start, "prompt_seconds": (first or end) - start,
                         "generate_seconds": end - (first or end), "prompt_tokens": prompt_tokens,
                         "completion_tokens": completion, "finish_reason": finish, "text": text.strip()}
        row["identical"] = row["raw"]["text"] == row["engine"]["text"]
        print(f"{row['id']}: raw {row['raw']['seconds']:.1f} s, engine {row['engine']['seconds']:.1f} s "
              f"({row['raw']['seconds'] / row['engine']['seconds']:.2f}x); prompt {row['raw']['prompt_tokens']} "
              f"tokens in {row['raw']['prompt_seconds']:.1f} / {row['engine']['prompt_seconds']:.1f} s; completion "
              f"{row['raw']['completion_tokens']} / {row['engine']['completion_tokens']} tokens; "
              f"{'identical' if row['identical'] else 'different'} answers", flush=True)
        rows.append(row)
    totals = {side: {key: sum(r[side][key] for r in rows) for key in
                     ("seconds", "prompt_seconds", "generate_seconds", "prompt_tokens", "completion_tokens")}
              for side in sides}
    # the answers differ in length (the kernels part the greedy paths), so the fair comparison is per token:
    # the engine's seconds for the raw side's own tokens, at the engine's measured prompt and generation rates
    raw_t, mine = totals["raw"], totals["engine"]
    same_work = (mine["prompt_seconds"] / mine["prompt_tokens"] * raw_t["prompt_tokens"]
                 + mine["generate_seconds"] / max(1, mine["completion_tokens"]) * raw_t["completion_tokens"])

    def rate(side: dict[str, float], tokens: str, seconds: str) -> float:
        return side[tokens] / side[seconds] if side[seconds] else 0.0

    report = {"run": str(args.run), "llm": args.llm, "sets": args.sets, "options": engine._kernel_options(),
              "questions": len(rows), "totals": totals,
              "raw_seconds_per_question": totals["raw"]["seconds"] / len(rows),
              "engine_seconds_per_question": totals["engine"]["seconds"] / len(rows),
              "speedup": totals["raw"]["seconds"] / totals["engine"]["seconds"],
              "speedup_same_tokens": totals["raw"]["seconds"] / same_work,
              "prompt_tokens_per_s": {"raw": rate(raw_t, "prompt_tokens", "prompt_seconds"),
                                      "engine": rate(mine, "prompt_tokens", "prompt_seconds")},
              "generate_tokens_per_s": {"raw": rate(raw_t, "completion_tokens", "generate_seconds"),
                                        "engine": rate(mine, "completion_tokens", "generate_seconds")},
              "identical": sum(r["identical"] for r in rows), "rows": rows}
    print(f"per question: raw {report['raw_seconds_per_question']:.2f} s, engine "
          f"{report['engine_seconds_per_question']:.2f} s: {report['speedup']:.2f}x; for the raw side's own tokens "
          f"{report['speedup_same_tokens']:.2f}x; prompt {report['prompt_tokens_per_s']['raw']:.0f} -> "
          f"{report['prompt_tokens_per_s']['engine']:.0f} tok/s, generation {report['generate_tokens_per_s']['raw']:.1f}"
          f" -> {report['generate_tokens_per_s']['engine']:.1f} tok/s; {report['identical']} of {len(rows)} answers "
          "identical", flush=True)
    raw.close()
    engine.close()
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
