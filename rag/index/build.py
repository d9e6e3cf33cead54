"""Shard tasks and the merge: the driver every backend shares.

`build_shard` streams a shard's documents part by part into the backend (skipping parts already done: a
requeued task redoes only what it had not finished) and writes the shard's done marker. `merge` refuses to
start before every shard is done (one line naming the missing ones) or when shards disagree on the corpus key,
refuses a passage id held twice (naming both rows), then lets the backend write the index folder
`<cache>/index/<index name>__<corpus key>/` once (`build_once`: lock, temporary folder, rename), the folder
`rag.main` looks up with the same retriever config.
"""

from __future__ import annotations

import heapq
import json
import logging
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from rag.core.errors import ConfigError, DataError
from rag.core.io import atomic_write_json, build_once
from rag.core.progress import progress_bar
from rag.index.plan import BuildFolder, Part, compact_ranges
from rag.index.sources import SourcePassage, passages_of, where
from rag.retrieve.shards import (
    FORMAT,
    MANIFEST,
    PID_HASH,
    PID_RANK,
    PIDS,
    SOURCES,
    VERSION,
    StringTable,
    load_array,
)

log = logging.getLogger(__name__)

#: documents read and chunked at a time (the builders batch passages themselves)
DOC_BATCH = 64


class Backend(Protocol):
    kind: str
    batch_passages: int

    @property
    def name(self) -> str: ...

    def settings(self) -> dict[str, Any]: ...

    def prepare(self, folder: BuildFolder, plan: Any) -> None: ...

    def build_part(self, folder: BuildFolder, part: Part, tmp: Path,
                   batches: Iterator[list[SourcePassage]]) -> dict[str, Any]: ...


