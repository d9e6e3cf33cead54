"""UMBRELA against people: TREC qrels with human relevance grades (`labels=qrels`).

Input, three files: TREC qrels (`qid iteration docid grade`, whitespace separated, grades 0-3 as TREC DL and RAG
assess passages), the topics (`qid<TAB>query` lines, or JSONL `{qid, query}`), and the judged passages' text
(JSONL `{docid, text}`; `passage_id` / `id` and `segment` / `contents` are read too). The configured grader
(`umbrela`, conf/umbrela/default.yaml) grades every assessed pair and the grades are compared as UMBRELA's paper
compares them with TREC assessors: Cohen's kappa over the four grades and over binary relevance (grade >=
`binary_threshold`, 2 by default: TREC DL's passage-relevance cut), raw agreement, and the confusion matrix (assessor
rows, UMBRELA columns). Unreadable grades are counted and left out of the comparison (a grade is never guessed).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from eval.meta_nuggets import confusion_png
from eval.umbrela import GRADES, GradeItem
from rag.core.errors import ConfigError, DataError, MissingDataError
from rag.core.io import atomic_write_jsonl, atomic_write_text, iter_jsonl_numbered
from rag.llm.factory import EngineFactory


@dataclass(frozen=True)
class AssessedPair:
    qid: str
    docid: str
    grade: int


def _need(path: Path, what: str) -> Path:
    if not path.is_file():
        raise MissingDataError(f"{path}: not found ({what})")
    return path


class QrelsLabels:
    """Human grades from a qrels file, with the topics and passage texts the grader needs (module docstring)."""

    def __init__(self, qrels: str | Path, queries: str | Path, passages: str | Path, limit: int | None = None,
                 binary_threshold: int = 2):
        self.qrels, self.queries, self.passages = Path(qrels), Path(queries), Path(passages)
        self.limit = limit
        if binary_threshold not in GRADES[1:]:
            raise ConfigError(f"labels.binary_threshold={binary_threshold}: one of 1, 2, 3")
        self.binary_threshold = binary_threshold

    def pairs(self) -> list[AssessedPair]:
        out = []
        for line_no, line in enumerate(_need(self.qrels, "labels.qrels").read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            fields = line.split()
            if len(fields) != 4:
                raise DataError(f"{self.qrels}:{line_no}: expected `qid iteration docid grade`, got {len(fields)} "
                                "fields")
            try:
                grade = int(fields[3])
            except ValueError:
                raise DataError(f"{self.qrels}:{line_no}: grade {fields[3]!r} is not an integer") from None
            if grade not in GRADES:
                raise DataError(f"{self.qrels}:{line_no}: grade {grade} is not one of 0-3")
            out.append(AssessedPair(fields[0], fields[2], grade))
            if self.limit is not None and len(out) == self.limit:
                break
        if not out:
            raise DataError(f"{self.qrels}: no assessed pairs")
        return out

    def topics(self) -> dict[str, str]:
        out = {}
        for line_no, line in enumerate(_need(self.queries, "labels.queries").read_text(encoding="utf-8").splitlines(),
                                       1):
            if not line.strip():
                continue
            if line.lstrip().startswith("{"):
                try:
                    row = json.loads(line)
                    out[str(row["qid"])] = str(row["query"])
                except (json.JSONDecodeError, KeyError, TypeError):
                    raise DataError(f"{self.queries}:{line_no}: expected {{qid, query}}") from None
            else:
                qid, sep, query = line.partition("\t")
                if not sep or not query.strip():
                    raise DataError(f"{self.queries}:{line_no}: expected `qid<TAB>query`")
                out[qid.strip()] = query.strip()
        return out

    def texts(self, wanted: set[str]) -> dict[str, str]:
        out = {}
        for line_no, row in iter_jsonl_numbered(_need(self.passages, "labels.passages")):
            docid = next((str(row[k]) for k in ("docid", "passage_id", "id") if k in row), None)
            text = next((row[k] for k in ("text", "segment", "contents") if isinstance(row.get(k), str)), None)
            if docid is None or text is None:
                raise DataError(f"{self.passages}:{line_no}: expected {{docid, text}}")
            if docid in wanted:
                out[docid] = text
        return out

    def evaluate(self, cfg: DictConfig, factory: EngineFactory | None = None) -> QrelsMetaResult:
        """Grade every assessed pair with the configured grader and compare with the assessors' grades."""
        from eval.pool import build_grader

        pairs = self.pairs()
        topics = self.topics()
        texts = self.texts({p.docid for p in pairs})
        for p in pairs:
            if p.qid not in topics:
                raise DataError(f"{self.queries}: no query for topic {p.qid!r} (named in {self.qrels})")
            if p.docid not in texts:
                raise DataError(f"{self.passages}: no text for passage {p.docid!r} (named in {self.qrels})")
        if OmegaConf.select(cfg, "llm", default=None) is None:
            raise ConfigError("labels=qrels grades with UMBRELA: name its engine with llm=<conf/llm name>")
        cache_dir = Path(str(cfg.paths.cache_dir))
        grader = build_grader(cfg.umbrela, cache_dir)
        own = factory is None
        engines = factory or EngineFactory(cache_dir, cache_enabled=bool(OmegaConf.select(
            cfg, "cache.llm_responses", default=True)))
        start = time.perf_counter()
        try:
            engine = engines.get(cfg.llm)
            before = engine.usage.calls
            grades = grader.grade(engine, [GradeItem(p.qid, topics[p.qid], p.docid, texts[p.docid]) for p in pairs])
            calls = engine.usage.calls - before
        finally:
            if own:
                engines.close()
        return compare_grades(pairs, [g.grade for g in grades], self.binary_threshold,
                              seconds=time.perf_counter() - start, llm_calls=calls)


