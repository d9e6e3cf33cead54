"""The compression interface: a question's ordered passages in, shorter passages out, each keeping its passage id
and document id so citations still name documents.

The pipeline makes one call per batch (`Compressor.shrink`, after ordering, before generation) and one after it
(`Compressor.mark`), so the stage's logic lives here, not in rag/pipeline.py. Each answer's record gets a
`steps["compress"]` entry (method, words before and after, ratio and what the method kept); the run metric
`compress/ratio` is the mean of the answers' ratios, read back from the records so a resumed run counts every
answer. `compress=none` leaves records and metrics as they were before this stage existed.

Strategies that retrieve while generating (IterDRAG, IRCoT, Search-o1, Search-R1) get the compressed initial
context; their own later searches (`GenerationContext.retrieve`) are not compressed.
"""

from __future__ import annotations

import dataclasses
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rag.core.errors import MissingDataError
from rag.core.timing import Timer
from rag.records import GenerationResult, Question, ScoredPassage

#: the key of an answer's `steps` that holds its compression
STEP = "compress"


def word_count(passages: Sequence[ScoredPassage]) -> int:
    """Whitespace words of the passages' texts: the one unit every method's ratio is counted in."""
    return sum(len(p.passage.text.split()) for p in passages)


def with_text(item: ScoredPassage, text: str, score: float | None = None) -> ScoredPassage:
    """The passage with a new text (ids, title and rank kept, so a citation still names its document)."""
    return ScoredPassage(dataclasses.replace(item.passage, text=text), item.score if score is None else score,
                         item.rank)


@dataclass
class Compression:
    """One question's compressed context and what it cost and kept."""

    passages: list[ScoredPassage]
    words_before: int
    words_after: int
    #: what the method kept and why (sentence scores, the model's own token counts)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        """Words kept / words before (1.0 for an empty context: nothing was removed)."""
        return round(self.words_after / self.words_before, 4) if self.words_before else 1.0

    def step(self, method: str) -> dict[str, Any]:
        return {"method": method, "words_before": self.words_before, "words_after": self.words_after,
                "ratio": self.ratio, **self.details}


class HasPassages(Protocol):
    """What the pipeline hands over (a `GenerationInput`): the question and its passages in prompt order."""

    question: Question
    passages: list[ScoredPassage]


class Compressor(ABC):
    """One compression method (a class plus `conf/compress/<name>.yaml`)."""

    name: str = "compress"

    @property
    def is_identity(self) -> bool:
        """True when the passages go to the generator unchanged (nothing to compute, record or report)."""
        return False

    @abstractmethod
    def compress(self, questions: list[Question], contexts: list[list[ScoredPassage]]) -> list[Compression]:
        """Every question's passages (prompt order) compressed; batch across questions where the model allows."""

    def shrink(self, items: Sequence[HasPassages], timer: Timer | None = None) -> list[Compression]:
        """The pipeline's call: compress each item's passages in place (timed as stage `compress`)."""
        if self.is_identity or not items:
            return []
        with timer.stage("compress") if timer is not None else nullcontext():
            done = self.compress([i.question for i in items], [list(i.passages) for i in items])
        for item, compression in zip(items, done):
            item.passages = compression.passages
        return done

    def mark(self, results: list[GenerationResult], done: list[Compression]) -> list[GenerationResult]:
        """Store each answer's compression under `steps["compress"]`; a strategy that reported no passages of its own
        used the compressed ones, which its record then lists (texts as the prompt had them, doc ids kept)."""
        for result, compression in zip(results, done):
            result.steps[STEP] = compression.step(self.name)
            if result.passages is None:
                result.passages = list(compression.passages)
        return results

    def metrics(self, records: Sequence[Any]) -> dict[str, float]:
        """`compress/ratio`: the mean over answers of words kept / words before; nothing without a compression."""
        ratios = [float(r.steps[STEP]["ratio"]) for r in records if isinstance(r.steps, dict) and STEP in r.steps]
        return {"compress/ratio": round(sum(ratios) / len(ratios), 4)} if ratios else {}

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release model memory."""


class NoCompression(Compressor):
    """The passages as ordering left them (the default)."""

    name = "none"

    @property
    def is_identity(self) -> bool:
        return True

    def compress(self, questions: list[Question], contexts: list[list[ScoredPassage]]) -> list[Compression]:
        return [Compression(list(c), word_count(c), word_count(c)) for c in contexts]


def local_model(model: str, model_path: str | None, setting: str = "compress") -> str:
    """The folder of a gated model: `model_path`, else the Hugging Face cache's copy of `model`. Checked when the
    compressor is built (before any index or model loads), so a missing copy is one line naming the setting."""
    if model_path:
        path = Path(model_path).expanduser()
        if not path.is_dir():
            raise MissingDataError(f"{setting}.model_path={model_path}: no such folder (a local copy of {model})")
        return str(path)
    try:
        from huggingface_hub import snapshot_download

        return str(snapshot_download(model, local_files_only=True))
    except Exception:  # not in the cache (huggingface_hub's LocalEntryNotFoundError and kin)
        offline = " with downloads off (HF_HUB_OFFLINE=1)" if os.environ.get("HF_HUB_OFFLINE") == "1" else ""
        raise MissingDataError(f"{setting}.model={model}: no local copy (not in the Hugging Face cache{offline}); "
                               f"download it once (`hf download {model}`) or set {setting}.model_path to a local "
                               f"copy") from None


def torch_device(device: str) -> str:
    """`auto` -> cuda where a GPU is visible, else cpu; anything else as given."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
