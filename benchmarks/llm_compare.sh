#!/usr/bin/env bash
# Issue 14's model comparison: SmolLM2-135M-Instruct (llm=smollm2_135m) against Gemma 3 270M (llm=gemma3_270m)
# as the demo's model, then the tables printed by benchmarks/strategy_table.py.
#   N=20 M=3 OUT=/tmp/llm_compare bash benchmarks/llm_compare.sh   (the run in docs/benchmarks.md)
#   START=0 N=148 M=0 JUDGE=none OUT=/tmp/llm_compare_a bash benchmarks/llm_compare.sh   (answers only, no judge; docs)
#   START=148 N=147 M=0 JUDGE=none OUT=/tmp/llm_compare_b bash benchmarks/llm_compare.sh   (a slice: questions 149-295)
# 1. answers: the demo's settings (experiment=demo: BM25 k=20, top 3 passages, Simple, answers up to 128 tokens) on
#    N LiveRAG dev questions (after the first START) with each model, each judged by itself with judge=liverag (the model of the
#    demo is also its judge) shown the same 3 passages: token F1 by hop, judge parse failures, tokens/s.
# 2. strategies: SmolLM2 on the first M questions with the five prompt strategies and issue 11's settings (BM25
#    k=20, top 5 passages), so its parse failures per strategy sit next to Gemma's from
#    benchmarks/strategies_side_by_side.sh (same questions, same retrieval). M=0 skips this part.
# JUDGE=none skips the judge (token F1 and generator parse failures only; half the time).
# START=S skips the first S questions (dataset.offset): the 295 questions take about 2.6 hours on a 2-core VM, so
# they can run as slices, each a same-run comparison; paired_f1.py joins the slices' per-question F1
# (benchmarks/results/ keeps those of the slices in docs/benchmarks.md).
# 3. benchmarks/paired_f1.py: the per-question token F1 difference between the two models, with a bootstrap CI.
# Response cache off (every answer is generated and timed); RAG_DATA_DIR must be set.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${N:-20}"
M="${M:-3}"
START="${START:-0}"
OUT="${OUT:-/tmp/llm_compare}"
JUDGE="${JUDGE:-liverag}"
PY="${PY:-.venv/bin/python}"
# folder names leave out dataset.limit, so a larger N run into the same OUT extends the answers already there
KEEP_FOLDERS="hydra.job.config.override_dirname.exclude_keys=[paths.data_dir,paths.cache_dir,paths.output_dir,logger,hydra.launcher,local,resume,dataset.limit]"
export RAG_OUTPUT_DIR="$OUT/outputs" RAG_CACHE_DIR="${RAG_CACHE_DIR:-$OUT/cache}"
"$PY" -m rag.main -m experiment=demo "dataset.offset=$START" "dataset.limit=$N" llm=gemma3_270m,smollm2_135m logger=none \
  cache.llm_responses=false "judge=$JUDGE" $([ "$JUDGE" = liverag ] && echo judge.liverag.max_passages=3) \
  hydra.sweep.dir="$OUT/answers" "$KEEP_FOLDERS"
if [ "$M" -gt 0 ]; then
  "$PY" -m rag.main -m dataset=liverag_dev "dataset.offset=$START" "dataset.limit=$M" retriever=bm25 retriever.k=20 rerank.k=5 \
    llm=smollm2_135m logger=none cache.llm_responses=false generator=simple,trustrag,instructrag,astuterag,iterdrag \
    hydra.sweep.dir="$OUT/strategies" "$KEEP_FOLDERS"
fi
"$PY" benchmarks/strategy_table.py "$OUT/answers" $([ "$M" -gt 0 ] && echo "$OUT/strategies") --json "$OUT/table.json"
"$PY" benchmarks/paired_f1.py "$OUT"/answers/*llm=gemma3_270m "$OUT"/answers/*llm=smollm2_135m \
  --names gemma3_270m smollm2_135m --json "$OUT/paired_f1.json" --export "$OUT/per_question"
