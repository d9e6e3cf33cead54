"""Prompt-processing and generation tokens/s of the project's llama.cpp engines against raw llama-cpp-python on the
same GGUF and threads, and the bounds this CPU puts on each (issue 53, item 1).

Usage: `python benchmarks/llm_throughput.py [--models gemma3_270m smollm2_135m] [--prompts 512 2000 8000]
[--generate 64] [--repeats 2] [--engines raw engine server] [--set flash_attn=true ...] [--out f.json]`, and
`python benchmarks/llm_throughput.py --variants flash_attn=true swa_full=false ...` to time options against the
config's own (raw llama-cpp-python, every variant loaded at once and timed in turn within each repeat; whether the
first 32 greedy tokens stay the same).

Columns, per model (a conf/llm/*.yaml on llama.cpp) and prompt length:
- `raw`: llama-cpp-python's `Llama` with the engine's load settings; the prompt evaluated with `Llama.eval` after a
  reset (prompt tokens/s), then `--generate` tokens decoded one at a time (generation tokens/s at that context).
- `engine`: the project's `LlamaCppEngine` (response cache off) on the same text: a request for 1 token times the
  prompt; a request for `--generate` tokens (the model may stop early: its completion tokens are printed) times
  generation as the difference of the two.
- `server`: the same two requests through `OpenAICompatibleEngine` against `python -m llama_cpp.server` on
  127.0.0.1 with the same model, threads and context (the project's "llama.cpp server" path).
Every prompt starts with its own trial number, so no request reuses another's evaluated prefix. Each figure is the
best of `--repeats` (a burst of load elsewhere slows a repeat, never speeds it).

Bounds: the compute bound is the measured float32 matmul peak of this CPU (numpy's BLAS, the same threads) over
the model's FLOPs per token (2 x the weights each token multiplies, the output head for generated tokens only, and
attention: 4 x heads x head size x the positions each query sees, the sliding window where the model has one);
llama.cpp's integer kernels (AVX-512 VNNI here) can exceed a float32 peak, so a fraction above 1 means exactly
that. The generation bound is the measured memory bandwidth (a large array copy: bytes read + written per second)
over the bytes each generated token reads: the GGUF's tensors (an untied model's input embedding table only one row
of) and the KV cache at that context. `--set KEY=VALUE` applies an engine option (flash_attn, swa_full,
kv_cache_type, n_batch, n_ubatch, requantize) to every column, so options are compared run by run; a `--variants`
entry with `requantize=` loads the shipped file requantized that way (`requantize=null`: the file as shipped).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from rag.core.cpus import usable_cpus  # noqa: E402
from rag.llm.base import LLMRequest, SamplingParams  # noqa: E402
from rag.llm.gguf_requantize import requantized_file  # noqa: E402
from rag.llm.llama_cpp import KV_CACHE_TYPES, LlamaCppEngine  # noqa: E402

#: models whose output head is the token-embedding table (config.json `tie_word_embeddings` of google/gemma-3-270m
#: and HuggingFaceTB/SmolLM2-135M-Instruct): the head reads the whole table for every generated token
TIED_OUTPUT_HEAD = {"gemma3_270m": True, "smollm2_135m": True}
#: the words prompts are made of: any English text does; the tokens, not the words, are counted
FILLER = (ROOT / "README.md").read_text()


def llm_settings(name: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """A conf/llm YAML's engine settings (interpolations dropped: seed 0), with `--set` applied."""
    node = yaml.safe_load((ROOT / "conf" / "llm" / f"{name}.yaml").read_text())
    if node.get("_target_") != "rag.llm.llama_cpp.LlamaCppEngine":
        raise SystemExit(f"--models {name}: not a llama.cpp config (conf/llm/{name}.yaml)")
    node = {k: v for k, v in node.items() if k != "_target_" and not (isinstance(v, str) and "${" in v)}
    node.update(overrides)
    return node


