"""Provence (Chirkova et al., "Provence: efficient and robust context pruning for retrieval-augmented generation",
2025, arXiv:2501.16214; model: naver/provence-reranker-debertav3-v1): a DeBERTa-v3 cross-encoder that reads (question,
passage) and labels the passage's tokens keep/drop, turned into whole sentences kept or dropped, together with a
reranking score.

The model's own code path is used: `AutoModel.from_pretrained(..., trust_remote_code=True)` and its
`process(question, context, ...)` API, batched over the questions of a chunk (one list of passage texts per
question, in prompt order, `reorder=False` so the answer lines up with the input). A passage pruned to nothing is
left out; the others keep their ids, so citations still name documents. The weights are gated: built, the class
only checks that a local copy exists (`compress.model_path`, or the Hugging Face cache), and loads it when first
used.
"""

from __future__ import annotations

import logging
from typing import Any

from rag.compress.base import Compression, Compressor, local_model, torch_device, with_text, word_count
from rag.records import Question, ScoredPassage

log = logging.getLogger(__name__)


class Provence(Compressor):
    """Sentence-level context pruning with Provence's DeBERTa cross-encoder (its `process` API)."""

    name = "provence"

    def __init__(self, model: str = "naver/provence-reranker-debertav3-v1", model_path: str | None = None,
                 threshold: float = 0.1, batch_size: int = 32, with_title: bool = False,
                 always_select_title: bool = False, device: str = "auto"):
        self.model_name = model
        self.location = local_model(model, model_path)
        self.threshold, self.batch_size = float(threshold), int(batch_size)
        self.with_title, self.always_select_title, self.device = with_title, always_select_title, device
        self._model: Any = None

    @property
    def model(self) -> Any:
        if self._model is None:
            from transformers import AutoModel

            self._model = AutoModel.from_pretrained(self.location, trust_remote_code=True)
            self._model.to(torch_device(self.device)).eval()
            log.info("Provence %s loaded from %s", self.model_name, self.location)
        return self._model

    def inputs(self, questions: list[Question], contexts: list[list[ScoredPassage]]) -> dict[str, Any]:
        """The arguments of one `process` call: the questions, each one's passage texts in prompt order, the titles
        (with_title) or None (no title: Provence's option for passages without one), and the pruning settings."""
        titles = [[p.passage.title for p in ctx] for ctx in contexts] if self.with_title else None
        return {"question": [q.question for q in questions],
                "context": [[p.passage.text for p in ctx] for ctx in contexts],
                "title": titles, "threshold": self.threshold, "batch_size": self.batch_size,
                "always_select_title": self.always_select_title, "reorder": False}

    def compress(self, questions: list[Question], contexts: list[list[ScoredPassage]]) -> list[Compression]:
        args = self.inputs(questions, contexts)
        out = self.model.process(args.pop("question"), args.pop("context"), **args)
        scores = out.get("reranking_score")
        return [self.mapped(ctx, pruned, scores[i] if scores is not None else None)
                for i, (ctx, pruned) in enumerate(zip(contexts, out["pruned_context"]))]

    @staticmethod
    def mapped(ctx: list[ScoredPassage], pruned: list[str], scores: list[float] | None = None) -> Compression:
        """The pruned texts back onto their passages (same order); a passage pruned to nothing is dropped."""
        if len(pruned) != len(ctx):
            raise ValueError(f"Provence returned {len(pruned)} pruned passages for {len(ctx)}")
        kept = [with_text(p, text.strip()) for p, text in zip(ctx, pruned) if text and text.strip()]
        details: dict[str, Any] = {"kept_passages": len(kept), "passages": len(ctx)}
        if scores is not None:
            details["reranking_scores"] = [round(float(s), 4) for s in scores]
        return Compression(kept, word_count(ctx), word_count(kept), details)

    def close(self) -> None:
        self._model = None
