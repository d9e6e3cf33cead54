"""UMBRELA relevance grades (0-3) of (query, passage) pairs: which pooled passages nuggets are made from.

Follows UMBRELA (Upadhyay et al. 2024, arXiv:2406.06519; castorini/umbrela, the zero-shot "bing" prompt, which
reproduces Thomas et al. 2023): one prompt per pair, the 0-3 scale (0 nothing to do with the query, 1 related,
2 some answer, 3 the exact answer), the reply `##final score: <0-3>`, temperature 0 and 100 new tokens as
castorini/umbrela's judges default to. AutoNuggetizer (Pradeep et al., TREC 2024 RAG, section 4) creates nuggets
from the passages UMBRELA grades at least 1, "related" (`RELATED`).

Differences from castorini/umbrela, on purpose: a reply without a readable grade is re-asked (`ask_with_retries`)
and then recorded as None and counted, never read as grade 0 (umbrela falls back to 0 and flags the reply
invalid); only an integer 0-3 is a grade (`2.5`, `4` are unreadable); the first `final score` of a reply counts
(a base model may go on to invent further query-passage pairs), where umbrela takes the last match.

A grade is read in one of two modes (`mode`): `text` parses the published reply; `logprobs` asks the same
instructions ending in `##final score:` and takes the most likely of the first token's alternatives over 0-3 (our
variant, as the nugget assignment's logprobs mode: a model that does not write the format still gives a grade);
`auto` (the default) is logprobs where the engine returns log-probabilities, text elsewhere.

Every pair of one call goes to the engine in one batch (the re-asks too), and grades are cached on disk per topic
id, passage id, mode, prompt and the engine's identity (model by content and engine settings, as the response
cache: `rag.llm.cache.OutputCache`, `<cache_dir>/umbrela/<model>/<hh>/<hash>.json`, written atomically; the key
also holds the query, the passage text and the sampling settings), so a rerun asks only for what is missing.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval.judges import EVAL_PROMPT_DIR, cut_text
from rag.core.errors import ConfigError
from rag.core.hashing import stable_hash
from rag.core.parsing import normalise_quotes
from rag.llm.asking import ask_choices, ask_with_retries, make_params
from rag.llm.base import LLMEngine, LLMRequest
from rag.llm.cache import OutputCache
from rag.llm.factory import to_plain
from rag.prompts import load_prompt

log = logging.getLogger(__name__)

GRADES = (0, 1, 2, 3)
#: the published meaning of each grade (UMBRELA's prompt; TREC DL's names in brackets)
MEANING = {0: "nothing to do with the query (irrelevant)", 1: "related to the query but does not answer it (related)",
           2: "some answer, perhaps unclear or among extra information (highly relevant)",
           3: "dedicated to the query, with the exact answer (perfectly relevant)"}
#: AutoNuggetizer's cut: nuggets come from passages graded at least "related"
RELATED = 1

# "##final score: 2", "Final score (O): 2", {"final_score": 2}; the whole number as written, so 2.5 stays 2.5
_FINAL = re.compile(r"final[\s_]*score(?:\s*\(o\))?[\"'*\s]*[:=-]?[\"'*\s]*([+-]?\d+(?:\.\d+)?)(?![\d.]*\d)",
                    re.IGNORECASE)
_BARE = re.compile(r"[#*\s]*([+-]?\d+(?:\.\d+)?)[\s.*]*")


def parse_final_score(text: str) -> int | None:
    """The grade in a reply: its first `final score: N`, else a reply that is just a number; None unless the
    number is one of the integers 0-3 (`2.0` is 2; `1.5`, `4` and `-1` are unreadable)."""
    text = normalise_quotes(text or "")
    match = _FINAL.search(text) or _BARE.fullmatch(text)
    if match is None:
        return None
    whole = re.fullmatch(r"([+-]?\d+)(?:\.0+)?", match.group(1))
    value = int(whole.group(1)) if whole else None
    return value if value in GRADES else None


@dataclass(frozen=True)
class GradeItem:
    """One pair to grade: the topic and its query, the passage and its text."""

    qid: str
    query: str
    passage_id: str
    text: str


@dataclass
class Grade:
    qid: str
    passage_id: str
    #: 0-3, or None when no reply could be read after the re-asks
    grade: int | None
    cached: bool = False
    attempts: int = 0
    raw: str = ""


#: how a grade is read: "text" parses the published `##final score: N` reply (re-asked when unreadable);
#: "logprobs" reads it from the first token's alternatives over 0-3 after a prompt that ends in `##final score:`
#: (`rag.llm.asking.ask_choices`, as the nugget assignment's logprobs mode; the first non-blank token, as a
#: tokenizer may emit the space before the digit on its own); "auto": logprobs where the engine's class returns
#: log-probabilities (llama.cpp, vLLM, OpenAI-compatible), else text; an endpoint of such a class that returns none
#: for a whole batch (many proxies and hosted APIs) is graded in text mode from then on, said in one line
MODES = ("auto", "text", "logprobs")
LABELS = tuple(str(g) for g in GRADES)


class UmbrelaGrader:
    """UMBRELA's 0-3 relevance grade for many (query, passage) pairs: one batched ask, cached per pair."""

    def __init__(self, params: Mapping[str, Any] | None = None, max_retries: int = 2, retry_temperature: float = 0.2,
                 max_passage_chars: int | None = 4000, prompt: str = "umbrela", prompt_dir: str | None = None,
                 cache_dir: str | Path | None = None, mode: str = "auto", logprobs_prompt: str = "umbrela_logprobs",
                 top_logprobs: int = 20):
        if mode not in MODES:
            raise ConfigError(f"umbrela.mode={mode!r}: one of {', '.join(MODES)}")
        # castorini/umbrela's judges: temperature 0, 100 new tokens
        self.params = dict(params or {"temperature": 0.0, "max_tokens": 100})
        self.max_retries = max_retries
        self.retry_temperature = retry_temperature
        self.max_passage_chars = max_passage_chars
        self.prompt = prompt
        self.prompt_dir = str(prompt_dir or EVAL_PROMPT_DIR)
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.mode = mode
        #: the prompt of logprobs mode (the same instructions, ending where the grade's digit comes next)
        self.logprobs_prompt = logprobs_prompt
        #: alternatives read at the reply's first token in logprobs mode (OpenAI-compatible servers allow <= 20)
        self.top_logprobs = top_logprobs
        #: engines that `auto` found returning no log-probabilities (their model names): graded in text mode
        self.without_logprobs: set[str] = set()

    def resolved_mode(self, engine: LLMEngine) -> str:
        """`mode`, with auto settled for this engine: what its class can return, then what it did return."""
        if self.mode == "auto":
            usable = engine.supports_logprobs and engine.model not in self.without_logprobs
            return "logprobs" if usable else "text"
        return self.mode

    def prompt_name(self, engine: LLMEngine) -> str:
        return self.logprobs_prompt if self.resolved_mode(engine) == "logprobs" else self.prompt

    def prompt_hash(self, engine: LLMEngine) -> str:
        """What the prompt file says (system and user text): a changed prompt never reads old grades."""
        template = load_prompt(self.prompt_name(engine), prompt_dir=self.prompt_dir)
        return stable_hash([template.system, template.user], length=16)

    def cache_key(self, engine: LLMEngine, item: GradeItem) -> dict[str, Any]:
        """What decides a grade besides the engine's identity (which `OutputCache` adds)."""
        mode = self.resolved_mode(engine)
        return {"qid": item.qid, "passage_id": item.passage_id, "mode": mode, "prompt": self.prompt_hash(engine),
                "query": item.query, "passage": stable_hash(cut_text(item.text, self.max_passage_chars), length=16),
                "params": self.params if mode == "text" else {"top_logprobs": self.top_logprobs, "skip_blank": True}}

    @property
    def cache(self) -> OutputCache:
        return OutputCache(self.cache_dir, "umbrela")

    def grade(self, engine: LLMEngine, items: Sequence[GradeItem]) -> list[Grade]:
        """A grade per item, in order: cached ones from disk, the rest in one batch (text mode: plus batched
        re-asks)."""
        mode = self.resolved_mode(engine)
        template = load_prompt(self.prompt_name(engine), prompt_dir=self.prompt_dir)
        cache = self.cache
        out: list[Grade | None] = [None] * len(items)
        todo: list[tuple[int, dict[str, Any]]] = []
        for i, item in enumerate(items):
            key = self.cache_key(engine, item)
            entry = cache.get(engine, key)
            hit = entry.get("grade") if entry else None
            if hit in GRADES and not isinstance(hit, bool):
                out[i] = Grade(item.qid, item.passage_id, hit, cached=True)
            else:
                todo.append((i, key))
        if not todo:
            return [g for g in out if g is not None]
        # text: the published free-text `##final score:` reply; logprobs: one token, read from its alternatives
        params = make_params(self.params, engine, None)
        requests = [LLMRequest(messages=template.messages(query=items[i].query,
                                                          passage=cut_text(items[i].text, self.max_passage_chars)),
                               params=params, stop_plain=template.stop_plain) for i, _k in todo]
        if mode == "logprobs":
            chosen = ask_choices(engine, requests, LABELS, self.top_logprobs, desc="umbrela (logprobs)",
                                 skip_blank=True)
            if self.mode == "auto" and not any(c.alternatives for c in chosen):
                self.without_logprobs.add(engine.model)
                log.warning("umbrela: mode=auto: %s returned no log-probabilities for any of %d requests; grading "
                            "in text mode (the published `##final score:` reply). Set umbrela.mode=text to skip "
                            "the probe", engine.model, len(requests))
                return self.grade(engine, items)
            found = [(None if c.label is None else int(c.label), c.raw, 1, c.probabilities) for c in chosen]
        else:
            asked = ask_with_retries(engine, requests, lambda _j, text: parse_final_score(text), self.max_retries,
                                     self.retry_temperature, desc="umbrela")
            found = [(a.value, a.raw, a.attempts, None) for a in asked]
        for (i, key), (value, raw, attempts, probabilities) in zip(todo, found):
            out[i] = Grade(items[i].qid, items[i].passage_id, value, attempts=attempts, raw=raw)
            if value is not None:  # unreadable ones are asked again next time
                cache.put(engine, key, {"grade": value, "raw": raw,
                                        **({"probabilities": probabilities} if probabilities else {})})
        return [g for g in out if g is not None]


def build_grader(node: Any, cache_dir: Path) -> UmbrelaGrader:
    """The grader from the `umbrela` config node (`_target_` and its settings)."""
    from hydra.utils import get_class

    settings = dict(to_plain(node) or {})
    target = str(settings.pop("_target_", "eval.umbrela.UmbrelaGrader"))
    try:
        cls = get_class(target)
        return cls(**settings, cache_dir=cache_dir)
    except TypeError as err:
        raise ConfigError(f"umbrela: {err}") from None
    except Exception as err:  # noqa: BLE001 - Hydra raises several types for a bad path
        raise ConfigError(f"umbrela._target_={target}: cannot import ({err})") from None