def shapes(metadata: dict[str, str]) -> dict[str, int]:
    """Layer count and sizes from the GGUF metadata (keys are prefixed by the architecture)."""
    arch = metadata["general.architecture"]

    def get(key: str, default: int | None = None) -> int:
        value = metadata.get(f"{arch}.{key}")
        if value is None:
            if default is None:
                raise KeyError(f"{arch}.{key}")
            return default
        return int(float(value))

    n_embd, n_head = get("embedding_length"), get("attention.head_count")
    head = get("attention.key_length", n_embd // n_head)
    return {"layers": get("block_count"), "embd": n_embd, "heads": n_head,
            "kv_heads": get("attention.head_count_kv", n_head), "head": head,
            "value_head": get("attention.value_length", head), "ff": get("feed_forward_length"),
            "window": get("attention.sliding_window", 0),
            # Gemma 3: every sixth layer attends globally, the others within the window
            "global_every": 6 if arch.startswith("gemma3") else 1}


def flops_per_token(s: dict[str, int], vocab: int, position: int, output_head: bool) -> float:
    """Multiply-adds x 2 for one token at `position` (0-based): projections, gated MLP, attention, head."""
    projections = s["embd"] * (s["heads"] * s["head"] + s["kv_heads"] * (s["head"] + s["value_head"])) \
        + s["heads"] * s["value_head"] * s["embd"] + 3 * s["embd"] * s["ff"]
    attention = 0.0
    for layer in range(s["layers"]):
        local = s["window"] and (layer + 1) % s["global_every"] != 0
        seen = min(position + 1, s["window"]) if local else position + 1
        attention += seen * s["heads"] * (s["head"] + s["value_head"])
    head = s["embd"] * vocab if output_head else 0
    return 2.0 * (s["layers"] * projections + attention + head)


def prompt_flops(s: dict[str, int], vocab: int, n: int) -> float:
    """FLOPs of evaluating an n-token prompt (logits for its last token only, as llama.cpp computes)."""
    return sum(flops_per_token(s, vocab, p, output_head=p == n - 1) for p in range(n))


def matmul_peak(threads: int, size: int = 2048, repeats: int = 5) -> float:
    """Float32 FLOP/s of numpy's BLAS on `threads` threads (best of `repeats`)."""
    from threadpoolctl import threadpool_limits

    a, b = np.random.default_rng(0).random((2, size, size), dtype=np.float32)
    best = float("inf")
    with threadpool_limits(threads):
        a @ b
        for _ in range(repeats):
            start = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - start)
    return 2 * size ** 3 / best


