#!/usr/bin/env bash
# GPU check of the RAGtifier path's two GPU workloads (one prepared script, about 5-7 minutes, well under 10).
#
# Needs only python with torch (CUDA) and transformers: no vLLM, no FlagEmbedding, no network. It times
# 1. cross-encoder scoring of 300 passages per question at bge-reranker-v2-m3's real size (XLM-RoBERTa large,
#    random weights from a config) in fp16, against RAGtifier's 8.6 s per question;
# 2. greedy generation of a Falcon3-10B-shaped decoder (random weights, bf16, transformers' generate) at batch
#    sizes 1, 8 and 32 with 3,500-token prompts and 200 new tokens, against the live day's 500 questions in
#    2 hours (benchmarks/decoder_throughput.py).
# Results: JSON on stdout and, when $OUT is set, files under $OUT (one per run, plus nvidia-smi and a summary).
#
# Usage: bash benchmarks/gpu_check.sh            # on the GPU machine
#        bash benchmarks/gpu_check.sh --reduced  # CPU smoke run of the same script (tiny model)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
OUT="${OUT:-}"
if [[ -n "$OUT" ]]; then mkdir -p "$OUT"; fi

log() { echo "[gpu_check] $*" >&2; }

if [[ "${1:-}" == "--reduced" ]]; then
    log "reduced CPU smoke run"
    timeout 420 "$PY" benchmarks/bge_rerank_bench.py --reduced --device cpu --questions 2 --passages 300 \
        --batch-size 32 --schedules per_question
    timeout 120 "$PY" benchmarks/decoder_throughput.py --reduced
    exit 0
fi

"$PY" - <<'PYEOF'
import torch, transformers
print(f"[gpu_check] torch {torch.__version__}, transformers {transformers.__version__}, "
      f"cuda available: {torch.cuda.is_available()}", flush=True)
assert torch.cuda.is_available(), "no CUDA device visible"
print(f"[gpu_check] device: {torch.cuda.get_device_name(0)}", flush=True)
PYEOF
if command -v nvidia-smi >/dev/null 2>&1 && [[ -n "$OUT" ]]; then nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true; fi

run() {  # run NAME ARGS...: one benchmark configuration, its JSON kept under $OUT/NAME.json
    local name="$1"; shift
    log "run $name: $*"
    local json
    if ! json=$(OUT="" timeout 200 "$PY" benchmarks/bge_rerank_bench.py --device cuda --dtype float16 "$@"); then
        log "run $name FAILED (see stderr above); continuing"
        return 0
    fi
    echo "$json"
    if [[ -n "$OUT" ]]; then echo "$json" > "$OUT/$name.json"; fi
}

# LiveRAG-like: every pair truncated to 512 tokens (512-word chunks), FlagReranker's default batch 128
run full_b128 --questions 10 --passages 300 --lengths full --batch-size 128
# shorter, varied passages; and a larger batch to see whether the GPU is saturated
run mixed_b128 --questions 10 --passages 300 --lengths mixed --batch-size 128
run full_b256 --questions 10 --passages 300 --lengths full --batch-size 256 --schedules cross_question

# the live-day generator's budget: a Falcon3-10B-shaped decoder (about 21 GB of bf16 weights)
log "run decoder: Falcon3-10B shape, batch 1 8 32"
if json=$(timeout 300 "$PY" benchmarks/decoder_throughput.py --device cuda --batch-sizes 1 8 32); then
    echo "$json"
    if [[ -n "$OUT" ]]; then echo "$json" > "$OUT/decoder.json"; fi
else
    log "run decoder FAILED (see stderr above); continuing"
fi

if [[ -n "$OUT" ]]; then
    "$PY" - "$OUT" <<'PYEOF'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
rows = []
for name in ("full_b128", "mixed_b128", "full_b256"):
    path = out / f"{name}.json"
    if path.exists():
        r = json.loads(path.read_text())
        rows.append({"run": name, "per_question_mean_s": r.get("per_question", {}).get("mean_s"),
                     "cross_question_s": r.get("cross_question", {}).get("per_question_s"),
                     "gpu": r["env"]["gpu"], "max_memory_gib": r["env"].get("max_memory_gib"),
                     "seed_s": 8.6})
decoder = out / "decoder.json"
if decoder.exists():
    d = json.loads(decoder.read_text())
    rows += [{"run": f"decoder_b{r['batch']}", "seconds_per_question": r["seconds_per_question"],
              "generated_tokens_per_s": r["generated_tokens_per_s"],
              "live_day_questions_in_2h": r["live_day_questions_in_2h"], "target": 500, "gpu": d["env"]["device"],
              "max_memory_gib": r.get("max_memory_gib")} for r in d["runs"]]
(out / "summary.json").write_text(json.dumps(rows, indent=2) + "\n")
print(json.dumps(rows, indent=2))
PYEOF
fi
log "done"
