"""The plan of a sharded build: which corpus (files and their content hashes), which documents each shard owns,
and the build folder where shard tasks leave their parts and done markers.

One plan per build folder, written once under a file lock by whichever task gets there first (the others wait
and read it), so N array tasks started together agree on the split without talking to each other. Every task
checks the corpus against the plan before it works: shards of one index share one corpus key, and a corpus file
that changed since the plan is refused, naming the file. Shard `i` of `N` owns the documents
`[i*D//N, (i+1)*D//N)` of the concatenated files (D documents), so shards in order are the corpus in order;
each shard is cut into parts of `part_docs` documents, the unit of resume: a part is written to a temporary
folder and renamed into place, so a killed task redoes only its unfinished part.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from rag.core.errors import ConfigError, DataError
from rag.core.hashing import slug, stable_hash
from rag.core.io import atomic_write_json, make_temp_dir
from rag.data.corpus import JsonlCorpus, file_sha256
from rag.index.sources import Document, Fields, count_documents, file_kind, iter_documents

log = logging.getLogger(__name__)

PLAN = "plan.json"
PARTS = "parts"
DONE = "done"
TRAIN = "train"
#: marker inside a part folder: the part is complete (the folder is renamed into place with it)
PART_META = "meta.json"


@dataclass(frozen=True)
class CorpusInput:
    """What to index: files, record fields, chunking, a readable name, and what to do with empty documents."""

    files: tuple[Path, ...]
    fields: Fields = Fields()
    #: None keeps every record whole (one passage per record, as `dataset.corpus.chunk_words: null`: TREC segments)
    chunk_words: int | None = 512
    overlap_words: int = 0
    name: str | None = None
    empty_text: str = "error"
    hash_cache_dir: str | None = None

    def __post_init__(self) -> None:
        if self.empty_text not in ("error", "skip"):
            raise ConfigError(f"index.empty_text must be error or skip, got {self.empty_text!r}")
        if self.chunk_words is not None and (self.chunk_words <= 0 or not 0 <= self.overlap_words < self.chunk_words):
            raise ConfigError(f"index.chunk_words={self.chunk_words} / index.overlap_words={self.overlap_words}: "
                              f"need chunk_words > 0 and 0 <= overlap_words < chunk_words")

    @property
    def display_name(self) -> str:
        """The corpus name in cache keys: one file's stem (as Corpus names it), else the files' folder."""
        if self.name:
            return self.name
        if len(self.files) == 1:
            return self.files[0].name.split(".")[0]
        return self.files[0].parent.name or "corpus"

    @property
    def kinds(self) -> list[str]:
        return [file_kind(f) for f in self.files]

    def identity(self) -> dict[str, Any]:
        """Everything but the content: names the build folder, so a changed file is caught, not rebuilt apart."""
        return {"files": [str(f) for f in self.files], "fields": [self.fields.id_field, self.fields.text_field,
                                                                  self.fields.title_field],
                "chunk": [self.chunk_words, self.overlap_words], "name": self.display_name,
                "empty_text": self.empty_text}

    def corpus_key(self, hashes: Sequence[str]) -> str:
        """rag.data.corpus's key: one JSONL file gets exactly `JsonlCorpus.key` (so rag.main finds the index);
        several files or parquet: the same shape over the list of (file name, sha256)."""
        if len(self.files) == 1 and file_kind(self.files[0]) == "jsonl":
            corpus = JsonlCorpus(str(self.files[0]), name=self.display_name, chunk_words=self.chunk_words,
                                 overlap_words=self.overlap_words, hash_cache_dir=self.hash_cache_dir)
            corpus.content_hash = hashes[0]  # the cached_property, already computed for the plan
            return corpus.key
        content = stable_hash([[f.name, h] for f, h in zip(self.files, hashes)], 16)
        chunking = f"{self.chunk_words}w{self.overlap_words}o" if self.chunk_words else "whole"
        return slug(f"{self.display_name}-{content}-{chunking}")


@dataclass(frozen=True)
class Part:
    shard: int
    index: int
    #: global document range [start, stop)
    start: int
    stop: int

    @property
    def name(self) -> str:
        return f"s{self.shard:05d}-p{self.index:05d}"


@dataclass
class Plan:
    corpus_key: str
    files: list[dict[str, Any]]
    num_shards: int
    part_docs: int
    documents: int
    build_id: str
    #: shard and part boundaries fall on multiples of this many documents (the dense encoder's groups)
    align: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    def shard_range(self, shard: int) -> tuple[int, int]:
        def boundary(i: int) -> int:
            return self.documents if i >= self.num_shards else (i * self.documents // self.num_shards) // \
                self.align * self.align
        return boundary(shard), boundary(shard + 1)

    def parts(self, shard: int) -> list[Part]:
        start, stop = self.shard_range(shard)
        return [Part(shard, i, s, min(s + self.part_docs, stop))
                for i, s in enumerate(range(start, stop, self.part_docs))]

    def to_json(self) -> dict[str, Any]:
        return {"corpus_key": self.corpus_key, "files": self.files, "num_shards": self.num_shards,
                "part_docs": self.part_docs, "documents": self.documents, "build_id": self.build_id,
                "align": self.align, "extra": self.extra}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        return cls(**{k: data[k] for k in ("corpus_key", "files", "num_shards", "part_docs", "documents",
                                           "build_id")}, align=int(data.get("align", 1)),
                   extra=data.get("extra", {}))


class BuildFolder:
    """`<cache>/index/.build/<target>__<build id>/`: plan, training sample, parts and done markers of one build."""

    def __init__(self, root: Path, corpus: CorpusInput, num_shards: int, part_docs: int, target: str,
                 settings: dict[str, Any], align: int = 1):
        if num_shards < 1:
            raise ConfigError(f"index.num_shards must be >= 1, got {num_shards}")
        if part_docs < 1:
            raise ConfigError(f"index.part_docs must be >= 1, got {part_docs}")
        self.align = max(1, int(align))
        # parts start on the encoder's group boundaries too: part_docs rounded up to a multiple of them
        part_docs = -(-part_docs // self.align) * self.align
        self.corpus, self.num_shards, self.part_docs = corpus, num_shards, part_docs
        self.build_id = stable_hash({"corpus": corpus.identity(), "num_shards": num_shards, "align": self.align,
                                     "part_docs": part_docs, "target": target, "settings": settings}, 12)
        self.dir = root / ".build" / f"{target}__{slug(corpus.display_name)}-{self.build_id}"
        self._plan: Plan | None = None

    # -- the plan ------------------------------------------------------------------------------------------------
    def plan(self, prepare: Any = None) -> Plan:
        """Read the plan (checking the corpus against it) or, first, write it; `prepare(plan)` runs once under
        the same lock after the plan exists (dense IVF training), for the tasks that come later to find."""
        if self._plan is not None:
            return self._plan
        self.dir.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.dir / "plan.lock")):
            path = self.dir / PLAN
            if path.exists():
                try:
                    plan = Plan.from_json(json.loads(path.read_text(encoding="utf-8")))
                except (OSError, json.JSONDecodeError, KeyError, TypeError) as err:
                    raise DataError(f"{path}: corrupt plan ({type(err).__name__}); delete {self.dir} to rebuild "
                                    f"every shard") from None
                self.check_corpus(plan)
            else:
                plan = self._new_plan()
                atomic_write_json(path, plan.to_json())
                log.info("planned %d documents of %s in %d shard(s) -> %s", plan.documents, plan.corpus_key,
                         plan.num_shards, self.dir)
            self._plan = plan
            if prepare is not None:
                prepare(plan)
        return plan

    def _new_plan(self) -> Plan:
        files = []
        for path in self.corpus.files:
            stat = path.stat()
            files.append({"path": str(path), "kind": file_kind(path), "size": stat.st_size,
                          "mtime_ns": stat.st_mtime_ns, "sha256": file_sha256(path, self.corpus.hash_cache_dir),
                          "documents": count_documents(path)})
        key = self.corpus.corpus_key([f["sha256"] for f in files])
        total = sum(f["documents"] for f in files)
        if total == 0:
            raise DataError(f"corpus: {', '.join(str(f) for f in self.corpus.files)} hold no records")
        return Plan(key, files, self.num_shards, self.part_docs, total, self.build_id, self.align)

    def check_corpus(self, plan: Plan) -> None:
        """Refuse a corpus whose files changed since the plan (their content hash; size and mtime spare it)."""
        for entry in plan.files:
            path = Path(entry["path"])
            if not path.is_file():
                raise DataError(f"corpus changed since this index was planned: {path} is gone (shards of one index "
                                f"share one corpus key, {plan.corpus_key}); restore it or delete {self.dir}")
            stat = path.stat()
            if (stat.st_size, stat.st_mtime_ns) == (entry["size"], entry["mtime_ns"]):
                continue
            now = file_sha256(path, self.corpus.hash_cache_dir)
            if now != entry["sha256"]:
                built = ", ".join(str(s) for s in self.finished_shards()) or "none yet"
                raise DataError(f"corpus changed since this index was planned: {path} sha256 {now[:12]} != "
                                f"{entry['sha256'][:12]} of the plan (shards of one index share one corpus key, "
                                f"{plan.corpus_key}; shards built: {built}); delete {self.dir} to rebuild every shard")

    # -- documents ----------------------------------------------------------------------------------------------
    def files(self) -> list[Path]:
        return [Path(f["path"]) for f in self.plan().files]

    def documents(self, start: int, stop: int) -> Iterator[Document]:
        """Global documents [start, stop) across the plan's files, streamed."""
        first = 0
        for index, entry in enumerate(self.plan().files):
            count = entry["documents"]
            lo, hi = max(start, first), min(stop, first + count)
            if lo < hi:
                yield from iter_documents(Path(entry["path"]), self.corpus.fields, lo - first, hi - first, index)
            first += count

    # -- parts and shards ---------------------------------------------------------------------------------------
    def part_dir(self, part: Part) -> Path:
        return self.dir / PARTS / part.name

    def part_done(self, part: Part) -> bool:
        return (self.part_dir(part) / PART_META).is_file()

    def write_part(self, part: Part, write: Any) -> Path:
        """Run `write(tmp_dir) -> meta`, then rename the folder into place with its meta (the done marker)."""
        target = self.part_dir(part)
        target.parent.mkdir(parents=True, exist_ok=True)
        for stale in target.parent.glob(f".{part.name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = make_temp_dir(target.parent, prefix=f".{part.name}.tmp-")
        try:
            meta = write(tmp)
            atomic_write_json(tmp / PART_META, {**meta, "part": part.name, "start": part.start, "stop": part.stop,
                                                "corpus_key": self.plan().corpus_key})
            if target.exists():
                shutil.rmtree(target)
            tmp.rename(target)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        return target

    def part_meta(self, part: Part) -> dict[str, Any]:
        path = self.part_dir(part) / PART_META
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise DataError(f"{path}: corrupt part marker ({type(err).__name__}); delete {path.parent} and rerun "
                            f"index.shard={part.shard}") from None

    def done_path(self, shard: int) -> Path:
        return self.dir / DONE / f"shard-{shard:05d}-of-{self.num_shards:05d}.json"

    def mark_done(self, shard: int, summary: dict[str, Any]) -> None:
        atomic_write_json(self.done_path(shard), {"shard": shard, "num_shards": self.num_shards,
                                                  "corpus_key": self.plan().corpus_key, **summary})

    def finished_shards(self) -> list[int]:
        return [s for s in range(self.num_shards) if self.done_path(s).is_file()]

    def missing_shards(self) -> list[int]:
        return [s for s in range(self.num_shards) if not self.done_path(s).is_file()]


def compact_ranges(numbers: Sequence[int]) -> str:
    """1,2,3,7 -> '1-3,7': a long list of missing shards still fits one line."""
    out, run = [], []
    for n in sorted(numbers):
        if run and n == run[-1] + 1:
            run.append(n)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [n]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)
