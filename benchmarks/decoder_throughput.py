"""Decoder throughput of a Falcon3-10B-shaped model, for the live-day budget (RAGtifier: 500 questions in 2 hours).

A GPU lent for minutes has no vLLM and cannot download Falcon3-10B, so this builds the model's exact shape
(tiiuae/Falcon3-10B-Instruct is a Llama-architecture decoder: 40 layers, hidden 3072, 12 query and 4 key-value
heads, MLP 23040, vocabulary 131072) with random weights in bfloat16 and times greedy generation with transformers'
`generate` at several batch sizes: a prompt of `--prompt-tokens` (5 passages of up to 512 words and the
instructions: about 3,500 tokens) and `--new-tokens` forced new tokens each. Random weights cost the same FLOPs
and memory traffic as trained ones, so the seconds hold; the words do not matter. transformers' generate is a
floor for vLLM's continuous batching, which the live day would use.

    python benchmarks/decoder_throughput.py --device cuda --batch-sizes 1 8 32      # on the GPU machine
    python benchmarks/decoder_throughput.py --reduced                             # CPU smoke run, tiny shape

Prints one JSON object: per batch size the prefill and total seconds, generated tokens per second, seconds per
question, and the questions a 2-hour slot holds at that rate (`live_day_questions_in_2h`, against 500).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

#: tiiuae/Falcon3-10B-Instruct's config.json (architecture LlamaForCausalLM)
FALCON3_10B = dict(hidden_size=3072, intermediate_size=23040, num_hidden_layers=40, num_attention_heads=12,
                   num_key_value_heads=4, vocab_size=131072, max_position_embeddings=32768, rope_theta=1000042.0,
                   rms_norm_eps=1e-6, tie_word_embeddings=False)
#: a tiny model of the same family for the CPU smoke run
REDUCED = dict(hidden_size=64, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, vocab_size=1024, max_position_embeddings=2048, rope_theta=10000.0,
               rms_norm_eps=1e-6, tie_word_embeddings=False)
LIVE_DAY_QUESTIONS, LIVE_DAY_SECONDS = 500, 2 * 3600


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--prompt-tokens", type=int, default=3500)
    parser.add_argument("--new-tokens", type=int, default=200)
    parser.add_argument("--reduced", action="store_true", help="tiny model on the CPU (smoke run)")
    args = parser.parse_args(argv)
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if args.reduced:
        args.device, args.batch_sizes, args.prompt_tokens, args.new_tokens = "cpu", [1, 2], 64, 8
    shape = REDUCED if args.reduced else FALCON3_10B
    dtype = torch.float32 if args.device == "cpu" else torch.bfloat16
    torch.manual_seed(0)
    start = time.perf_counter()
    with torch.device(args.device):
        model = LlamaForCausalLM(LlamaConfig(**shape, torch_dtype=dtype)).to(dtype).eval()
    build_s = time.perf_counter() - start
    params = sum(p.numel() for p in model.parameters())
    env = {"device": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu",
           "torch": torch.__version__, "dtype": str(dtype), "parameters": params, "build_s": round(build_s, 2),
           "shape": "reduced" if args.reduced else "Falcon3-10B"}
    rows = []
    for batch in args.batch_sizes:
        ids = torch.randint(10, shape["vocab_size"] - 10, (batch, args.prompt_tokens), device=args.device)
        mask = torch.ones_like(ids)
        with torch.inference_mode():
            model.generate(input_ids=ids[:, :16], attention_mask=mask[:, :16], max_new_tokens=2, min_new_tokens=2,
                           do_sample=False, pad_token_id=0)  # warm-up (kernels, allocator)
            _sync(torch, args.device)
            t0 = time.perf_counter()
            model(input_ids=ids, attention_mask=mask)
            _sync(torch, args.device)
            prefill = time.perf_counter() - t0
            t0 = time.perf_counter()
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=args.new_tokens,
                                 min_new_tokens=args.new_tokens, do_sample=False, pad_token_id=0)
            _sync(torch, args.device)
            total = time.perf_counter() - t0
        generated = int((out.shape[1] - ids.shape[1]) * batch)
        per_question = total / batch
        rows.append({"batch": batch, "prefill_s": round(prefill, 6), "total_s": round(total, 6),
                     "generated_tokens_per_s": round(generated / total, 1), "seconds_per_question": round(per_question, 6),
                     "live_day_questions_in_2h": int(LIVE_DAY_SECONDS / per_question)})
        if args.device.startswith("cuda"):
            rows[-1]["max_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    result = {"env": env, "prompt_tokens": args.prompt_tokens, "new_tokens": args.new_tokens,
              "live_day_target": {"questions": LIVE_DAY_QUESTIONS, "seconds": LIVE_DAY_SECONDS}, "runs": rows}
    print(json.dumps(result, indent=2), flush=True)
    return result


def _sync(torch, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1:])
