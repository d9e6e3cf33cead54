"""PreQRAG's query stage (UDInfo, LiveRAG 2025, arXiv 2506.17493; Infolab-UDEL/LiveRag `main_final_code.py`):
classify each question as single- or multi-document, then decompose a multi-document question into sub-questions
(`DecomposeWriter`) or rewrite a single-document one for the sparse and the dense retriever (`RewriteWriter`).

The classification is PreQRAG's rule, `classify_question_rule_based`, followed exactly (no LLM): on the lowercased,
stripped question, multi-document when it contains a comparison keyword as a substring ("differ", "difference",
"different", "compare", "comparison", "between", ...: so "differently" and "compared" count too), else when it
has two or more wh-words as whole words (what, when, where, which, who, whom, whose, why, how), else when it
starts with "which"; single-document otherwise. The class ("multi" / "single") and the rule that fired are in
`steps`. All questions' prompts, decompositions and rewrites mixed, go in one batch.

PreQRAG's context selection after reranking is the pipeline's, from these attributes: a decomposed question keeps
the top `per_group_k` = 3 passages of each sub-question, interleaved without duplicates; a rewritten one keeps its
top `single_k` = 5. PreQRAG searches only the sub-questions or the rewrites (`include_question: false`), and
interleaves the first two sub-questions (`max_subquestions: 2`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rag.llm.base import LLMEngine
from rag.query.base import QuerySet
from rag.query.common import LLMQueryWriter
from rag.query.decompose import DecomposeWriter
from rag.query.rewrite import RewriteWriter
from rag.records import Question

#: PreQRAG's comparison keywords (matched as substrings of the lowercased question)
COMPARISON_KEYWORDS = ("differ", "difference", "different", "compare", "comparison", "between", "compare to",
                       "compare between", "differ to", "difference between")
#: PreQRAG's wh-words (two or more, as whole words, make a question multi-document)
WH_WORDS = ("what", "when", "where", "which", "who", "whom", "whose", "why", "how")
_WH = re.compile(r"\b(" + "|".join(WH_WORDS) + r")\b")


@dataclass(frozen=True)
class Classification:
    """A question's class ("multi" or "single") and the part of the rule that decided it."""

    label: str
    rule: str


def classify(question: str) -> Classification:
    """PreQRAG's `classify_question_rule_based`, in its order of checks."""
    q = str(question).lower().strip()
    keyword = next((k for k in COMPARISON_KEYWORDS if k in q), None)
    if keyword is not None:
        return Classification("multi", f"comparison keyword {keyword!r}")
    wh = _WH.findall(q)
    if len(wh) >= 2:
        return Classification("multi", f"{len(wh)} wh-words ({', '.join(wh)})")
    if q.startswith("which"):
        return Classification("multi", "starts with 'which'")
    return Classification("single", "no multi-document cue")


class PreQRAGWriter(LLMQueryWriter):
    """`query=preqrag`: PreQRAG's rule, then decomposition (multi) or sparse/dense rewriting (single)."""

    name = "preqrag"

    def __init__(self, max_subquestions: int = 2, per_group_k: int | None = 3, single_k: int | None = 5,
                 sparse_source: str = "sparse", dense_source: str = "dense", max_tokens: int = 256,
                 rewrite_max_tokens: int = 128, include_question: bool = False, **kwargs: Any):
        super().__init__(max_tokens=max_tokens, include_question=include_question, **kwargs)
        shared = {"temperature": self.temperature, "prompt_dir": self.prompt_dir, "max_retries": self.max_retries,
                  "include_question": include_question}
        self.decomposer = DecomposeWriter(max_subquestions=max_subquestions, max_tokens=max_tokens,
                                          per_group_k=per_group_k, single_k=single_k, **shared)
        self.rewriter = RewriteWriter(sparse_source=sparse_source, dense_source=dense_source,
                                      max_tokens=rewrite_max_tokens, **shared)
        self.per_group_k, self.single_k = per_group_k, single_k
        self.stats.update(multi=0, single=0)
        self.decomposer.stats = self.rewriter.stats = self.stats  # one set of counters for the run

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "decompose": self.decomposer.settings(), "rewrite": self.rewriter.settings(),
                "rule": {"comparison_keywords": list(COMPARISON_KEYWORDS), "wh_words": list(WH_WORDS)}}

    def prompt_names(self) -> tuple[str, ...]:
        return self.decomposer.prompt_names() + self.rewriter.prompt_names()

    def write(self, questions: list[Question], engine: LLMEngine | None) -> list[QuerySet]:
        classes = [classify(q.question) for q in questions]
        writers = [self.decomposer if c.label == "multi" else self.rewriter for c in classes]
        per_question = [w.requests_for(q) for w, q in zip(writers, questions)]
        asked = self.ask(engine, [r for rs, _ in per_question for r in rs],
                         [p for _, ps in per_question for p in ps], "query preqrag")
        self.stats["questions"] += len(questions)
        out, pos = [], 0
        for q, c, w, (rs, _) in zip(questions, classes, writers, per_question):
            query_set = w.assemble(q, asked[pos: pos + len(rs)])
            pos += len(rs)
            query_set.steps = {"class": c.label, "class_rule": c.rule, **query_set.steps}
            self.stats[c.label] += 1
            out.append(query_set)
        return out