@dataclass
class QrelsMetaResult:
    pairs: list[AssessedPair]
    grades: list[int | None]
    stats: dict[str, Any]
    seconds: float = 0.0
    llm_calls: int = 0

    def markdown(self) -> str:
        s = self.stats
        lines = [f"# UMBRELA against assessors ({s['n_pairs']} assessed pairs, {s['unreadable']} unreadable grades "
                 "left out)", "",
                 "| grades | Cohen's kappa | agreement |", "|---|---|---|",
                 f"| 0-3 | {s['kappa']:.3f} | {s['agreement']:.3f} |",
                 f"| relevant (>= {s['binary_threshold']}) vs not | {s['kappa_binary']:.3f} | "
                 f"{s['agreement_binary']:.3f} |", "",
                 "Confusion matrix (rows: assessor, columns: UMBRELA):", "",
                 "| assessor \\ UMBRELA | 0 | 1 | 2 | 3 |", "|---|---|---|---|---|"]
        lines += [f"| {g} | " + " | ".join(str(v) for v in row) + " |" for g, row in zip(GRADES, s["confusion"])]
        n = max(s["n_pairs"], 1)
        lines += ["", f"{self.llm_calls} LLM calls, {self.seconds:.1f} s ({self.seconds / n:.2f} s per pair)."]
        return "\n".join(lines) + "\n"

    def write(self, out_dir: Path) -> None:
        atomic_write_text(out_dir / "summary.md", self.markdown())
        atomic_write_text(out_dir / "labels.json", json.dumps(self.stats, indent=2) + "\n")
        atomic_write_jsonl(out_dir / "judged.jsonl", [{"qid": p.qid, "docid": p.docid, "assessor": p.grade,
                                                       "umbrela": g} for p, g in zip(self.pairs, self.grades)])
        confusion_png(self.stats["confusion"], out_dir / "confusion.png", "UMBRELA grades", GRADES)


def compare_grades(pairs: list[AssessedPair], grades: list[int | None], binary_threshold: int = 2,
                   seconds: float = 0.0, llm_calls: int = 0) -> QrelsMetaResult:
    """Kappa (scikit-learn's), agreement and confusion of readable grades against the assessors'."""
    kept = [(p.grade, g) for p, g in zip(pairs, grades) if g is not None]
    human = [h for h, _ in kept]
    judge = [g for _, g in kept]

    def kappa(a: list[Any], b: list[Any]) -> float:
        return float(cohen_kappa_score(a, b)) if len(set(a) | set(b)) > 1 else float("nan")

    hb = [h >= binary_threshold for h in human]
    jb = [g >= binary_threshold for g in judge]
    stats = {"n_pairs": len(pairs), "unreadable": len(pairs) - len(kept), "binary_threshold": binary_threshold,
             "kappa": kappa(human, judge) if kept else float("nan"),
             "agreement": float(np.mean([h == g for h, g in kept])) if kept else float("nan"),
             "kappa_binary": kappa(hb, jb) if kept else float("nan"),
             "agreement_binary": float(np.mean([a == b for a, b in zip(hb, jb)])) if kept else float("nan"),
             "confusion": confusion_matrix(human, judge, labels=list(GRADES)).tolist() if kept
             else [[0] * len(GRADES) for _ in GRADES]}
    return QrelsMetaResult(pairs, grades, stats, seconds, llm_calls)
