"""Index builds at scale (issue 27): build time and peak memory against corpus size, one process vs N shards, query
latency against corpus size and k (single index vs shards), and IVF recall against flat.

    python benchmarks/index_bench.py bm25 --sizes 30000,100000,300000,1000000 --shards 4
    python benchmarks/index_bench.py dense --sizes 10000,28082 --shards 4
    python benchmarks/index_bench.py recall --size 28082      # after `dense`: IVF / IVF-PQ recall against flat
    python benchmarks/index_bench.py latency-bm25 --sizes ...  # query latency again on the builds left in --work
    python benchmarks/index_bench.py vocab                     # the BM25 merge's vocabulary step at FineWeb-10BT's size
    python benchmarks/index_bench.py ivf-merge --sizes 1000000   # IVF-PQ units added and merged on disk, at scale
    python benchmarks/index_bench.py serial                    # the serial work before any shard: plan and IVF sample

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

`vocab` measures what those corpora cannot: the BM25 merge's vocabulary step (a k-way merge of every part's sorted
terms) at FineWeb-10BT's size. It fits Heaps' law (V = K n^beta) to the sample's own vocabulary growth, projects
each part's and the whole corpus's vocabulary for --passages, writes synthetic parts of exactly those sizes (terms
as 8-byte strings, a shared core plus fresh terms per part, document frequencies drawn at random) and times
rag.index's own step (`Bm25Builder.global_vocabulary`) on them in a child process under /usr/bin/time.

`ivf-merge` measures the dense side that does not depend on the encoder, at sizes the CPU encoder cannot reach
here: seeded synthetic unit vectors (clustered, e5-base-v2's 768 dimensions by default) stand in for encoded
passages; the quantizer is trained on `index.ann.train_size` of them with rag.index's factory string, each part
of `index.part_docs` vectors is added to a copy (what a shard task does after encoding), then rag.index's own
on-disk merge (`DenseBuilder.merge_ondisk`) runs in a child process under /usr/bin/time, and the merged index is
searched memory-mapped at `nprobe` as the sharded searcher opens it.

`serial` times the work one process does before any shard task may start, on the shared FineWeb sample as JSONL
(gzip) and as parquet (FineWeb-10BT's shape): the plan (every file's SHA-256 and document count, rag.index's own
`BuildFolder.plan`) and an IVF build's uniform training sample (`DenseBuilder.training_passages`: one pass that
chunks every document), per document and per MB, for the FineWeb-10BT projection in docs/benchmarks.md.
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

import numpy as np

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


def under_time(argv: list[str], name: str, cache: Path, out: Path) -> tuple[str, float, float]:
    """`python ARGV` under /usr/bin/time: its stdout, wall seconds and peak RSS in MB; a failure ends the run."""
    stats = Path(tempfile.mktemp(suffix=".time"))
    proc = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", str(stats), sys.executable, *argv], cwd=ROOT,
                          env=env(cache, out), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    wall, rss = stats.read_text().split()[-2:]
    stats.unlink()
    return proc.stdout, float(wall), round(int(rss) / 1024, 1)


def timed(args: list[str], cache: Path, out: Path) -> dict:
    """`python -m rag.index ARGS` under /usr/bin/time: wall seconds, peak RSS of that process."""
    before = load_average()
    stdout, wall, rss = under_time(["-m", "rag.index", *args, "index.progress=false"], "rag.index", cache, out)
    index = [ln.split("index: ", 1)[1] for ln in stdout.splitlines() if ln.startswith("index: ")]
    return {"seconds": wall, "peak_rss_mb": rss, "load_before": before, "load_after": load_average(),
            "index": index[-1] if index else None, "command": "python -m rag.index " + " ".join(args)}


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


def heaps_fit() -> dict:
    """Heaps' law fitted to the sample's vocabulary growth (the bm25 retriever's own terms, every 1,000 passages,
    fitted from 1M tokens on, where the curve is a straight line in log-log)."""
    from hydra.utils import instantiate

    from tests.index.conftest import retriever_config

    texts = real_passages()
    tokenizer = instantiate(retriever_config("retriever=bm25"))
    seen: set[str] = set()
    tokens, curve = 0, []
    for start in range(0, len(texts), 1000):
        batch = tokenizer.tokenize(texts[start:start + 1000])
        words = {i: w for w, i in batch.vocab.items()}
        for ids in batch.ids:
            tokens += len(ids)
            seen.update(words[i] for i in ids)
        curve.append((start + len(batch.ids), tokens, len(seen)))
    points = np.array([c for c in curve if c[1] >= 1_000_000], dtype=np.float64)
    beta, log_k = np.polyfit(np.log(points[:, 1]), np.log(points[:, 2]), 1)
    return {"K": float(np.exp(log_k)), "beta": float(beta), "passages": len(texts), "tokens": tokens,
            "terms": len(seen), "tokens_per_passage": tokens / len(texts), "curve": curve}


def encode_terms(ids: np.ndarray) -> tuple[bytes, np.ndarray]:
    """Term ids as 8-byte lowercase hex strings (byte order = id order) and their string-table offsets."""
    digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    shifts = np.arange(28, -1, -4, dtype=np.int64)
    blob = digits[(np.asarray(ids, dtype=np.int64)[:, None] >> shifts) & 0xF].tobytes()
    return blob, np.arange(len(ids) + 1, dtype=np.int64) * 8


def synthetic_parts(folder: Path, parts: int, part_terms: int, vocab: int, seed: int = 0) -> list[tuple[str, int]]:
    """Part folders as the BM25 build leaves them, as far as the vocabulary step reads them (sorted terms, the
    term-frequency matrix's column pointers): each part holds a core shared by all and fresh terms of its own,
    sized so the union is `vocab`; term ids pass through a seeded permutation so fresh terms interleave."""
    from rag.index.bm25 import PART_TERMS, TF

    core = max(0, (parts * part_terms - vocab) // max(1, parts - 1))
    fresh = part_terms - core
    rng = np.random.default_rng(seed)
    names = rng.permutation(core + parts * fresh)
    written = []
    for u in range(parts):
        target = folder / f"part-{u:05d}"
        target.mkdir(parents=True, exist_ok=True)
        ids = np.sort(names[np.concatenate([np.arange(core), core + u * fresh + np.arange(fresh)])])
        blob, offsets = encode_terms(ids)
        (target / f"{PART_TERMS}.bin").write_bytes(blob)
        np.save(target / f"{PART_TERMS}.offsets.npy", offsets)
        indptr = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(rng.geometric(0.3, size=len(ids)), out=indptr[1:])
        np.save(target / TF[2], indptr)
        written.append((str(target), len(ids)))
    return written


def child_step(what: str, work: Path) -> None:
    """A measured step in a process of its own: rag.index's own code (`vocab-merge`: the BM25 vocabulary step,
    `ivf-merge-child`: the on-disk IVF merge) on the synthetic inputs listed in work/spec.json; prints its seconds."""
    spec = json.loads((work / "spec.json").read_text())
    out = work / "merged"
    out.mkdir(exist_ok=True)
    started = time.perf_counter()
    result = {}
    if what == "vocab-merge":
        from rag.index.bm25 import Bm25Builder

        result["vocab"] = Bm25Builder.global_vocabulary([(Path(f), n) for f, n in spec["parts"]], out)[0]
    else:
        from rag.index.dense import DenseBuilder

        DenseBuilder.merge_ondisk(Path(spec["trained"]), [(Path(p), n) for p, n in spec["units"]], out)
    print(json.dumps({**result, "merge_s": round(time.perf_counter() - started, 1)}))


def run_child(what: str, folder: Path, spec: dict) -> dict:
    """`child_step` under /usr/bin/time: what it printed, plus that process's wall seconds and peak RSS."""
    (folder / "spec.json").write_text(json.dumps(spec))
    stdout, wall, rss = under_time([__file__, what, "--work", str(folder)], what, folder, folder)
    return {**json.loads(stdout.strip().splitlines()[-1]), "process_s": wall, "peak_rss_mb": rss}


