"""Real HotpotQA questions and passages for the compression tests."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from rag.data.questions import HotpotQAQuestions
from rag.records import Passage, Question, ScoredPassage

ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = Path(os.environ.get("RAG_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()


@lru_cache(maxsize=1)
def hotpot_questions() -> tuple[Question, ...]:
    return tuple(HotpotQAQuestions(path="hotpotqa_musique/hotpotqa_train.json", data_dir=str(DATA_DIR)).load())


def gold_passages(q: Question) -> list[Passage]:
    return [Passage(passage_id=f"{d}#p0", doc_id=d, text=text, title=d) for d, text in zip(q.gold_doc_ids, q.gold_docs)]


def context_for(index: int, distractors: int = 3) -> tuple[Question, list[ScoredPassage]]:
    """Question `index`'s gold passages, then the following questions' gold passages as distractors, ranked."""
    qs = hotpot_questions()
    passages = gold_passages(qs[index])
    for other in qs[index + 1: index + 1 + distractors]:
        passages += gold_passages(other)
    return qs[index], [ScoredPassage(p, 10.0 - i, i + 1) for i, p in enumerate(passages)]