def memory_bandwidth(megabytes: int = 512, repeats: int = 5) -> float:
    """Bytes per second of a large array copy (read + write), best of `repeats`."""
    src = np.ones(megabytes * 2 ** 20 // 8)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return 2 * src.nbytes / best


def prompt_text(tokenizer: Any, n_tokens: int, trial: int) -> str:
    """About n_tokens of text, starting with its trial number so no two prompts share a prefix."""
    head = f"Trial {trial}. "
    words = FILLER.split()
    text, step = head, 400
    while len(tokenizer.tokenize(text.encode(), add_bos=True)) < n_tokens:
        start = (trial * 997 + len(text)) % max(1, len(words) - step)
        text += " ".join(words[start: start + step]) + " "
    tokens = tokenizer.tokenize(text.encode(), add_bos=False)[: n_tokens - 1]
    return tokenizer.detokenize(tokens).decode("utf-8", errors="ignore")


def raw_rates(llama: Any, text: str, generate: int) -> tuple[int, float, float]:
    """(prompt tokens, prompt tokens/s, generation tokens/s) of llama-cpp-python itself."""
    tokens = llama.tokenize(text.encode(), add_bos=True)
    llama.reset()
    llama._ctx.kv_cache_clear()
    start = time.perf_counter()
    llama.eval(tokens)
    prompt_s = time.perf_counter() - start
    forced = llama.tokenize(FILLER[:4000].encode(), add_bos=False)[:generate]
    start = time.perf_counter()
    for token in forced:
        llama.eval([token])
    return len(tokens), len(tokens) / prompt_s, len(forced) / (time.perf_counter() - start)


def engine_rates(engine: Any, text: str, generate: int) -> tuple[int, float, float, int]:
    """(prompt tokens, prompt tokens/s, generation tokens/s, completion tokens) through an engine's generate: a
    request for 1 token times the prompt; the same prompt again for `generate` tokens times generation (llama.cpp
    reuses the evaluated prompt, in process and in its server, so that request decodes only its new tokens)."""
    def ask(max_tokens: int) -> tuple[float, Any]:
        request = LLMRequest(messages=[{"role": "user", "content": text}],
                             params=SamplingParams(temperature=0.0, max_tokens=max_tokens))
        start = time.perf_counter()
        completion = engine.generate([request], desc="throughput")[0]
        return time.perf_counter() - start, completion

    prompt_s, first = ask(1)
    generate_s, long = ask(generate)
    return first.prompt_tokens, first.prompt_tokens / prompt_s, long.completion_tokens / generate_s, \
        long.completion_tokens


def start_server(model: Path, settings: dict[str, Any], threads: int, log: Path) -> tuple[subprocess.Popen, str]:
    """`python -m llama_cpp.server` on a free port of 127.0.0.1 with the engine's load settings."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
               "--port", str(port), "--n_ctx", str(settings.get("n_ctx", 8192)), "--n_threads", str(threads),
               "--n_threads_batch", str(threads), "--n_batch", str(settings.get("n_batch", 512)),
               "--model_alias", "bench", "--flash_attn", str(bool(settings.get("flash_attn"))),
               "--type_k", str(_kv_type(settings)), "--type_v", str(_kv_type(settings))]
    proc = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(240):
        try:
            urllib.request.urlopen(f"{url}/models", timeout=2)
            return proc, url
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"llama_cpp.server exited: {log.read_text()[-2000:]}") from None
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("llama_cpp.server did not start in 120 s")


def _kv_type(settings: dict[str, Any]) -> int:
    import llama_cpp

    return getattr(llama_cpp, KV_CACHE_TYPES[settings.get("kv_cache_type") or "f16"])


def parse_sets(items: list[str]) -> dict[str, Any]:
    return {key: yaml.safe_load(value) for key, value in (item.split("=", 1) for item in items)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["gemma3_270m", "smollm2_135m"])
    parser.add_argument("--prompts", type=int, nargs="+", default=[512, 2000, 8000])
    parser.add_argument("--generate", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--engines", nargs="+", default=["raw", "engine", "server"],
                        choices=["raw", "engine", "server"])
    parser.add_argument("--set", dest="sets", nargs="*", default=[], help="engine options, KEY=VALUE")
    parser.add_argument("--variants", nargs="*", default=None, metavar="KEY=VALUE[,KEY=VALUE]",
                        help="compare raw llama-cpp-python with these options against the config's, interleaved "
                             "repeat by repeat (e.g. flash_attn=true swa_full=false); no engine or server columns")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.variants is not None:
        report = compare_variants(args)
        if args.out:
            args.out.write_text(json.dumps(report, indent=2))
        return report
    from llama_cpp import Llama

    from rag.llm.openai_compat import OpenAICompatibleEngine

    threads = usable_cpus()
    peak, bandwidth = matmul_peak(threads), memory_bandwidth()
    report: dict[str, Any] = {"threads": threads, "load_average": os.getloadavg()[0], "sets": parse_sets(args.sets),
                              "matmul_peak_gflops": peak / 1e9, "memory_bandwidth_gbs": bandwidth / 1e9,
                              "models": {}}
    print(f"threads {threads}; float32 matmul peak {peak / 1e9:.1f} GFLOP/s; memory bandwidth "
          f"{bandwidth / 1e9:.1f} GB/s; load average {report['load_average']:.2f}", flush=True)
    for name in args.models:
        settings = llm_settings(name, report["sets"])
        engine = LlamaCppEngine(**{k: v for k, v in settings.items() if k != "model_name"}, cache=None)
        model = engine.model_file
        meta = engine.metadata
        s = shapes(meta)
        tokenizer = engine._tokenizer()
        vocab = tokenizer.n_vocab()
        # bytes read per generated token: every tensor once (a tied head reads the embedding table; an untied
        # model's input table is only looked up, one row per token)
        tied = TIED_OUTPUT_HEAD.get(name, False)
        embed_bytes = model.stat().st_size * (s["embd"] * vocab) / max(1, _parameter_count(s, vocab))
        weight_bytes = model.stat().st_size - (0 if tied else embed_bytes)
        kv_bytes_per_position = 2 * s["layers"] * s["kv_heads"] * s["head"] * \
            (2 if (settings.get("kv_cache_type") or "f16") == "f16" else 4 if settings["kv_cache_type"] == "f32" else 1)
        rows: list[dict[str, Any]] = []
        raw = None
        server = None
        if "raw" in args.engines:
            raw = Llama(model_path=str(model), n_ctx=engine.n_ctx, n_threads=engine.n_threads,
                        n_threads_batch=engine.n_threads_batch, n_batch=engine.n_batch, n_ubatch=engine.n_ubatch,
                        flash_attn=engine.flash_attn, swa_full=engine.swa_full, type_k=_kv_type(settings),
                        type_v=_kv_type(settings), verbose=False)
        if "server" in args.engines:
            log = Path(tempfile.mkdtemp()) / "server.log"
            proc, url = start_server(model, settings, threads, log)
            server = (proc, OpenAICompatibleEngine(model="bench", base_url=url, api_key_env=None,
                                                   chat_format="plain", concurrency=1, timeout_s=900,
                                                   n_ctx=engine.n_ctx))
        try:
            for warm in (engine, server[1] if server else None):  # weights loaded, first-request costs paid
                if warm is not None and any(c != "raw" for c in args.engines):
                    engine_rates(warm, prompt_text(tokenizer, 64, 1), 2)
            for n in args.prompts:
                if n + args.generate + 16 > engine.n_ctx:
                    print(f"{name}: a {n}-token prompt and {args.generate} tokens exceed n_ctx={engine.n_ctx}")
                    continue
                row: dict[str, Any] = {"prompt_tokens": n}
                bound_pp = peak / (prompt_flops(s, vocab, n) / n)
                bound_tg_compute = peak / flops_per_token(s, vocab, n, output_head=True)
                bound_tg_memory = bandwidth / (weight_bytes + kv_bytes_per_position * n)
                row["bounds"] = {"prompt_compute": bound_pp, "generate_compute": bound_tg_compute,
                                 "generate_memory": bound_tg_memory}
                for column in args.engines:
                    best: tuple[float, float] | None = None
                    for repeat in range(args.repeats):
                        trial = 2 * (repeat + 1) + 1000 * n
                        text = prompt_text(tokenizer, n, trial)
                        if column == "raw":
                            got, pp, tg = raw_rates(raw, text, args.generate)
                            completion = args.generate
                        else:
                            got, pp, tg, completion = engine_rates(engine if column == "engine" else server[1],
                                                                   text, args.generate)
                        best = (max(best[0], pp), max(best[1], tg)) if best else (pp, tg)
                    row[column] = {"prompt_tps": best[0], "generate_tps": best[1], "prompt_tokens_seen": got,
                                   "completion_tokens": completion}
                    print(f"{name} {n:>5} {column:>6}: prompt {best[0]:7.1f} tok/s ({best[0] / bound_pp:.2f} of "
                          f"compute bound {bound_pp:.0f}); generate {best[1]:6.1f} tok/s ({best[1] / bound_tg_memory:.2f} "
                          f"of memory bound {bound_tg_memory:.0f}, {best[1] / bound_tg_compute:.2f} of compute bound "
                          f"{bound_tg_compute:.0f}; {completion} tokens)", flush=True)
                rows.append(row)
        finally:
            engine.close()
            if raw is not None:
                raw.close()
            if server is not None:
                server[0].terminate()
                server[0].wait(timeout=30)
        report["models"][name] = {"file": model.name, "bytes": model.stat().st_size, "shapes": s, "vocab": vocab,
                                  "tied_output_head": tied, "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    return report


def _load(model: Path, settings: dict[str, Any], threads: int) -> Any:
    from llama_cpp import Llama

    return Llama(model_path=str(model), n_ctx=settings.get("n_ctx", 8192), n_threads=threads,
                 n_threads_batch=threads, n_batch=settings.get("n_batch", 512),
                 n_ubatch=settings.get("n_ubatch") or settings.get("n_batch", 512),
                 flash_attn=bool(settings.get("flash_attn")), swa_full=settings.get("swa_full"),
                 type_k=_kv_type(settings), type_v=_kv_type(settings), seed=0, verbose=False)


def greedy_tokens(llama: Any, text: str, n: int) -> list[int]:
    """The first n greedy tokens after `text` (a fresh context): what the option changes in the answers."""
    llama.reset()
    llama._ctx.kv_cache_clear()
    out = []
    for token in llama.generate(llama.tokenize(text.encode(), add_bos=True), top_k=1, temp=0.0, reset=True):
        out.append(int(token))
        if len(out) >= n or token == llama.token_eos():
            break
    return out


def compare_variants(args: argparse.Namespace) -> dict[str, Any]:
    """Each variant of the engine options against the config's own, one model at a time, every variant loaded at
    once and timed in turn within each repeat (a burst of load falls on all alike); per prompt length the prompt
    and generation tokens/s, their ratio to the config's, and whether the first 32 greedy tokens are the same."""
    threads = usable_cpus()
    variants = [("config", {})] + [(v, parse_sets(v.split(","))) for v in args.variants]
    report: dict[str, Any] = {"threads": threads, "load_average": os.getloadavg()[0], "models": {}}
    print(f"threads {threads}; load average {report['load_average']:.2f}", flush=True)
    for name in args.models:
        base = llm_settings(name, parse_sets(args.sets))
        engine = LlamaCppEngine(**{k: v for k, v in base.items() if k != "model_name"}, cache=None)
        tokenizer = engine._tokenizer()
        loaded = {label: _load(_model_for(engine, {**base, **options}), {**base, **options}, threads)
                  for label, options in variants}
        rows = []
        for n in args.prompts:
            if n + args.generate + 16 > base.get("n_ctx", 8192):
                continue
            best: dict[str, list[float]] = {label: [0.0, 0.0] for label, _ in variants}
            for repeat in range(args.repeats):
                text = prompt_text(tokenizer, n, 2 * (repeat + 1) + 1000 * n)
                for label, _ in variants:
                    _, pp, tg = raw_rates(loaded[label], text, args.generate)
                    best[label] = [max(best[label][0], pp), max(best[label][1], tg)]
            probe = prompt_text(tokenizer, n, 7)
            reference = greedy_tokens(loaded["config"], probe, 32)
            row = {"prompt_tokens": n}
            for label, _ in variants:
                same = greedy_tokens(loaded[label], probe, 32) == reference
                pp, tg = best[label]
                row[label] = {"prompt_tps": pp, "generate_tps": tg, "prompt_ratio": pp / best["config"][0],
                              "generate_ratio": tg / best["config"][1], "same_32_greedy_tokens": same}
                print(f"{name} {n:>5} {label:>32}: prompt {pp:7.1f} tok/s (x{pp / best['config'][0]:.2f}); "
                      f"generate {tg:6.1f} tok/s (x{tg / best['config'][1]:.2f}); same 32 greedy tokens: {same}",
                      flush=True)
            rows.append(row)
        for llama in loaded.values():
            llama.close()
        engine.close()
        report["models"][name] = rows
    return report


def _model_for(engine: LlamaCppEngine, settings: dict[str, Any]) -> Path:
    """The GGUF file a variant loads: the shipped one, or its copy requantized as the variant's `requantize` says
    (made once and cached, as the engine makes it)."""
    wanted = settings.get("requantize")
    return requantized_file(engine.shipped_file, wanted) if wanted else engine.shipped_file


def _parameter_count(s: dict[str, int], vocab: int) -> int:
    """Weights of the model (projections, MLP, embeddings), to apportion the file's bytes."""
    per_layer = s["embd"] * (s["heads"] * s["head"] + s["kv_heads"] * (s["head"] + s["value_head"])) \
        + s["heads"] * s["value_head"] * s["embd"] + 3 * s["embd"] * s["ff"]
    return s["layers"] * per_layer + s["embd"] * vocab


if __name__ == "__main__":
    main()
