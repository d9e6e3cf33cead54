"""Corpora: documents read from the dataset's files and chunked into passages, each mapped to its document.

LiveRAG's indexes split every FineWeb document into passages of at most 512 words without overlap; that is
the default here and both are configurable. `chunk_words: null` keeps every record whole, one passage whose id is
the record's own (a collection already cut into passages, such as MS MARCO v2.1's segments, whose qrels judge
those ids). A corpus has a `key` naming its content and chunking, which names
the index, retrieval and rerank caches built on it: the content is a streaming sha256 of the file, itself
cached in a small sidecar keyed by the file's resolved path, size and modification time, so an edit that
keeps the file's size still gets new caches, and a large corpus is hashed once, not once per run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path

from rag.core.errors import DataError
from rag.core.hashing import slug, stable_hash
from rag.core.io import atomic_write_json, iter_jsonl_numbered, open_text
from rag.data.ids import paragraph_doc_id
from rag.data.paths import resolve_data_file
from rag.records import Passage

log = logging.getLogger(__name__)


def _default_hash_cache() -> Path:
    root = os.environ.get("RAG_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "rag")
    return Path(root).expanduser() / "file_hashes"


def file_sha256(path: str | Path, cache_dir: str | Path | None = None) -> str:
    """sha256 of a file's bytes, read in 1 MiB blocks; remembered per (resolved path, size, mtime_ns) in a
    sidecar JSON under `cache_dir` (default `$RAG_CACHE_DIR/file_hashes`), so an unchanged file is hashed once.
    A sidecar that cannot be written (read-only cache) only costs a rehash next time."""
    path = Path(path).resolve()
    stat = path.stat()
    ident = {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    sidecar = Path(cache_dir).expanduser() if cache_dir else _default_hash_cache()
    sidecar = sidecar / f"{slug(path.name)}-{stable_hash(ident, length=16)}.json"
    try:
        known = json.loads(sidecar.read_text(encoding="utf-8"))
        if {k: known.get(k) for k in ident} == ident and isinstance(known.get("sha256"), str):
            return known["sha256"]
    except (OSError, json.JSONDecodeError):
        pass
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    ident["sha256"] = digest.hexdigest()
    try:
        atomic_write_json(sidecar, ident)
    except OSError as err:
        log.debug("cannot remember the hash of %s in %s: %s", path, sidecar, err)
    return ident["sha256"]


def chunk_words(text: str, max_words: int, overlap: int = 0) -> list[str]:
    """Split text on whitespace into windows of at most `max_words` words, `overlap` words shared."""
    if max_words <= 0:
        raise ValueError("corpus.chunk_words must be positive")
    if not 0 <= overlap < max_words:
        raise ValueError("corpus.overlap_words must be in [0, chunk_words)")
    words = text.split()
    if not words:
        return []
    step = max_words - overlap
    return [" ".join(words[i:i + max_words]) for i in range(0, max(1, len(words) - overlap), step)]


class Corpus(ABC):
    #: whether its file is one `python -m rag.index` reads ({doc_id, text} .jsonl, .jsonl.gz, .parquet), so that a
    #: sharded index of it can exist (rag/preflight/prebuilt.py)
    indexable_files: bool = False
    def __init__(self, path: str, data_dir: str | None = None, chunk_words: int | None = 512, overlap_words: int = 0,
                 name: str | None = None, hash_cache_dir: str | None = None):
        self.path = path
        self.data_dir = data_dir
        self.chunk_words = chunk_words
        self.overlap_words = overlap_words
        self.name = name or Path(path).name.split(".")[0]
        #: where the file's content hash is remembered (default: $RAG_CACHE_DIR/file_hashes)
        self.hash_cache_dir = hash_cache_dir
        #: documents skipped because their text was empty or null (counted when passages are built)
        self.empty_documents = 0

    def file(self) -> Path:
        return resolve_data_file(self.path, self.data_dir, f"{type(self).__name__} corpus")

    @cached_property
    def content_hash(self) -> str:
        return file_sha256(self.file(), self.hash_cache_dir)

    @property
    def key(self) -> str:
        """Readable cache name: corpus name, the sha256 of its file (first 16 hex digits), chunking."""
        chunking = f"{self.chunk_words}w{self.overlap_words}o" if self.chunk_words else "whole"
        return slug(f"{self.name}-{self.content_hash[:16]}-{chunking}")

    @property
    def extends(self) -> Corpus | None:
        """The corpus whose passages this one's begin with, in the same order (an attacked corpus: its clean one),
        so that an index of this one is that one's index plus the passages after them; None for a corpus of its
        own."""
        return None

    @abstractmethod
    def documents(self) -> Iterator[tuple[str, str, str]]:
        """Yield (doc_id, title, text) for every document."""

    @cached_property
    def passages(self) -> list[Passage]:
        out: list[Passage] = []
        empty: list[str] = []
        for doc_id, title, text in self.documents():
            if not self.chunk_words:  # kept whole: the passage is the record, under its own id
                if (text or "").strip():
                    out.append(Passage(passage_id=doc_id, doc_id=doc_id, text=text.strip(), title=title))
                else:
                    empty.append(doc_id)
                continue
            chunks = chunk_words(text or "", self.chunk_words, self.overlap_words)
            if not chunks:
                empty.append(doc_id)
            for i, chunk in enumerate(chunks):
                out.append(Passage(passage_id=f"{doc_id}#p{i}", doc_id=doc_id, text=chunk, title=title))
        self.empty_documents = len(empty)
        if empty:
            log.warning("%s: %d document(s) with empty or null text skipped (e.g. %s)", self.file(), len(empty),
                        ", ".join(repr(d) for d in empty[:3]))
        if not out:
            raise DataError(f"{self.file()}: corpus has no passages")
        return out

    @cached_property
    def doc_ids(self) -> set[str]:
        return {p.doc_id for p in self.passages}


class JsonlCorpus(Corpus):
    """`{doc_id, text}` JSONL (gzip allowed), e.g. LiveRAG's FineWeb sample; other field names by setting (a BEIR
    corpus: `_id`, `text`, `title`; MS MARCO v2.1 segments: `docid`, `segment`, `title`)."""

    indexable_files = True

    def __init__(self, path: str, data_dir: str | None = None, chunk_words: int | None = 512, overlap_words: int = 0,
                 name: str | None = None, id_field: str = "doc_id", text_field: str = "text",
                 title_field: str | None = None, hash_cache_dir: str | None = None, title_in_text: bool = False):
        super().__init__(path, data_dir, chunk_words, overlap_words, name, hash_cache_dir)
        self.id_field, self.text_field, self.title_field = id_field, text_field, title_field
        #: index `title text` (BEIR's and ir_datasets' convention) instead of the text alone
        self.title_in_text = title_in_text

    @property
    def key(self) -> str:
        return super().key + ("-title" if self.title_in_text else "")

    def documents(self) -> Iterator[tuple[str, str, str]]:
        file = self.file()
        seen: set[str] = set()
        for line_no, row in iter_jsonl_numbered(file):
            try:
                doc_id, text = str(row[self.id_field]), row[self.text_field]
            except KeyError:
                raise DataError(f"{file}:{line_no}: record lacks {self.id_field!r} or "
                                f"{self.text_field!r}") from None
            if doc_id in seen:
                raise DataError(f"{file}:{line_no}: duplicate doc_id {doc_id!r}")
            seen.add(doc_id)
            title = str(row.get(self.title_field) or "") if self.title_field else ""
            text = str(text or "")
            yield doc_id, title, f"{title} {text}".strip() if self.title_in_text and title else text


class HotpotQACorpus(Corpus):
    """HotpotQA paragraph corpus: `{title: [sentence, ...]}`; the title is the document id."""

    def documents(self) -> Iterator[tuple[str, str, str]]:
        file = self.file()
        with open_text(file) as handle:
            data = json.load(handle)
        if not isinstance(data, dict):
            raise DataError(f"{file}: expected an object mapping titles to sentence lists")
        for title, sentences in data.items():
            yield title, title, "".join(sentences) if isinstance(sentences, list) else str(sentences)


class MuSiQueCorpus(Corpus):
    """MuSiQue paragraph corpus: `[{title, text}]`; ids hash title and text since titles repeat."""

    def documents(self) -> Iterator[tuple[str, str, str]]:
        file = self.file()
        with open_text(file) as handle:
            data = json.load(handle)
        seen: set[str] = set()
        for index, row in enumerate(data):
            try:
                doc_id = paragraph_doc_id(row["title"], row["text"])
            except (KeyError, TypeError):
                raise DataError(f"{file}: item {index} lacks 'title' or 'text'") from None
            if doc_id not in seen:
                seen.add(doc_id)
                yield doc_id, row["title"], row["text"]


class SquadCorpus(Corpus):
    """The SQuAD paragraphs themselves, ids `<title>#<paragraph index>` as the question loader uses."""

    def documents(self) -> Iterator[tuple[str, str, str]]:
        file = self.file()
        with open_text(file) as handle:
            data = json.load(handle)
        for article in data.get("data", []):
            title = article.get("title", "")
            for p_index, paragraph in enumerate(article.get("paragraphs", [])):
                yield f"{title}#{p_index}", title, paragraph.get("context", "")
