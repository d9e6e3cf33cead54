"""Time BGE-reranker-sized cross-encoder scoring: 300 passages per question, seconds per question.

RAGtifier (LiveRAG 2025, section 4.4) measured about 8.6 s per question to rerank 300 retrieved passages with the
BGE reranker (11.2 s for 400). This benchmark reproduces the workload at bge-reranker-v2-m3's real size
(XLM-RoBERTa large: 24 layers, hidden 1024, 16 heads, FFN 4096, vocabulary 250,002, 512 positions, one output
logit) with randomly initialised weights built from a transformers config, so it needs neither network nor
FlagEmbedding; only torch and transformers. Scoring cost does not depend on the weights' values.

The inference loop follows FlagEmbedding's `FlagReranker`: pairs sorted by length, batches of `--batch-size`,
padded to the longest pair in the batch, fp16 on GPU. Token ids are synthetic (no tokenizer offline), so the
timing covers the model, not tokenisation. Pair lengths: `full` = every pair at `--max-length` (LiveRAG chunks are
up to 512 words, about 650+ tokens, so nearly all are truncated to 512), `mixed` = uniform between 64 and
`--max-length`.

Two schedules are timed: `per_question` (one question's 300 pairs at a time, as a naive pipeline does) and
`cross_question` (all questions' pairs in one sorted stream, as `rag.rerank.bge.BGEReranker` sends them),
reported as seconds per question. Results print as JSON and go to `$OUT/bge_rerank_bench.json` when `$OUT` is set.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path


def build_model(args: argparse.Namespace):
    import torch
    from transformers import XLMRobertaConfig, XLMRobertaForSequenceClassification

    config = XLMRobertaConfig(vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
                              num_attention_heads=args.heads, intermediate_size=args.hidden * 4,
                              max_position_embeddings=args.max_length + 2, pad_token_id=1, bos_token_id=0,
                              eos_token_id=2, num_labels=1, type_vocab_size=1)
    torch.manual_seed(0)
    with torch.device(args.device):  # initialise on the device: random init of 568M parameters is slow on CPU
        model = XLMRobertaForSequenceClassification(config)
    dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}[args.dtype]
    model = model.to(dtype=dtype).eval()
    return model, config


def make_pairs(n: int, args: argparse.Namespace, seed: int) -> list[list[int]]:
    """Token-id sequences shaped like `<s> query </s></s> passage </s>`."""
    import random

    rng = random.Random(seed)
    query = [rng.randrange(5, args.vocab) for _ in range(args.query_tokens)]
    out = []
    for _ in range(n):
        total = args.max_length if args.lengths == "full" else rng.randint(64, args.max_length)
        passage_len = max(1, total - len(query) - 4)
        passage = [rng.randrange(5, args.vocab) for _ in range(passage_len)]
        out.append([0, *query, 2, 2, *passage, 2])
    return out


def score(model, sequences: list[list[int]], args: argparse.Namespace) -> list[float]:
    """FlagEmbedding-style scoring: sort by length, pad per batch, one logit per pair."""
    import torch

    order = sorted(range(len(sequences)), key=lambda i: -len(sequences[i]))
    scores = [0.0] * len(sequences)
    with torch.inference_mode():
        for start in range(0, len(order), args.batch_size):
            idx = order[start:start + args.batch_size]
            width = max(len(sequences[i]) for i in idx)
            ids = torch.full((len(idx), width), 1, dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for row, i in enumerate(idx):
                ids[row, :len(sequences[i])] = torch.tensor(sequences[i])
                mask[row, :len(sequences[i])] = 1
            logits = model(input_ids=ids.to(args.device), attention_mask=mask.to(args.device)).logits
            for row, value in zip(idx, logits.view(-1).float().cpu().tolist()):
                scores[row] = value
    return scores


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    parser.add_argument("--dtype", default=None, help="float16 (GPU default), bfloat16 or float32 (CPU default)")
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--passages", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=128, help="FlagReranker's default is 128")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--query-tokens", type=int, default=24)
    parser.add_argument("--lengths", choices=["full", "mixed"], default="full")
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=250002)
    parser.add_argument("--reduced", action="store_true",
                        help="a 2-layer, 128-wide model for a CPU smoke run (same vocabulary, lengths and counts)")
    parser.add_argument("--schedules", default="per_question,cross_question")
    args = parser.parse_args()

    import torch
    import transformers

    if args.reduced:
        args.layers, args.hidden, args.heads = 2, 128, 2
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    args.dtype = args.dtype or ("float16" if args.device.startswith("cuda") else "float32")
    if args.device == "cpu":
        torch.set_num_threads(max(1, os.cpu_count() or 1))

    t0 = time.perf_counter()
    model, config = build_model(args)
    sync(args.device)
    build_s = time.perf_counter() - t0
    params = sum(p.numel() for p in model.parameters())
    questions = [make_pairs(args.passages, args, seed=q) for q in range(args.questions + 1)]

    score(model, questions[-1], args)  # warm-up (kernels, allocator), not timed
    sync(args.device)

    result: dict = {
        "workload": {"questions": args.questions, "passages_per_question": args.passages,
                     "max_length": args.max_length, "lengths": args.lengths, "batch_size": args.batch_size,
                     "query_tokens": args.query_tokens},
        "model": {"layers": args.layers, "hidden": args.hidden, "heads": args.heads, "vocab": args.vocab,
                  "parameters": params, "dtype": args.dtype, "reduced": args.reduced,
                  "attn_implementation": getattr(model.config, "_attn_implementation", None)},
        "env": {"device": args.device, "gpu": torch.cuda.get_device_name(0) if args.device.startswith("cuda")
                else None, "torch": torch.__version__, "transformers": transformers.__version__,
                "python": platform.python_version(), "cpu_threads": torch.get_num_threads()},
        "build_seconds": round(build_s, 3),
        "seed_figure_s_per_question": 8.6,
    }
    schedules = [s.strip() for s in args.schedules.split(",") if s.strip()]
    if "per_question" in schedules:
        times = []
        for q in range(args.questions):
            start = time.perf_counter()
            score(model, questions[q], args)
            sync(args.device)
            times.append(time.perf_counter() - start)
        result["per_question"] = {"mean_s": statistics.mean(times), "median_s": statistics.median(times),
                                  "max_s": max(times), "all_s": [round(t, 4) for t in times]}
    if "cross_question" in schedules:
        flat = [seq for q in range(args.questions) for seq in questions[q]]
        start = time.perf_counter()
        score(model, flat, args)
        sync(args.device)
        total = time.perf_counter() - start
        result["cross_question"] = {"total_s": total, "per_question_s": total / args.questions}
    if args.device.startswith("cuda"):
        result["env"]["max_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    best = min(v for v in (result.get("per_question", {}).get("mean_s"),
                           result.get("cross_question", {}).get("per_question_s")) if v is not None)
    result["best_s_per_question"] = best
    result["beats_seed"] = best < 8.6 if not args.reduced else None

    text = json.dumps(result, indent=2)
    print(text)
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        name = "bge_rerank_bench_reduced.json" if args.reduced else "bge_rerank_bench.json"
        (Path(out) / name).write_text(text + "\n")


if __name__ == "__main__":
    main()
