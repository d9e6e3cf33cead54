"""Corpora: documents read from the dataset's files and chunked into passages, each mapped to its document.

LiveRAG's indexes split every FineWeb document into passages of at most 512 words without overlap; that is
the default here and both are configurable. A corpus has a `key` naming its file and chunking, which names
the index caches built on it.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path

from rag.core.errors import DataError
from rag.core.hashing import slug
from rag.core.io import iter_jsonl_numbered, open_text
from rag.data.ids import paragraph_doc_id
from rag.data.paths import resolve_data_file
from rag.records import Passage


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
    def __init__(self, path: str, data_dir: str | None = None, chunk_words: int = 512, overlap_words: int = 0,
                 name: str | None = None):
        self.path = path
        self.data_dir = data_dir
        self.chunk_words = chunk_words
        self.overlap_words = overlap_words
        self.name = name or Path(path).name.split(".")[0]

    def file(self) -> Path:
        return resolve_data_file(self.path, self.data_dir, f"{type(self).__name__} corpus")

    @property
    def key(self) -> str:
        """Readable cache name: corpus file, its size (a cheap fingerprint), chunking."""
        size = self.file().stat().st_size
        return slug(f"{self.name}-{size}b-{self.chunk_words}w{self.overlap_words}o")

    @abstractmethod
    def documents(self) -> Iterator[tuple[str, str, str]]:
        """Yield (doc_id, title, text) for every document."""

    @cached_property
    def passages(self) -> list[Passage]:
        out: list[Passage] = []
        for doc_id, title, text in self.documents():
            for i, chunk in enumerate(chunk_words(text, self.chunk_words, self.overlap_words)):
                out.append(Passage(passage_id=f"{doc_id}#p{i}", doc_id=doc_id, text=chunk, title=title))
        if not out:
            raise DataError(f"{self.file()}: corpus has no passages")
        return out

    @cached_property
    def doc_ids(self) -> set[str]:
        return {p.doc_id for p in self.passages}


class JsonlCorpus(Corpus):
    """`{doc_id, text}` JSONL (gzip allowed), e.g. LiveRAG's FineWeb sample."""

    def __init__(self, path: str, data_dir: str | None = None, chunk_words: int = 512, overlap_words: int = 0,
                 name: str | None = None, id_field: str = "doc_id", text_field: str = "text",
                 title_field: str | None = None):
        super().__init__(path, data_dir, chunk_words, overlap_words, name)
        self.id_field, self.text_field, self.title_field = id_field, text_field, title_field

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
            yield doc_id, str(row.get(self.title_field, "")) if self.title_field else "", str(text or "")


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
