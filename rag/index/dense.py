"""Dense indexes in shards: passages encoded by the retriever's own embedder, stored flat or in IVF / IVF-PQ units.

`index.ann.type=flat` (the default, and the choice for small corpora) keeps every vector: search is exact, and a
sharded search returns the ranked list of one flat index. For large corpora `ivf` / `ivfpq` train one coarse
quantizer (and PQ codebooks) on a seeded uniform sample of the corpus's passages, once, under the plan's lock, before any shard
adds to it; each shard task adds its vectors to a copy of that trained index (GPU array tasks encode, CPUs
add), and the merge either stitches the units' inverted lists into one on-disk index (faiss's
`merge_ondisk`, memory-mapped, `index.ann.merge=ondisk`) or leaves them to be searched as units. Both probe
the same `nprobe` lists of the one quantizer, so they return the same passages; `benchmarks/index_bench.py`
measures what IVF loses against flat at the configured nprobe.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rag.core.errors import ConfigError, DataError
from rag.index.plan import TRAIN, BuildFolder, Part
from rag.index.sources import SourcePassage, passages_of
from rag.index.store import STORE_FILES, PartWriter, link_files
from rag.retrieve.dense import DenseRetriever
from rag.retrieve.shards import ANN_TYPES, IVF, IVF_DATA, PIDS, VECTORS, StringTable, index_name, load_array

log = logging.getLogger(__name__)

TRAINED = "trained.faiss"


def reservoir_sample(items: Iterator[Any], size: int, seed: int) -> tuple[list[Any], int]:
    """A uniform sample of `size` items without replacement from a stream of unknown length, in one pass, with
    Li's Algorithm L (ACM TOMS 1994: skips drawn from the geometric distribution, so about size * log(n / size)
    random draws instead of one per item); returns (the sample, how many items the stream had). Seeded: the same
    stream and seed give the same sample."""
    rng = np.random.default_rng(seed)
    reservoir: list[Any] = []
    seen = 0
    weight = next_index = 0.0
    for item in items:
        if seen < size:
            reservoir.append(item)
            if seen == size - 1:  # the reservoir is full: draw the first skip
                weight = float(np.exp(np.log(rng.random()) / size))
                next_index = seen + np.floor(np.log(rng.random()) / np.log1p(-weight)) + 1
        elif seen == next_index:
            reservoir[int(rng.integers(size))] = item
            weight *= float(np.exp(np.log(rng.random()) / size))
            next_index = seen + np.floor(np.log(rng.random()) / np.log1p(-weight)) + 1
        seen += 1
    return reservoir, seen


def factory_string(ann: dict[str, Any]) -> str:
    """faiss's index_factory string for `index.ann` (ivf | ivfpq)."""
    nlist = int(ann["nlist"])
    if ann["type"] == "ivf":
        return f"IVF{nlist},Flat"
    return f"IVF{nlist},PQ{int(ann['pq_m'])}x{int(ann.get('pq_nbits') or 8)}"


