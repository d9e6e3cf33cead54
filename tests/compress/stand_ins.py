"""The one stand-in of the compression tests: Provence's and LLMLingua-2's weights cannot be downloaded here (no Hub
access), and LLMLingua's `PromptCompressor` cannot even be built offline without tiktoken's cl100k_base file. So
these objects take the place of the loaded model object only (`compressor._model`), with the model's call
signature (`process(question, context, **kwargs)`, `compress_prompt_llmlingua2(**kwargs)`): they record what our
classes hand the model and answer with a fixed rule (keep each passage's first sentence; keep every other word),
so the tests check the inputs prepared for the real model and the mapping of its output back onto the passages.
The real models run where their weights are: `compress.model_path=<local copy>`.
"""

from __future__ import annotations

from typing import Any

from rag.core.text import split_sentences


class ProvenceStandIn:
    """Provence's `process` API: batched questions, one list of passage texts per question; keeps the first
    sentence of each passage, and prunes a passage holding `DROP` to nothing."""

    DROP = "Nothing here answers anything."

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def process(self, question: list[str], context: list[list[str]], **kwargs: Any) -> dict[str, Any]:
        self.calls.append({"question": question, "context": context, **kwargs})
        pruned = [["" if self.DROP in text else split_sentences(text)[0] for text in texts] for texts in context]
        return {"pruned_context": pruned, "reranking_score": [[float(-i) for i in range(len(t))] for t in context]}


class LLMLinguaStandIn:
    """LLMLingua's `compress_prompt_llmlingua2`: keeps every other word of each context."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def compress_prompt_llmlingua2(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        texts = [" ".join(t.split()[::2]) for t in kwargs["context"]]
        return {"compressed_prompt": "\n\n".join(texts), "compressed_prompt_list": texts,
                "origin_tokens": sum(len(t.split()) for t in kwargs["context"]),
                "compressed_tokens": sum(len(t.split()) for t in texts)}
