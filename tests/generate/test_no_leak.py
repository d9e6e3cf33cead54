"""Issue 23, item 5 and issue 35: no prompt of any generator holds what the evaluation knows and the run should
not: the gold answer of an evaluated question, a judge's nugget of an evaluated question, or gold document text
other than as a passage the run's own retrieval returned (the "insider knowledge" effect: nugget-first generators
scored by nugget judges inflate when the judge's material leaks into generation). Every shipped generator, from
its YAML, on real dev questions, with a scripted engine that records every prompt. The judges' nuggets of every
evaluated question are made first, the way the nugget judges make them (`AutoNuggetizer.nugget_set`, from the
gold documents), into the cache folder the generators are given, as in a run whose judges share its cache."""

from __future__ import annotations

import json
import re
from functools import lru_cache

import pytest
from hydra.utils import instantiate

from eval.nuggets import AutoNuggetizer
from rag.core.hashing import stable_hash
from rag.generate.base import GenerationContext
from rag.judge.nugget_sets import NuggetSet
from rag.records import AnswerRecord
from tests.conftest import compose_config
from tests.generate.helpers import DATA_DIR, ScriptedEngine, dev_questions, items_for

GENERATORS = ("simple", "trustrag", "instructrag", "astuterag", "iterdrag", "crucible", "crucible_verified",
              "ginger", "extractive", "grag", "topclust", "ircot", "search_o1", "search_r1")
#: a run over the first 275 dev questions (all but the default demonstration split), three of them in this batch
EVALUATED = 275
WINDOW = 12  # words: a run of gold-document text this long in a prompt must come from a given passage


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _windows(text: str, n: int = WINDOW) -> set[tuple[str, ...]]:
    words = _words(text)
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def _reply(prompt: str, _request) -> str:
    """Plausible output for every step: a list, labels, a cited sentence, a final answer line."""
    return ("1. The documents state the fact [1].\n2. Another point [2].\nFinal answer: It is stated in the "
            "documents. <ANSWER>It is stated.</ANSWER>")


class RecordingEngine(ScriptedEngine):
    supports_logprobs = True


@lru_cache(maxsize=1)
def _gold_windows() -> dict[tuple[str, ...], str]:
    """Every 12-word window of the evaluated questions' gold documents -> the question id."""
    out: dict[tuple[str, ...], str] = {}
    for q in dev_questions()[:EVALUATED]:
        for doc in q.gold_docs:
            out.update(dict.fromkeys(_windows(doc), q.id))
    return out


def _nuggetizer_reply(prompt: str, _request) -> str:
    """A judge model's nuggets for a topic: statements no passage holds (named by a hash of the prompt's query),
    all vital."""
    if "Update the list of atomic nuggets" in prompt:
        tag = stable_hash(re.search(r"Query: (.*)", prompt).group(1), length=10)
        return json.dumps({"nuggets": [f"the judge expects fact {tag} to be stated", f"judge nugget {tag} says more"]})
    return json.dumps({"labels": ["vital"] * len(json.loads(re.search(r"Nuggets: (\[.*\])", prompt).group(1)))})


@pytest.fixture(scope="module")
def judged_cache(tmp_path_factory) -> tuple[str, NuggetSet]:
    """A cache folder holding the nugget judges' nuggets of every evaluated question, and those nuggets."""
    cache = tmp_path_factory.mktemp("judged") / "cache"
    records = [AnswerRecord(id=q.id, question=q.question, gold_docs=list(q.gold_docs))
               for q in dev_questions()[:EVALUATED]]
    nuggets = AutoNuggetizer().nugget_set(records, ScriptedEngine(_nuggetizer_reply), cache)
    assert len(nuggets.usable()) == EVALUATED and any((cache / "nuggets").rglob("*.json"))
    return str(cache), nuggets


@pytest.mark.parametrize("name", GENERATORS)
def test_no_prompt_holds_gold_answers_judge_nuggets_or_unretrieved_gold_text(name, judged_cache):
    evaluated = dev_questions()[:EVALUATED]
    items = items_for(("1", "2", "3"))
    cache_dir, nuggets = judged_cache
    gen = instantiate(compose_config([f"generator={name}"]).generator)
    engine = RecordingEngine(_reply)
    ctx = GenerationContext(engine=engine, cache_dir=cache_dir, data_dir=str(DATA_DIR), evaluated=tuple(evaluated))
    results = gen.generate(items, ctx)
    assert engine.prompts or name == "extractive", name  # extractive asks no LLM: its answers are checked
    given = " ".join(p.passage.text for item in items for p in item.passages)
    given_words = " ".join(_words(given))
    seen = "\n".join(engine.prompts + [r.answer for r in results])
    seen_words = " ".join(_words(seen))
    for q in evaluated:
        answer = " ".join(_words(q.answer or ""))
        if len(answer.split()) >= 6 and answer not in given_words:
            assert answer not in seen_words, f"{name}: the gold answer of question {q.id} is in a prompt"
    for topic in nuggets.usable():
        for nugget in topic.nuggets:
            text = " ".join(_words(nugget["text"]))
            assert text not in seen_words, f"{name}: a judge's nugget of question {topic.qid} is in a prompt"
    leaked = {_gold_windows()[w] for w in _windows(seen) - _windows(given) if w in _gold_windows()}
    assert not leaked, f"{name}: gold-document text of question(s) {sorted(leaked)} that no given passage holds"
