#!/usr/bin/env bash
# How many threads should llama.cpp generate with? The demo's settings (experiment=demo: BM25 k=20, top 3
# passages, Simple, answers up to 128 tokens) on the first N LiveRAG dev questions, once per value of
# llm.n_threads (THREADS, comma-separated; `null` is the engine's default), response cache off, no judge, so every
# answer is generated and timed in one run. Prints benchmarks/strategy_table.py's per-run tables (engine tokens/s,
# engine seconds per question) and how many answers are identical between the first and each other thread count.
#   N=20 THREADS=1,2 LLM=gemma3_270m OUT=/tmp/llm_threads bash benchmarks/llm_threads.sh   (docs/benchmarks.md)
# Prompts are evaluated with all the process's CPUs whatever n_threads says (llama-cpp-python's n_threads_batch);
# n_threads is the thread count of token-by-token generation. RAG_DATA_DIR must be set.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${N:-20}"
THREADS="${THREADS:-1,2}"
LLM="${LLM:-gemma3_270m}"
OUT="${OUT:-/tmp/llm_threads}"
PY="${PY:-.venv/bin/python}"
export RAG_OUTPUT_DIR="$OUT/outputs" RAG_CACHE_DIR="${RAG_CACHE_DIR:-$OUT/cache}"
"$PY" -m rag.main -m experiment=demo "dataset.limit=$N" "llm=$LLM" "llm.n_threads=$THREADS" logger=none \
  cache.llm_responses=false judge=none hydra.sweep.dir="$OUT/answers"
"$PY" benchmarks/strategy_table.py "$OUT/answers" --json "$OUT/table.json"
"$PY" - "$OUT/answers" <<'EOF'
import json
import sys
from pathlib import Path

runs = sorted(Path(sys.argv[1]).glob("*/answers.jsonl"), key=lambda p: p.stat().st_mtime)
answers = [{r["id"]: r["answer"] for r in map(json.loads, p.read_text().splitlines())} for p in runs]
for path, other in zip(runs[1:], answers[1:]):
    same = sum(answers[0][i] == other.get(i) for i in answers[0])
    print(f"{path.parent.name} vs {runs[0].parent.name}: {same} / {len(answers[0])} answers identical")
EOF