def passage_batches(folder: BuildFolder, part: Part, size: int, progress: Any, counters: dict[str, int],
                    group_docs: int = 1) -> Iterator[list[SourcePassage]]:
    """A part's passages in corpus order, `size` at a time, or (`group_docs` > 1) all passages of each group of
    `group_docs` documents, groups counted from the corpus's first document: the dense encoder sees the same
    batches whatever the shards, so its vectors do not depend on how the corpus was split. Documents without
    text are counted in `counters`."""
    files, kinds = folder.files(), folder.corpus.kinds
    corpus = folder.corpus
    pending: list[SourcePassage] = []
    docs = []
    per_read = group_docs if group_docs > 1 else DOC_BATCH

    def chunk() -> list[SourcePassage]:
        found, empty = passages_of(docs, files, kinds, corpus.chunk_words, corpus.overlap_words, corpus.empty_text)
        counters["documents"] += len(docs)
        counters["empty_documents"] += empty
        progress.update(len(docs))
        docs.clear()
        return found

    for doc in folder.documents(part.start, part.stop):
        docs.append(doc)
        if len(docs) >= per_read:
            pending += chunk()
            if group_docs > 1:
                if pending:
                    yield pending
                pending = []
                continue
            while len(pending) >= size:
                yield pending[:size]
                pending = pending[size:]
    if docs:
        pending += chunk()
    if group_docs > 1 and pending:
        yield pending
        return
    while pending:
        yield pending[:size]
        pending = pending[size:]


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (what a SLURM task's --mem must cover), in MiB."""
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def build_shard(folder: BuildFolder, backend: Backend, shard: int, progress: bool = True) -> dict[str, Any]:
    """Build (or finish) shard `shard`: every part not yet done, then its done marker."""
    plan = folder.plan(lambda plan: backend.prepare(folder, plan))
    if not 0 <= shard < plan.num_shards:
        raise ConfigError(f"index.shard={shard} is outside 0..{plan.num_shards - 1} (index.num_shards="
                          f"{plan.num_shards})")
    start, stop = plan.shard_range(shard)
    parts = plan.parts(shard)
    started = time.perf_counter()
    passages = done_before = 0
    with progress_bar(stop - start, f"{backend.kind} shard {shard + 1}/{plan.num_shards}", progress) as bar:
        for part in parts:
            if folder.part_done(part):
                bar.update(part.stop - part.start)
                passages += int(folder.part_meta(part)["passages"])
                done_before += 1
                continue
            counters = {"documents": 0, "empty_documents": 0}

            def write(tmp: Path, part: Part = part, counters: dict[str, int] = counters) -> dict[str, Any]:
                batches = passage_batches(folder, part, backend.batch_passages, bar, counters,
                                          getattr(backend, "group_docs", 1))
                return {**backend.build_part(folder, part, tmp, batches), **counters}

            folder.write_part(part, write)
            passages += int(folder.part_meta(part)["passages"])
            bar.set_postfix(passages=passages)
    if done_before:
        log.info("shard %d: %d of %d part(s) were already done (resumed)", shard, done_before, len(parts))
    summary = {"parts": [p.name for p in parts], "passages": passages, "documents": stop - start,
               "seconds": round(time.perf_counter() - started, 3), "peak_rss_mb": peak_rss_mb()}
    folder.mark_done(shard, summary)
    return summary


def finished_parts(folder: BuildFolder) -> list[tuple[Part, Path, dict[str, Any]]]:
    """Every part of every shard, in corpus order, after checking that all shards are done on one corpus."""
    plan = folder.plan()
    missing = folder.missing_shards()
    if missing:
        listed = ",".join(map(str, missing[:50])) + (",..." if len(missing) > 50 else "")
        raise ConfigError(f"merge: {len(missing)} of {plan.num_shards} shard(s) not finished: "
                          f"{compact_ranges(missing)} (no done marker in {folder.dir / 'done'}); run them first: "
                          f"-m index.shard={listed}")
    out = []
    for shard in range(plan.num_shards):
        marker = folder.done_path(shard)
        try:
            done = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise DataError(f"{marker}: corrupt done marker ({type(err).__name__}); delete it and rerun "
                            f"index.shard={shard}") from None
        if done.get("corpus_key") != plan.corpus_key:
            raise DataError(f"{marker}: shard {shard} was built from corpus {done.get('corpus_key')}, the plan is "
                            f"{plan.corpus_key}; shards of one index share one corpus key: delete {folder.dir}")
        for part in plan.parts(shard):
            if not folder.part_done(part):
                raise DataError(f"{folder.part_dir(part)}: shard {shard} is marked done but its part is missing; "
                                f"delete {marker} and rerun index.shard={shard}")
            meta = folder.part_meta(part)
            if meta.get("corpus_key") != plan.corpus_key:
                raise DataError(f"{folder.part_dir(part)}: built from corpus {meta.get('corpus_key')}, the plan is "
                                f"{plan.corpus_key}; delete {folder.dir} to rebuild")
            out.append((part, folder.part_dir(part), meta))
    return out


def check_duplicates(folder: BuildFolder, parts: list[tuple[Part, Path, dict[str, Any]]]) -> None:
    """A passage id held twice (within a shard or across shards) ends in one line naming both rows; found through
    64-bit id hashes (8 bytes per passage in memory), confirmed on the ids themselves."""
    hashes = [load_array(d / PID_HASH, mmap_mode=None, length=int(m["passages"])) for _, d, m in parts]
    if not hashes:
        return
    owner = np.repeat(np.arange(len(parts)), [len(h) for h in hashes])
    rows = np.concatenate([np.arange(len(h)) for h in hashes])
    values = np.concatenate(hashes)
    order = np.argsort(values, kind="stable")
    same = np.flatnonzero(values[order][1:] == values[order][:-1])
    files = folder.files()
    kinds = folder.corpus.kinds
    for i in same:
        a, b = order[i], order[i + 1]
        (pa, da, ma), (pb, db, mb) = parts[owner[a]], parts[owner[b]]
        ida = StringTable(da, PIDS, int(ma["passages"]))[int(rows[a])]
        idb = StringTable(db, PIDS, int(mb["passages"]))[int(rows[b])]
        if ida != idb:
            continue  # two ids with one 64-bit hash
        sa = load_array(da / SOURCES)[int(rows[a])]
        sb = load_array(db / SOURCES)[int(rows[b])]
        raise DataError(f"duplicate passage id {ida!r}: {where(files[sa[0]], kinds[sa[0]], int(sa[1]))} (shard "
                        f"{pa.shard}) and {where(files[sb[0]], kinds[sb[0]], int(sb[1]))} (shard {pb.shard}); "
                        f"document ids must be unique across the corpus files")


def write_global_ranks(parts: list[tuple[Part, Path, dict[str, Any]]], out: Path) -> None:
    """Each unit's `pid_rank.npy`: the rank of every passage id among all the index's ids, so that a search breaks
    ties by passage id with integers alone. A k-way merge of the parts' id lists, each already sorted by its part's
    own ranks: memory holds one cursor per part, and the ranks, written to memory-mapped files."""
    def stream(u: int) -> Iterator[tuple[bytes, int, int]]:
        _, source, meta = parts[u]
        n = int(meta["passages"])
        table = StringTable(source, PIDS, n)
        for row in np.argsort(load_array(source / PID_RANK, length=n), kind="stable"):
            yield table.raw(int(row)), u, int(row)

    ranks = [np.lib.format.open_memmap(out / "units" / part.name / PID_RANK, mode="w+", dtype=np.int64,
                                       shape=(int(meta["passages"]),)) for part, _, meta in parts]
    for rank, (_, u, row) in enumerate(heapq.merge(*(stream(u) for u in range(len(parts))))):
        ranks[u][row] = rank
    for array in ranks:
        array.flush()


def merge(folder: BuildFolder, backend: Any, index_root: Path, single: bool | str = "auto",
          single_max_passages: int = 2_000_000) -> Path:
    """Check the shards, then write the index folder (once) and return it."""
    parts = finished_parts(folder)
    check_duplicates(folder, parts)
    plan = folder.plan()
    total = sum(int(m["passages"]) for _, _, m in parts)
    write_single = single is True or single == "true" or (single == "auto" and total <= single_max_passages)
    target = index_root / f"{backend.name}__{plan.corpus_key}"

    def write(tmp: Path) -> None:
        started = time.perf_counter()
        described = backend.merge(folder, parts, tmp, write_single)
        if described.get("units"):
            write_global_ranks(parts, tmp)
        manifest = {"format": FORMAT, "version": VERSION, "kind": backend.kind, "name": backend.name,
                    "corpus_key": plan.corpus_key, "num_shards": plan.num_shards, "passages": total,
                    "documents": plan.documents,
                    "empty_documents": sum(int(m.get("empty_documents", 0)) for _, _, m in parts),
                    "files": [{k: f[k] for k in ("path", "sha256", "documents")} for f in plan.files],
                    "single": write_single, "merge_seconds": round(time.perf_counter() - started, 3),
                    "merge_peak_rss_mb": peak_rss_mb(), **described}
        atomic_write_json(tmp / MANIFEST, manifest)

    if (target / "COMPLETE").exists():
        log.info("index already complete at %s (delete it to rebuild)", target)
    return build_once(target, write)


def remove_build(folder: BuildFolder) -> None:
    """Delete the build folder once its index is registered (`index.keep_build=false`)."""
    shutil.rmtree(folder.dir, ignore_errors=True)
