#!/usr/bin/env bash
# Issue 11's table: the five prompt strategies, GINGER, Crucible and Crucible-Verified on the same retrieval,
# each judged by `judge=crucible`, then both tables printed by benchmarks/strategy_table.py (nugget-first
# strategies first: each sweep's cells are usable as soon as they finish).
#   N=20 OUT=/tmp/strategies bash benchmarks/strategies_side_by_side.sh
# Settings (docs/benchmarks.md): Gemma 3 270M, BM25 k=20, top 5 passages, response cache off for generation,
# a reduced nugget bank for the judge, Crucible with 3 documents / a bank of 5 / 1 passage per nugget, GINGER
# with 3 passages and 3 clusters. RAG_DATA_DIR must be set; RAG_CACHE_DIR is shared by the three sweeps.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${N:-20}"
OUT="${OUT:-/tmp/strategies}"
PY="${PY:-.venv/bin/python}"
export RAG_OUTPUT_DIR="$OUT/outputs" RAG_CACHE_DIR="${RAG_CACHE_DIR:-$OUT/cache}"
COMMON=(dataset=liverag_dev "dataset.limit=$N" retriever=bm25 retriever.k=20 rerank.k=5 logger=none
        cache.llm_responses=false judge=crucible judge.nuggetizer.max_passages=2
        judge.nuggetizer.max_passage_chars=1500 judge.nuggetizer.max_nuggets=10
        judge.nuggetizer.keep_top=10 judge.nuggetizer.create_params.max_tokens=256)
"$PY" -m rag.main -m "${COMMON[@]}" generator=crucible,crucible_verified generator.max_docs=3 \
  generator.bank.size=5 generator.passages_per_nugget=1 hydra.sweep.dir="$OUT/crucible"
"$PY" -m rag.main -m "${COMMON[@]}" generator=ginger generator.max_passages=3 generator.max_clusters=3 \
  hydra.sweep.dir="$OUT/ginger"
"$PY" -m rag.main -m "${COMMON[@]}" generator=simple,trustrag,instructrag,astuterag,iterdrag \
  hydra.sweep.dir="$OUT/prompt"
"$PY" benchmarks/strategy_table.py "$OUT/prompt" "$OUT/ginger" "$OUT/crucible" --json "$OUT/table.json"
