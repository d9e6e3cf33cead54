"""BM25 in shards with global statistics: every shard scores exactly as one bm25s index over the whole corpus.

Why not Lucene (OpenSearch, Pyserini): the index must be the one `retriever=bm25` (bm25s) scores with, bit for
bit, so that a sharded build changes nothing but the cost; a Lucene index scores with Lucene's own tokenizer,
its document-length quantisation (one byte per norm) and float arithmetic, so its lists differ from ours on
ties and near-ties. bm25s cannot take external document frequencies or an external average length (its
`index()` computes both from the documents it is given), so this module computes BM25 itself, with scipy.sparse
and bm25s's own scoring functions (`bm25s.scoring`: the configured variant's idf and term-frequency parts, the
same k1, b and delta, float32 scores as bm25s stores them) on terms made by the retriever's own tokenizer
(`BM25Retriever.tokenize`: bm25s's tokenizer, stopwords, PyStemmer).

One streaming pass: each shard task tokenizes its documents once and keeps, per part, the raw term frequencies
(a CSC matrix over the part's sorted terms) and every passage's length. The merge then sums document
frequencies over parts (a k-way merge of the parts' sorted vocabularies, so no global dictionary is held in
memory), takes N and the average length, and turns each part's frequencies into final scores, one part at a
time. The single bm25s index `retriever=bm25` loads is written too when the corpus is small enough.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from rag.core.errors import DataError
from rag.index.plan import BuildFolder, Part
from rag.index.sources import SourcePassage
from rag.index.store import STORE_FILES, PartWriter, link_files
from rag.retrieve.bm25 import BM25Retriever
from rag.retrieve.shards import (
    NONOCCURRENCE,
    PIDS,
    SCORES,
    TERMS,
    VOCAB,
    StringTable,
    load_array,
    write_string_table,
)

log = logging.getLogger(__name__)

#: a part's raw term frequencies (CSC: rows = passages, columns = the part's sorted terms) and passage lengths
TF = ("tf.data.npy", "tf.indices.npy", "tf.indptr.npy")
DOC_LENGTHS = "doclen.npy"
PART_TERMS = "terms"
NONOCCURRENCE_METHODS = ("bm25l", "bm25+")


class Bm25Builder:
    kind = "bm25"

    def __init__(self, retriever: BM25Retriever, batch_passages: int = 4096):
        self.retriever = retriever
        self.batch_passages = max(1, batch_passages)

    @property
    def name(self) -> str:
        return self.retriever.key

    def settings(self) -> dict[str, Any]:
        return {"key": self.retriever.key}

    def prepare(self, folder: BuildFolder, plan: Any) -> None:
        """Nothing to train: BM25's statistics are summed at the merge."""

    # -- one part -------------------------------------------------------------------------------------------------
    def build_part(self, folder: BuildFolder, part: Part, tmp: Path,
                   batches: Iterator[list[SourcePassage]]) -> dict[str, Any]:
        writer = PartWriter(tmp)
        vocab: dict[str, int] = {}
        blocks: list[sp.csr_matrix] = []
        lengths: list[np.ndarray] = []
        for batch in batches:
            for item in batch:
                writer.add(item)
            tokens = self.retriever.tokenize([item.passage.text for item in batch])
            words = [""] * len(tokens.vocab)
            for word, i in tokens.vocab.items():
                words[i] = word
            local = np.fromiter((vocab.setdefault(w, len(vocab)) for w in words), dtype=np.int64, count=len(words))
            counts = np.fromiter(map(len, tokens.ids), dtype=np.int64, count=len(tokens.ids))
            flat = np.fromiter(itertools.chain.from_iterable(tokens.ids), dtype=np.int64, count=int(counts.sum()))
            rows = np.repeat(np.arange(len(batch), dtype=np.int64), counts)
            block = sp.coo_matrix((np.ones(len(flat), dtype=np.int32), (rows, local[flat])),
                                  shape=(len(batch), max(1, len(vocab)))).tocsr()  # sums repeated terms: tf
            blocks.append(block)
            lengths.append(counts.astype(np.int32))
        n = writer.close()
        terms = sorted(vocab)
        position = np.empty(len(vocab), dtype=np.int64)
        position[np.fromiter((vocab[t] for t in terms), dtype=np.int64, count=len(terms))] = np.arange(len(terms))
        width = len(terms)
        if blocks and width:
            blocks = [sp.csr_matrix((b.data, b.indices, b.indptr), shape=(b.shape[0], width)) for b in blocks]
            tf = sp.vstack(blocks, format="csr")
            tf = sp.csr_matrix((tf.data, position[tf.indices], tf.indptr), shape=tf.shape).tocsc()
            tf.sort_indices()
        else:
            tf = sp.csc_matrix((n, width), dtype=np.int32)
        np.save(tmp / TF[0], tf.data.astype(np.int32))
        np.save(tmp / TF[1], tf.indices.astype(np.int32))
        np.save(tmp / TF[2], tf.indptr.astype(np.int64))
        np.save(tmp / DOC_LENGTHS, np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int32))
        write_string_table(tmp, PART_TERMS, terms)
        return {"passages": n, "terms": width, "tokens": int(sum(int(x.sum()) for x in lengths))}

    # -- merge ----------------------------------------------------------------------------------------------------
    def merge(self, folder: BuildFolder, parts: list[tuple[Part, Path, dict[str, Any]]], out: Path,
              single: bool) -> dict[str, Any]:
        """Global statistics, final scores per unit, the vocabulary, and (if `single`) the bm25s index."""
        import bm25s.scoring as scoring

        r = self.retriever
        vocab_size, df, global_ids = self.global_vocabulary([(d, int(m["terms"])) for _, d, m in parts], out)
        n_docs = sum(int(m["passages"]) for _, _, m in parts)
        total = sum(int(load_array(d / DOC_LENGTHS, length=int(m["passages"])).sum(dtype=np.int64))
                    for _, d, m in parts)
        if n_docs == 0:
            raise DataError(f"{folder.dir}: the corpus has no passages")
        # bm25s: np.array(lengths).mean(), an exact float64 sum (integers) divided by N
        avgdl = np.float64(total) / n_docs
        idf_of = scoring._select_idf_scorer(r.method)
        tfc_of = scoring._select_tfc_scorer(r.method)
        delta = 0.5  # bm25s.BM25's default, which BM25Retriever keeps
        unique_df, inverse = np.unique(df, return_inverse=True)
        idf = np.array([idf_of(int(x), N=n_docs) for x in unique_df], dtype=np.float32)[inverse]
        nonoccurrence = None
        if r.method in NONOCCURRENCE_METHODS:
            tfc0 = tfc_of(tf_array=0, l_d=avgdl, l_avg=avgdl, k1=r.k1, b=r.b, delta=delta)
            nonoccurrence = np.array([idf_of(int(x), N=n_docs) * tfc0 for x in unique_df], dtype=np.float32)[inverse]
            np.save(out / NONOCCURRENCE, nonoccurrence)
        units = []
        for (part, source, meta), gids in zip(parts, global_ids):
            target = out / "units" / part.name
            link_files(source, target, STORE_FILES)
            data, indices, indptr = (load_array(source / name) for name in TF)
            lengths = load_array(source / DOC_LENGTHS, length=int(meta["passages"]))
            columns = np.repeat(np.arange(len(gids), dtype=np.int64), np.diff(indptr))
            tfc = tfc_of(tf_array=np.asarray(data, dtype=np.float32), l_d=np.asarray(lengths[indices], dtype=np.int64),
                         l_avg=avgdl, k1=r.k1, b=r.b, delta=delta)
            scores = idf[gids[columns]] * tfc  # float32 idf times float64 tfc, stored as float32: bm25s's arithmetic
            if nonoccurrence is not None:
                scores -= nonoccurrence[gids[columns]]
            np.save(target / SCORES[0], scores.astype(np.float32))
            np.save(target / SCORES[1], np.asarray(indices, dtype=np.int32))
            np.save(target / SCORES[2], np.asarray(indptr, dtype=np.int64))
            np.save(target / TERMS, gids)
            units.append({"dir": f"units/{part.name}", "passages": int(meta["passages"]), "shard": part.shard})
        if single:
            self._write_bm25s(out, parts, global_ids, vocab_size, nonoccurrence)
        return {"units": units, "bm25": {"k1": r.k1, "b": r.b, "method": r.method, "delta": delta,
                                         "stemmer": r.stemmer_lang, "stopwords": r.stopwords, "n_docs": n_docs,
                                         "avgdl": float(avgdl), "tokens": total, "vocab_size": vocab_size}}

    @classmethod
    def global_vocabulary(cls, parts: list[tuple[Path, int]], out: Path) -> tuple[int, np.ndarray, list[np.ndarray]]:
        """The merge's vocabulary step over the parts' folders (each with its number of terms): the vocabulary's
        size, each term's document frequency, and each part's term -> global id. Its cost grows with the sum of
        the parts' vocabularies, which fresh web text keeps raising (`benchmarks/index_bench.py vocab` times it
        at FineWeb-10BT's projected sizes)."""
        tables = [StringTable(folder, PART_TERMS, terms) for folder, terms in parts]
        frequencies = [np.diff(load_array(folder / TF[2], length=terms + 1)) for folder, terms in parts]
        global_ids = [np.empty(len(t), dtype=np.int64) for t in tables]
        vocab_size, df = cls._merge_vocabularies(tables, frequencies, global_ids, out)
        return vocab_size, df, global_ids

    @staticmethod
    def _merge_vocabularies(tables: list[StringTable], frequencies: list[np.ndarray], global_ids: list[np.ndarray],
                            out: Path) -> tuple[int, np.ndarray]:
        """k-way merge of the parts' sorted terms: the global sorted vocabulary (written as a string table),
        each term's document frequency, and each part's term -> global id (ascending, as the parts' terms)."""
        def stream(u: int) -> Iterator[tuple[bytes, int, int]]:
            table = tables[u]
            for i in range(len(table)):
                yield table.raw(i), u, i

        offsets = array("q", [0])
        df = array("q")
        last: bytes | None = None
        with open(out / f"{VOCAB}.bin", "wb") as blob:
            for term, u, i in heapq.merge(*(stream(u) for u in range(len(tables)))):
                if term != last:
                    blob.write(term)
                    offsets.append(offsets[-1] + len(term))
                    df.append(0)
                    last = term
                df[-1] += int(frequencies[u][i])
                global_ids[u][i] = len(df) - 1
        np.save(out / f"{VOCAB}.offsets.npy", np.frombuffer(offsets, dtype=np.int64))
        return len(df), np.frombuffer(df, dtype=np.int64)

    def _write_bm25s(self, out: Path, parts: list[tuple[Part, Path, dict[str, Any]]], global_ids: list[np.ndarray],
                     vocab_size: int, nonoccurrence: np.ndarray | None) -> None:
        """The whole index as one bm25s folder (what `retriever=bm25` loads): every unit's columns placed at
        their global term, rows offset by the passages before them, and `passage_ids.json` in corpus order."""
        import bm25s

        counts = np.zeros(vocab_size, dtype=np.int64)
        for (part, _, _), gids in zip(parts, global_ids):
            counts[gids] += np.diff(load_array(out / "units" / part.name / SCORES[2]))
        indptr_all = np.zeros(vocab_size + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr_all[1:])
        data_all = np.empty(int(indptr_all[-1]), dtype=np.float32)
        rows_all = np.empty(int(indptr_all[-1]), dtype=np.int32)
        filled = indptr_all[:-1].copy()
        row_offset = 0
        pids: list[str] = []
        for (part, _, meta), gids in zip(parts, global_ids):
            unit = out / "units" / part.name
            data, indices, indptr = (load_array(unit / name) for name in SCORES)
            lengths = np.diff(indptr)
            position = np.repeat(filled[gids] - indptr[:-1], lengths) + np.arange(len(data))
            data_all[position] = data
            rows_all[position] = np.asarray(indices, dtype=np.int64) + row_offset
            filled[gids] += lengths
            row_offset += int(meta["passages"])
            table = StringTable(unit, PIDS, int(meta["passages"]))
            pids += [table[i] for i in range(len(table))]
        vocab = StringTable(out, VOCAB, vocab_size)
        r = self.retriever
        index = bm25s.BM25(k1=r.k1, b=r.b, method=r.method)
        index.scores = {"data": data_all, "indices": rows_all, "indptr": indptr_all, "num_docs": row_offset}
        index.vocab_dict = {vocab[i]: i for i in range(len(vocab))}
        index.vocab_dict[""] = len(vocab)  # bm25s's empty token (create_empty_token): a column with no postings
        index.scores["indptr"] = np.append(indptr_all, indptr_all[-1])
        index.nonoccurrence_array = None if nonoccurrence is None else np.append(nonoccurrence, np.float32(0))
        index.save(str(out), show_progress=False)
        (out / "passage_ids.json").write_text(json.dumps(pids))
