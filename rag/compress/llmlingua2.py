"""LLMLingua-2 (Pan et al., "LLMLingua-2: Data Distillation for Efficient and Faithful Task-Agnostic Prompt
Compression", Findings of ACL 2024; model: microsoft/llmlingua-2-xlm-roberta-large-meetingbank): an XLM-RoBERTa
token classifier that labels each word keep/drop; the kept words, in order, are the compressed text.

The `llmlingua` package's own code path is used (`PromptCompressor(..., use_llmlingua2=True)` and
`compress_prompt_llmlingua2`), one call per question over its passage texts in prompt order, without its
context-level filter, so `compressed_prompt_list` lines up with the passages and each compressed text goes back
to its passage (ids kept; a passage compressed to nothing is dropped). Offline, `PromptCompressor` also needs
tiktoken's cl100k_base file (it counts OpenAI tokens): set TIKTOKEN_CACHE_DIR to a folder holding it. The
weights are gated: built, the class only checks that a local copy exists (`compress.model_path`, or the Hugging
Face cache), and loads it when first used; `llmlingua` is imported then too.
"""

from __future__ import annotations

import logging
from typing import Any

from rag.compress.base import Compression, Compressor, local_model, torch_device, with_text, word_count
from rag.records import Question, ScoredPassage

log = logging.getLogger(__name__)

MISSING_LLMLINGUA = "compress=llmlingua2 needs the llmlingua package: pip install 'llmlingua==0.2.2'"


class LLMLingua2(Compressor):
    """Token-level keep/drop compression of each passage with LLMLingua-2's token classifier."""

    name = "llmlingua2"

    def __init__(self, model: str = "microsoft/llmlingua-2-xlm-roberta-large-meetingbank",
                 model_path: str | None = None, rate: float = 0.33, force_tokens: list[str] | tuple[str, ...] = (),
                 drop_consecutive: bool = True, max_batch_size: int = 50, device: str = "auto"):
        if not 0.0 < rate <= 1.0:
            raise ValueError(f"compress.rate must be in (0, 1], got {rate}")
        self.model_name = model
        self.location = local_model(model, model_path)
        self.rate, self.force_tokens, self.drop_consecutive = float(rate), list(force_tokens), drop_consecutive
        self.max_batch_size, self.device = int(max_batch_size), device
        self._model: Any = None

    @property
    def model(self) -> Any:
        if self._model is None:
            try:
                from llmlingua import PromptCompressor
            except ImportError as err:
                raise ImportError(f"{MISSING_LLMLINGUA} ({err})") from None
            self._model = PromptCompressor(model_name=self.location, use_llmlingua2=True,
                                           device_map=torch_device(self.device),
                                           llmlingua2_config={"max_batch_size": self.max_batch_size})
            log.info("LLMLingua-2 %s loaded from %s", self.model_name, self.location)
        return self._model

    def request(self, ctx: list[ScoredPassage]) -> dict[str, Any]:
        """The keyword arguments of one `compress_prompt_llmlingua2` call: the passage texts in prompt order."""
        return {"context": [p.passage.text for p in ctx], "rate": self.rate, "force_tokens": list(self.force_tokens),
                "drop_consecutive": self.drop_consecutive, "use_context_level_filter": False}

    def compress(self, questions: list[Question], contexts: list[list[ScoredPassage]]) -> list[Compression]:
        out = []
        for ctx in contexts:
            if not ctx:
                out.append(Compression([], 0, 0))
                continue
            result = self.model.compress_prompt_llmlingua2(**self.request(ctx))
            out.append(self.mapped(ctx, result))
        return out

    @staticmethod
    def mapped(ctx: list[ScoredPassage], result: dict[str, Any]) -> Compression:
        """`compressed_prompt_list` back onto the passages (same order); a passage compressed to nothing is
        dropped. LLMLingua's own token counts (OpenAI's tokenizer) go into the details beside our word counts."""
        texts = result["compressed_prompt_list"]
        if len(texts) != len(ctx):
            raise ValueError(f"LLMLingua-2 returned {len(texts)} compressed passages for {len(ctx)}")
        kept = [with_text(p, text.strip()) for p, text in zip(ctx, texts) if text and text.strip()]
        details = {"kept_passages": len(kept), "passages": len(ctx), "origin_tokens": result.get("origin_tokens"),
                   "compressed_tokens": result.get("compressed_tokens")}
        return Compression(kept, word_count(ctx), word_count(kept), details)

    def close(self) -> None:
        self._model = None
