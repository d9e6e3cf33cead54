"""Small IR collections in the field's formats, made from real HotpotQA text (the shared data): a BEIR folder, a
TREC RAG folder (2025 topics, TREC qrels, MS MARCO v2.1-shaped segments) and an ir_datasets registration.

Each question's distractor-format context gives the documents: its two supporting paragraphs are judged 2, its
other eight 0 (judged not relevant), so the qrels are graded and Judged@k means something. The last question is
left unjudged (BEIR drops it, TREC keeps it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Collection:
    docs: list[dict[str, str]]
    queries: list[dict[str, str]]
    qrels: dict[str, dict[str, int]]


def hotpot_collection(data_dir: Path, n_questions: int = 4) -> Collection:
    rows = json.loads((data_dir / "hotpotqa_musique" / "hotpotqa_train.json").read_text())[:n_questions]
    docs: list[dict[str, str]] = []
    ids: dict[str, str] = {}
    queries, qrels = [], {}
    for q_index, row in enumerate(rows):
        qid = f"{q_index + 1}"
        supporting = {title for title, _ in row["supporting_facts"]}
        judged = {}
        for title, sentences in row["context"]:
            if title not in ids:
                n = len(ids)
                ids[title] = f"msmarco_v2.1_doc_00_{1000 + n}#0_{2000 + n}"
                docs.append({"id": ids[title], "title": title, "text": "".join(sentences)})
            judged[ids[title]] = 2 if title in supporting else 0
        queries.append({"id": qid, "text": row["question"]})
        if q_index < n_questions - 1:
            qrels[qid] = judged
    return Collection(docs, queries, qrels)


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def trec_qrels_text(qrels: dict[str, dict[str, int]]) -> str:
    return "".join(f"{q} 0 {d} {g}\n" for q, judged in qrels.items() for d, g in judged.items())


def write_beir(folder: Path, c: Collection, split: str = "test") -> Path:
    """corpus.jsonl, queries.jsonl, qrels/<split>.tsv as BEIR writes them (header line, tab-separated)."""
    _jsonl(folder / "corpus.jsonl", [{"_id": d["id"], "title": d["title"], "text": d["text"]} for d in c.docs])
    _jsonl(folder / "queries.jsonl", [{"_id": q["id"], "text": q["text"], "metadata": {}} for q in c.queries])
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "qrels" / f"{split}.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, j in c.qrels.items() for d, g in j.items()))
    return folder


def write_trec(folder: Path, c: Collection) -> Path:
    """topics.jsonl (TREC RAG 2025: {"id", "title"}), topics.tsv (2024: qid<TAB>query), qrels.txt and corpus.jsonl
    with MS MARCO v2.1 segment fields."""
    _jsonl(folder / "topics.jsonl", [{"id": q["id"], "title": q["text"]} for q in c.queries])
    (folder / "topics.tsv").write_text("".join(f"{q['id']}\t{q['text']}\n" for q in c.queries))
    (folder / "qrels.txt").write_text(trec_qrels_text(c.qrels))
    _jsonl(folder / "corpus.jsonl", [{"docid": d["id"], "url": f"https://example.org/{i}", "title": d["title"],
                                      "headings": d["title"], "segment": d["text"], "start_char": 0,
                                      "end_char": len(d["text"])} for i, d in enumerate(c.docs)])
    return folder


def write_ir_datasets_module(folder: Path, c: Collection, module: str, dataset_id: str) -> Path:
    """docs.tsv, queries.tsv, qrels.txt and a module that registers them with ir_datasets under `dataset_id`
    (ir_datasets.create_dataset over the local files), to be named in `dataset.imports`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "docs.tsv").write_text("".join(f"{d['id']}\t{d['text']}\n" for d in c.docs))
    (folder / "queries.tsv").write_text("".join(f"{q['id']}\t{q['text']}\n" for q in c.queries))
    (folder / "qrels.txt").write_text(trec_qrels_text(c.qrels))
    (folder / f"{module}.py").write_text(
        "import ir_datasets\n"
        f"ir_datasets.registry._registered.pop({dataset_id!r}, None)  # stands in for ir_datasets' own entry\n"
        f"ir_datasets.registry.register({dataset_id!r}, ir_datasets.create_dataset(\n"
        f"    docs_tsv={str(folder / 'docs.tsv')!r}, queries_tsv={str(folder / 'queries.tsv')!r},\n"
        f"    qrels_trec={str(folder / 'qrels.txt')!r}))\n")
    return folder