def vocab(work: Path, passages: int, part_docs: int, scale: float, parts: int | None) -> dict:
    """Heaps' fit, the projected sizes, and the timed vocabulary step on synthetic parts of those sizes."""
    fit = heaps_fit()
    tokens_per_part = fit["tokens_per_passage"] * part_docs
    n_parts = parts or -(-passages // part_docs)
    part_terms = int(scale * fit["K"] * tokens_per_part ** fit["beta"])
    total = int(scale * fit["K"] * (fit["tokens_per_passage"] * passages) ** fit["beta"])
    folder = work / f"vocab-{passages}-{part_docs}-{scale:g}"
    shutil.rmtree(folder, ignore_errors=True)
    started = time.perf_counter()
    written = synthetic_parts(folder, n_parts, part_terms, total)
    made = time.perf_counter() - started
    before = load_average()
    measured = run_child("vocab-merge", folder, {"parts": written})
    row = {"passages": passages, "part_docs": part_docs, "parts": n_parts, "scale": scale, "part_terms": part_terms,
           "entries": n_parts * part_terms, **measured, "synthesis_s": round(made, 1), "load_before": before,
           "load_after": load_average()}
    shutil.rmtree(folder, ignore_errors=True)
    fit.pop("curve")
    return {"heaps": fit, "row": row}


def clustered_vectors(n: int, dim: int, seed: int, centres: np.ndarray) -> np.ndarray:
    """n unit vectors around seeded cluster centres (so IVF lists are uneven, as with real embeddings)."""
    rng = np.random.default_rng(seed)
    vectors = centres[rng.integers(len(centres), size=n)] + 0.5 * rng.standard_normal((n, dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def same_as_units(q: np.ndarray, units: list[tuple[str, int]], nprobe: int, merged_scores: np.ndarray,
                  merged_ids: np.ndarray) -> bool:
    """The merged index's top 10 equals searching every unit at the same nprobe, ids offset by the units before,
    and keeping the best 10 (what `index.ann.merge=units` returns): same scores, same rows above the cut."""
    import faiss

    scores, ids, offset = [], [], 0
    for path, n in units:
        unit = faiss.read_index(path, faiss.IO_FLAG_MMAP)
        faiss.extract_index_ivf(unit).nprobe = nprobe
        found_scores, found_ids = unit.search(q, 10)
        scores.append(found_scores)
        ids.append(np.where(found_ids >= 0, found_ids + offset, -1))
        offset += n
    scores, ids = np.concatenate(scores, axis=1), np.concatenate(ids, axis=1)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :10]
    best, best_ids = np.take_along_axis(scores, order, 1), np.take_along_axis(ids, order, 1)
    if not np.allclose(best, merged_scores, rtol=0, atol=1e-6):
        return False
    for i in range(len(q)):  # the passages above the 10th score (no tie at the cut) are the same rows
        cut = best[i, -1] + 1e-6
        if set(best_ids[i][best[i] > cut]) != set(merged_ids[i][merged_scores[i] > cut]):
            return False
    return True


def ivf_merge(work: Path, size: int, dim: int, ann: dict, part_docs: int, queries: int) -> dict:
    """Train once, add part by part, merge on disk (timed in a child), search the merged index memory-mapped."""
    import faiss

    from rag.index.dense import factory_string
    from rag.retrieve.shards import IVF, IVF_DATA

    if ann["type"] == "ivfpq" and dim % int(ann["pq_m"]):
        raise SystemExit(f"--dim {dim} is not a multiple of index.ann.pq_m={ann['pq_m']} (PQ splits each vector "
                         f"into pq_m equal pieces); choose another --dim")
    folder = work / f"ivf-{size}-{dim}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    centres = np.random.default_rng(0).standard_normal((4096, dim), dtype=np.float32)
    row = {"vectors": size, "dim": dim, "factory": factory_string(ann), "train_size": ann["train_size"],
           "part_docs": part_docs, "load_before": load_average()}
    started = time.perf_counter()
    index = faiss.index_factory(dim, factory_string(ann), faiss.METRIC_INNER_PRODUCT)
    index.train(clustered_vectors(int(ann["train_size"]), dim, 1, centres))
    row["train_s"] = round(time.perf_counter() - started, 1)
    trained = folder / "trained.faiss"
    faiss.write_index(index, str(trained))
    units, add_s, made_s = [], 0.0, 0.0
    for u, start in enumerate(range(0, size, part_docs)):
        n = min(part_docs, size - start)
        began = time.perf_counter()
        vectors = clustered_vectors(n, dim, 100 + u, centres)
        made_s += time.perf_counter() - began
        began = time.perf_counter()
        unit = faiss.read_index(str(trained))  # as DenseBuilder.build_part: a copy of the trained index per part
        unit.add_with_ids(vectors, np.arange(n, dtype=np.int64))
        faiss.write_index(unit, str(folder / f"unit-{u:05d}.faiss"))
        add_s += time.perf_counter() - began
        units.append((str(folder / f"unit-{u:05d}.faiss"), n))
    row.update(units=len(units), add_s=round(add_s, 1), add_per_unit_s=round(add_s / len(units), 2),
               synthesis_s=round(made_s, 1))
    measured = run_child("ivf-merge-child", folder, {"trained": str(trained), "units": units})
    row.update(merge_s=measured["merge_s"], merge_process_s=measured["process_s"],
               merge_peak_rss_mb=measured["peak_rss_mb"],
               ondisk_mb=round(((folder / "merged" / IVF_DATA).stat().st_size + (folder / "merged" / IVF).stat().st_size)
                               / 2**20, 1))
    merged = faiss.read_index(str(folder / "merged" / IVF), faiss.IO_FLAG_ONDISK_SAME_DIR)
    faiss.extract_index_ivf(merged).nprobe = int(ann["nprobe"])
    q = clustered_vectors(queries, dim, 7, centres)
    scores, ids = merged.search(q, 10)
    row["ids_in_range"] = bool(((ids >= 0) & (ids < size)).all())
    row["same_as_units"] = same_as_units(q, units, int(ann["nprobe"]), scores, ids)
    began = time.perf_counter()
    for i in range(len(q)):
        merged.search(q[i:i + 1], 10)
    row["ms_per_query_nprobe"] = {int(ann["nprobe"]): round((time.perf_counter() - began) * 1000 / len(q), 2)}
    row["load_after"] = load_average()
    print(row, flush=True)
    shutil.rmtree(folder, ignore_errors=True)
    return row


def serial(work: Path, train_size: int) -> dict:
    """The plan and the IVF training sample of rag.index, timed on the FineWeb sample as jsonl.gz and as parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from hydra import compose, initialize_config_dir

    from rag.index.main import build_folder, make_backend

    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    with gzip.open(FINEWEB, "rt", encoding="utf-8") as handle:
        docs = [json.loads(line) for line in handle]
    parquet = work / "fineweb" / "000_00000.parquet"
    parquet.parent.mkdir(parents=True)
    pq.write_table(pa.table({"id": [d["doc_id"] for d in docs], "text": [d["text"] for d in docs]}), parquet,
                   row_group_size=1000)
    rows = []
    for corpus in (FINEWEB, parquet):
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            cfg = compose(config_name="index", overrides=[
                f"corpus={corpus}", f"paths.cache_dir={work / 'cache' / corpus.suffix.strip('.')}",
                "retriever=dense", "index.ann.type=ivf", f"index.ann.train_size={train_size}", "index.progress=false"])
        backend = make_backend(cfg)
        folder = build_folder(cfg, backend)
        load = load_average()
        start = time.perf_counter()
        plan = folder.plan()
        planned = time.perf_counter()
        sample = backend.training_passages(folder, plan)
        sampled = time.perf_counter()
        mb = corpus.stat().st_size / 1e6
        rows.append({"corpus": corpus.name, "documents": plan.documents, "file_mb": round(mb, 1),
                     "sample": len(sample), "plan_s": round(planned - start, 2), "sample_s": round(sampled - planned, 2),
                     "plan_s_per_mb": round((planned - start) / mb, 4),
                     "sample_us_per_doc": round((sampled - planned) / plan.documents * 1e6, 1),
                     "load_before": load, "load_after": load_average()})
        print(rows[-1], flush=True)
    return {"rows": rows}


def index_config() -> dict:
    """rag.index's defaults (conf/index.yaml's `index` node)."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(ROOT / "conf" / "index.yaml").index)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["bm25", "dense", "recall", "latency-bm25", "latency-dense", "vocab",
                                         "vocab-merge", "ivf-merge", "ivf-merge-child", "serial"])
    parser.add_argument("--train-size", type=int, default=400_000, help="serial: index.ann.train_size")
    parser.add_argument("--sizes", default="30000,100000,300000,1000000")
    parser.add_argument("--size", type=int, default=28082)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "rag-index-bench"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "index"))
    parser.add_argument("--passages", type=int, default=25_000_000, help="vocab: the corpus size projected")
    parser.add_argument("--part-docs", type=int, default=None,
                        help="vocab, ivf-merge: passages per part (default: rag.index's index.part_docs)")
    parser.add_argument("--scale", type=float, default=1.0, help="vocab: times Heaps' projected vocabularies")
    parser.add_argument("--parts", type=int, default=None, help="vocab: fewer parts than the corpus needs")
    parser.add_argument("--dim", type=int, default=768, help="ivf-merge: vector size (e5-base-v2: 768)")
    parser.add_argument("--ann", default="ivfpq", choices=["ivf", "ivfpq"], help="ivf-merge: index.ann.type")
    args = parser.parse_args()
    work, out = Path(args.work), Path(args.out)
    if args.what in ("vocab-merge", "ivf-merge-child"):
        return child_step(args.what, work)
    part_docs = args.part_docs or int(index_config()["part_docs"])
    out.mkdir(parents=True, exist_ok=True)
    header = {"machine": machine(), "slurm": slurm_up(), "argv": sys.argv, "started": time.strftime("%F %T")}
    if args.what == "recall":
        result = {**header, **recall(args.size, work, args.queries)}
    elif args.what == "serial":
        result = {**header, **serial(work, args.train_size)}
    elif args.what == "ivf-merge":
        ann = {**index_config()["ann"], "type": args.ann}
        rows = [ivf_merge(work, int(n), args.dim, ann, part_docs, args.queries) for n in args.sizes.split(",")]
        result = {**header, "rows": rows}
    elif args.what == "vocab":
        result = {**header, **vocab(work, args.passages, part_docs, args.scale, args.parts)}
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
