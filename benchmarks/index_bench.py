"""Index builds at scale (issue 27): build time and peak memory against corpus size, one process vs N shards, query
latency against corpus size and k (single index vs shards), and IVF recall against flat.

    python benchmarks/index_bench.py bm25 --sizes 30000,100000,300000,1000000 --shards 4
    python benchmarks/index_bench.py dense --sizes 10000,28082 --shards 4
    python benchmarks/index_bench.py recall --size 28082      # after `dense`: IVF / IVF-PQ recall against flat
    python benchmarks/index_bench.py latency-bm25 --sizes ...  # query latency again on the builds left in --work

Every build is `python -m rag.index` in its own process under `/usr/bin/time` (wall seconds, peak RSS). One
process: `index.num_shards=1`. N shards: a multirun `index.shard=range(0,N)` through `hydra/launcher=slurm` when a
SLURM controller answers (one array task per shard; the merge runs in the submitting process when they finish),
else N shard processes one after another and `index.step=merge`; each task's own seconds and peak RSS come from
its done marker. `uptime`'s load average is recorded before and after each figure (the machine is shared).

Corpora have one document per passage: the first 28,082 are the real passages of the shared FineWeb sample
(liverag_dm/fineweb_docs.jsonl.gz cut into 512-word passages, in order); beyond that, passages resampled with a
seeded generator from those real passages, under new document ids. They are real FineWeb text, but repeated: the
vocabulary stops growing after 28,082 passages where fresh FineWeb text keeps adding rare terms.
Results: one JSON file per run under --out (default benchmarks/results/index/).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = Path(os.environ.get("RAG_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()
FINEWEB = DATA / "liverag_dm" / "fineweb_docs.jsonl.gz"
KS = (10, 100, 1000)


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def machine() -> str:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    mem = next(ln.split()[1] for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal"))
    return f"{os.cpu_count()} CPUs ({cpu}), {int(mem) // 1024 // 1024} GiB RAM, Python {platform.python_version()}"


def slurm_up() -> bool:
    from tests.cluster.helpers import slurm_unavailable_reason

    return slurm_unavailable_reason() is None


def real_passages() -> list[str]:
    from rag.data.corpus import JsonlCorpus

    return [p.text for p in JsonlCorpus(str(FINEWEB)).passages]


def make_corpus(n: int, folder: Path, texts: list[str]) -> Path:
    """n one-passage documents: the real passages in order, then resampled ones (seed 0) under new ids."""
    path = folder / f"corpus-{n}.jsonl.gz"
    if path.exists():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    tmp = path.with_suffix(".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=1) as out:
        for i in range(n):
            text = texts[i] if i < len(texts) else texts[rng.randrange(len(texts))]
            kind = "real" if i < len(texts) else "resampled"
            out.write(json.dumps({"doc_id": f"{kind}-{i:08d}", "text": text}) + "\n")
    tmp.rename(path)
    return path


def env(cache: Path, out: Path) -> dict[str, str]:
    return {**os.environ, "RAG_DATA_DIR": str(DATA), "RAG_CACHE_DIR": str(cache), "RAG_OUTPUT_DIR": str(out),
            "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": str(ROOT)}


def timed(args: list[str], cache: Path, out: Path) -> dict:
    """`python -m rag.index ARGS` under /usr/bin/time: wall seconds, peak RSS of that process."""
    stats = Path(tempfile.mktemp(suffix=".time"))
    before = load_average()
    proc = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", str(stats), sys.executable, "-m", "rag.index",
                           *args, "index.progress=false"], cwd=ROOT, env=env(cache, out), capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise SystemExit(f"rag.index failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    wall, rss = stats.read_text().split()[-2:]
    stats.unlink()
    index = [ln.split("index: ", 1)[1] for ln in proc.stdout.splitlines() if ln.startswith("index: ")]
    return {"seconds": float(wall), "peak_rss_mb": round(int(rss) / 1024, 1), "load_before": before,
            "load_after": load_average(), "index": index[-1] if index else None,
            "command": "python -m rag.index " + " ".join(args)}


def folder_size_mb(folder: Path) -> float:
    seen, total = set(), 0
    for p in folder.rglob("*"):
        if p.is_file():
            st = p.stat()
            if st.st_ino not in seen:
                seen.add(st.st_ino)
                total += st.st_size
    return round(total / 2**20, 1)


def build_sharded(base: list[str], shards: int, cache: Path, out: Path, slurm_cpus: int) -> dict:
    args = [*base, f"index.num_shards={shards}"]
    if slurm_up():
        node = ["hydra/launcher=slurm", "hydra.launcher.gpus_per_node=0", "hydra.launcher.mem_gb=6",
                f"hydra.launcher.cpus_per_task={slurm_cpus}", "hydra.launcher.timeout_min=240"]
        result = timed(["-m", *node, *args, f"index.shard=range(0,{shards})"], cache, out)
        result["how"] = f"SLURM array, {shards} tasks of {slurm_cpus} CPU(s); merge in the submitting process"
    else:
        started, before = time.perf_counter(), load_average()
        tasks = [timed([*args, f"index.shard={i}"], cache, out) for i in range(shards)]
        merge = timed([*args, "index.step=merge"], cache, out)
        result = {"seconds": round(time.perf_counter() - started, 2), "load_before": before,
                  "load_after": load_average(), "index": merge["index"], "merge": merge,
                  "task_processes": tasks, "how": f"{shards} shard processes one after another, then the merge",
                  "command": merge["command"].replace("index.step=merge", f"index.shard=<0..{shards - 1}>")}
    done = sorted((cache / "index" / ".build").glob("*/done/*.json"))
    result["tasks"] = [json.loads(p.read_text()) for p in done]
    manifest = json.loads((Path(result["index"]) / "manifest.json").read_text())
    result["merge_seconds"], result["merge_peak_rss_mb"] = manifest["merge_seconds"], manifest["merge_peak_rss_mb"]
    return result


def questions(n: int) -> list[str]:
    import csv

    with open(DATA / "liverag_dm" / "dev_qa.tsv", encoding="utf-8") as handle:
        return [row["question"] for _, row in zip(range(n), csv.DictReader(handle, delimiter="\t"))]


def latency(retriever, queries: list[str], ks: tuple[int, ...]) -> dict:
    """Per question (searched one at a time): median and mean milliseconds at each k."""
    import statistics

    out = {}
    retriever.search(queries[:2], 10)  # warm caches and lazy imports
    for k in ks:
        times = []
        for q in queries:
            start = time.perf_counter()
            retriever.search([q], k)
            times.append((time.perf_counter() - start) * 1000)
        out[str(k)] = {"p50_ms": round(statistics.median(times), 2), "mean_ms": round(statistics.fmean(times), 2)}
    return out


def query_latency(kind: str, corpus: Path, single_cache: Path, sharded_index: str, n_queries: int) -> dict:
    from hydra.utils import instantiate

    from rag.data.corpus import JsonlCorpus
    from rag.retrieve.sharded import ShardedRetriever
    from tests.index.conftest import retriever_config

    node = retriever_config(f"retriever={kind}")
    queries = questions(n_queries)
    before = load_average()
    single = instantiate(node)
    dataset_corpus = JsonlCorpus(str(corpus), name=corpus.name.split(".")[0],
                                 hash_cache_dir=str(single_cache / "file_hashes"))
    single.prepare(dataset_corpus, single_cache)
    result = {"single": latency(single, queries, KS)}
    # the sharded index's hits read from its passage stores on disk (no corpus in memory: an index of another
    # corpus), and with the dataset's corpus in memory as the single index has it (rag.main on the same corpus)
    sharded = ShardedRetriever(base=single, index_dir=sharded_index)
    sharded.prepare(None, single_cache)
    result["sharded"] = latency(sharded, queries, KS)
    sharded.prepare(dataset_corpus, single_cache)
    result["sharded_corpus_in_memory"] = latency(sharded, queries, KS)
    result.update(load_before=before, load_after=load_average(), queries=len(queries), units=len(sharded.units))
    return result


def latency_only(kind: str, sizes: list[int], shards: int, work: Path, queries: int) -> list[dict]:
    """Query latency again on builds `bm25`/`dense` left in --work (after a change to the searcher)."""
    rows = []
    for n in sizes:
        corpus = work / "corpora" / f"corpus-{n}.jsonl.gz"
        [sharded] = [p for p in (work / f"{kind}-{n}-shards{shards}" / "index").glob(f"{kind}-*__*") if p.is_dir()]
        row = {"kind": kind, "passages": n, "latency": query_latency(kind, corpus, work / f"{kind}-{n}-single",
                                                                     str(sharded), queries)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def run_builds(kind: str, sizes: list[int], shards: int, work: Path, extra: list[str], queries: int,
               slurm_cpus: int) -> list[dict]:
    texts = real_passages()
    results = []
    for n in sizes:
        corpus = make_corpus(n, work / "corpora", texts)
        base = [f"corpus={corpus}", f"retriever={kind}", *extra]
        row = {"kind": kind, "passages": n, "real_passages": min(n, len(texts)), "resampled": max(0, n - len(texts))}
        cache1, cacheN = work / f"{kind}-{n}-single", work / f"{kind}-{n}-shards{shards}"
        for path in (cache1, cacheN):
            shutil.rmtree(path / "index", ignore_errors=True)
        row["single"] = timed(base, cache1, work / "out")
        row["single"]["disk_mb"] = folder_size_mb(Path(row["single"]["index"]))
        row["sharded"] = build_sharded(base, shards, cacheN, work / "out", slurm_cpus)
        row["sharded"]["disk_mb"] = folder_size_mb(Path(row["sharded"]["index"]))
        row["latency"] = query_latency(kind, corpus, cache1, row["sharded"]["index"], queries)
        print(json.dumps(row, indent=1), flush=True)
        results.append(row)
    return results


def recall(size: int, work: Path, queries: int) -> dict:
    """IVF / IVF-PQ against flat, on the flat build's own vectors (`dense --sizes SIZE` first): the factory strings
    and the seeded training sample of rag.index (`index.ann`), recall@k of the flat top-k at several nprobe."""
    import faiss
    import numpy as np
    from hydra.utils import instantiate

    from tests.index.conftest import retriever_config

    [index_dir] = [p for p in (work / f"dense-{size}-single" / "index").glob("dense-*__*") if p.is_dir()]
    flat = faiss.read_index(str(index_dir / "index.faiss"))
    vectors = flat.reconstruct_n(0, flat.ntotal)
    embedder = instantiate(retriever_config("retriever=dense")).embedder
    q = embedder.encode_queries(questions(queries))
    out = {"passages": int(flat.ntotal), "queries": len(q), "load_before": load_average(), "rows": []}
    exact = {k: flat.search(q, k)[1] for k in (10, 100)}
    rng = np.random.default_rng(0)
    for factory, nlist in (("IVF{n},Flat", 256), ("IVF{n},PQ48x8", 256), ("IVF{n},PQ24x8", 256)):
        sample = np.sort(rng.choice(flat.ntotal, size=min(flat.ntotal, 50_000), replace=False))
        index = faiss.index_factory(vectors.shape[1], factory.format(n=nlist), faiss.METRIC_INNER_PRODUCT)
        started = time.perf_counter()
        index.train(vectors[sample])
        index.add(vectors)
        built = time.perf_counter() - started
        for nprobe in (1, 4, 16, 64):
            faiss.extract_index_ivf(index).nprobe = nprobe
            row = {"index": factory.format(n=nlist), "nprobe": nprobe, "train_add_s": round(built, 1)}
            for k, truth in exact.items():
                got = index.search(q, k)[1]
                row[f"recall@{k}"] = round(float(np.mean([len(set(a) & set(b)) / k for a, b in zip(got, truth)])), 4)
            start = time.perf_counter()
            for i in range(len(q)):
                index.search(q[i:i + 1], 10)
            row["ms_per_query"] = round((time.perf_counter() - start) * 1000 / len(q), 3)
            out["rows"].append(row)
            print(row, flush=True)
    out["load_after"] = load_average()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["bm25", "dense", "recall", "latency-bm25", "latency-dense"])
    parser.add_argument("--sizes", default="30000,100000,300000,1000000")
    parser.add_argument("--size", type=int, default=28082)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "rag-index-bench"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "index"))
    args = parser.parse_args()
    work, out = Path(args.work), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    header = {"machine": machine(), "slurm": slurm_up(), "argv": sys.argv, "started": time.strftime("%F %T")}
    if args.what == "recall":
        result = {**header, **recall(args.size, work, args.queries)}
    elif args.what.startswith("latency-"):
        kind = args.what.split("-", 1)[1]
        sizes = [int(s) for s in args.sizes.split(",")]
        result = {**header, "rows": latency_only(kind, sizes, args.shards, work, args.queries)}
    else:
        sizes = [int(s) for s in args.sizes.split(",")]
        extra = ["index.dense_group_docs=256"] if args.what == "dense" else []
        slurm_cpus = 2 if args.what == "dense" else 1  # the encoder uses both cores; BM25 tasks one each
        result = {**header, "rows": run_builds(args.what, sizes, args.shards, work, extra, args.queries, slurm_cpus)}
    target = out / f"{args.what}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    target.write_text(json.dumps(result, indent=1))
    print(f"-> {target}")


if __name__ == "__main__":
    main()