class DenseBuilder:
    kind = "dense"

    def __init__(self, retriever: DenseRetriever, ann: dict[str, Any], group_docs: int = 256):
        self.retriever = retriever
        self.ann = {"type": "flat", **dict(ann)}
        if self.ann["type"] not in ANN_TYPES:
            raise ConfigError(f"index.ann.type must be one of {ANN_TYPES}, got {self.ann['type']!r}")
        if retriever.index_type != "flat":
            raise ConfigError(f"retriever.index_type={retriever.index_type}: rag.index builds exact (flat) or IVF "
                              f"indexes (index.ann.type=ivf|ivfpq); HNSW is built in one process by rag.main")
        if retriever.embedder.needs_calibration:
            raise ConfigError("retriever.embedder.quantize=static calibrates on a sample of the whole corpus held "
                              "in memory; build that index with rag.main, or choose another runtime here")
        if self.ann["type"] != "flat" and self.ann.get("merge", "ondisk") not in ("ondisk", "units"):
            raise ConfigError(f"index.ann.merge must be ondisk or units, got {self.ann.get('merge')!r}")
        #: documents whose passages go to the encoder in one call; shards and parts start on these groups, so
        #: the vectors (which depend on what is batched and padded together) do not depend on the split
        self.group_docs = max(1, group_docs)
        self.batch_passages = 1024  # used only with group_docs=1

    @property
    def is_ivf(self) -> bool:
        return self.ann["type"] != "flat"

    @property
    def name(self) -> str:
        return index_name(self.retriever, self.ann)

    def settings(self) -> dict[str, Any]:
        keys = ("type", "nlist", "pq_m", "pq_nbits", "train_size", "seed") if self.is_ivf else ("type",)
        return {"key": self.retriever.embedder.vector_key, "ann": {k: self.ann.get(k) for k in keys}}

    # -- training (once, under the plan's lock) -----------------------------------------------------------------
    def factory(self) -> str:
        return factory_string(self.ann)

    def training_passages(self, folder: BuildFolder, plan: Any) -> list[str]:
        """`train_size` passages drawn uniformly from every passage of the corpus (one serial pass, seeded): a long
        document weighs by its passages, and the sample reaches the end of the corpus as much as its start."""
        files, kinds = folder.files(), folder.corpus.kinds

        def texts() -> Iterator[str]:
            for doc in folder.documents(0, plan.documents):
                found, _ = passages_of([doc], files, kinds, folder.corpus.chunk_words, folder.corpus.overlap_words,
                                       "skip")
                for item in found:
                    yield item.passage.text

        sample, seen = reservoir_sample(texts(), int(self.ann["train_size"]), int(self.ann.get("seed", 0)))
        log.info("IVF training sample: %d of the corpus's %d passages, uniformly drawn", len(sample), seen)
        return sample

    def prepare(self, folder: BuildFolder, plan: Any) -> None:
        """IVF: train the coarse quantizer (and PQ codebooks) once, on `train_size` passages drawn uniformly from the
        whole corpus (`training_passages`)."""
        if not self.is_ivf:
            return
        target = folder.dir / TRAIN / TRAINED
        if target.exists():
            return
        import faiss

        texts = self.training_passages(folder, plan)
        nlist = int(self.ann["nlist"])
        need = max(nlist, 2 ** int(self.ann.get("pq_nbits") or 8) if self.ann["type"] == "ivfpq" else 0)
        if len(texts) < need:
            raise ConfigError(f"{self.factory()} needs at least {need} training passages (nlist, and 2^pq_nbits "
                              f"for PQ codebooks); the seeded sample has {len(texts)}: raise index.ann.train_size "
                              f"(the corpus permitting) or lower index.ann.nlist / pq_nbits")
        log.info("training %s on %d sampled passages", self.factory(), len(texts))
        vectors = self.retriever.embedder.encode_passages(texts, progress=True)
        index = faiss.index_factory(vectors.shape[1], self.factory(), faiss.METRIC_INNER_PRODUCT)
        index.train(vectors)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        faiss.write_index(index, str(tmp))
        tmp.replace(target)

    # -- one part -------------------------------------------------------------------------------------------------
    def build_part(self, folder: BuildFolder, part: Part, tmp: Path,
                   batches: Iterator[list[SourcePassage]]) -> dict[str, Any]:
        writer = PartWriter(tmp)
        blocks: list[np.ndarray] = []
        for batch in batches:
            for item in batch:
                writer.add(item)
            blocks.append(self.retriever.embedder.encode_passages([item.passage.text for item in batch]))
        n = writer.close()
        dim = blocks[0].shape[1] if blocks else 0
        vectors = np.concatenate(blocks) if blocks else np.zeros((0, dim), dtype=np.float32)
        np.save(tmp / VECTORS, vectors)
        if self.is_ivf:
            import faiss

            index = faiss.read_index(str(folder.dir / TRAIN / TRAINED))
            if n:
                index.add_with_ids(vectors, np.arange(n, dtype=np.int64))
            faiss.write_index(index, str(tmp / IVF))
        return {"passages": n, "dim": int(dim)}

    @staticmethod
    def _shifted(source: Path, offset: int, target: Path) -> Path:
        """A copy of a unit's IVF index whose ids are offset by the passages of the units before it."""
        import faiss

        index = faiss.read_index(str(source))
        lists = faiss.extract_index_ivf(index).invlists
        for number in range(lists.nlist):
            size = lists.list_size(number)
            if size:
                ids = faiss.rev_swig_ptr(lists.get_ids(number), size).copy() + offset
                codes = faiss.rev_swig_ptr(lists.get_codes(number), size * lists.code_size).copy()
                lists.update_entries(number, 0, size, faiss.swig_ptr(ids), faiss.swig_ptr(codes))
        faiss.write_index(index, str(target))
        return target

    @classmethod
    def merge_ondisk(cls, trained: Path, units: list[tuple[Path, int]], out: Path) -> None:
        """The units' inverted lists (each unit's IVF file with its number of passages, in corpus order) stitched
        into one memory-mapped index `out/ivf.faiss` + `out/ivf.ivfdata` on the trained quantizer, ids made rows
        of the whole corpus. Public so that `benchmarks/index_bench.py ivf-merge` times it at scale."""
        import faiss
        from faiss.contrib.ondisk import merge_ondisk

        index = faiss.read_index(str(trained))
        shifted, offset = [], 0
        for i, (path, passages) in enumerate(units):  # unit ids are its rows: make them rows of the whole index
            if passages:
                shifted.append(cls._shifted(path, offset, out / f".shifted-{i}.faiss"))
            offset += passages
        merge_ondisk(index, [str(p) for p in shifted], str(out / IVF_DATA))
        faiss.write_index(index, str(out / IVF))
        for path in shifted:
            path.unlink()

    # -- merge ----------------------------------------------------------------------------------------------------
    def merge(self, folder: BuildFolder, parts: list[tuple[Part, Path, dict[str, Any]]], out: Path,
              single: bool) -> dict[str, Any]:
        import faiss

        dims = {int(m["dim"]) for _, _, m in parts if int(m["passages"])}
        if len(dims) != 1:
            raise DataError(f"{folder.dir}: parts disagree on the vector size ({sorted(dims)}); delete it and rebuild")
        dim = dims.pop()
        units = []
        for part, source, meta in parts:
            files = STORE_FILES + ((IVF,) if self.is_ivf else (VECTORS,))
            link_files(source, out / "units" / part.name, files)
            units.append({"dir": f"units/{part.name}", "passages": int(meta["passages"]), "shard": part.shard})
        if self.is_ivf and self.ann.get("merge", "ondisk") == "ondisk":
            self.merge_ondisk(folder.dir / TRAIN / TRAINED, [(out / u["dir"] / IVF, u["passages"]) for u in units], out)
        if single and not self.is_ivf:  # what `retriever=dense` (DenseRetriever) loads: one flat index
            index = faiss.IndexFlatIP(dim)
            pids: list[str] = []
            for _part, source, meta in parts:
                n = int(meta["passages"])
                if n:
                    index.add(np.ascontiguousarray(load_array(source / VECTORS, mmap_mode=None, length=n)))
                table = StringTable(source, PIDS, n)
                pids += [table[i] for i in range(n)]
            faiss.write_index(index, str(out / "index.faiss"))
            (out / "passage_ids.json").write_text(json.dumps(pids))
        ann = {k: self.ann.get(k) for k in ("type", "nlist", "pq_m", "pq_nbits", "nprobe", "merge")} if self.is_ivf \
            else {"type": "flat"}
        return {"units": units, "dense": {"vector_key": self.retriever.embedder.vector_key, "dim": dim,
                                          "model": self.retriever.embedder.name, "ann": ann}}
