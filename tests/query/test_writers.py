"""The LLM query writers with a scripted engine over real LiveRAG dev questions: what each writer searches, one
batch per step, PreQRAG's rule and routing, fallbacks that never crash, and keys that follow prompts and settings.

The scripted engine replies by which prompt it sees (and to which question), so every expected query is known.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from hydra.utils import instantiate

from rag.core.errors import ConfigError
from rag.llm.base import LLMRequest
from rag.prompts import PROMPT_DIR
from rag.query.base import Query
from rag.query.decompose import DecomposeWriter, parse_subquestions
from rag.query.hyde import HyDEWriter, parse_passage
from rag.query.preqrag import PreQRAGWriter, classify
from rag.query.rewrite import RewriteWriter, parse_rewrite
from rag.records import Question
from tests.conftest import compose_config
from tests.generate.helpers import CallLog, ScriptedEngine, dev_questions, question

HYDE_CUE = "could plausibly be true"
SPARSE_CUE = "query for a web search engine"
DENSE_CUE = "Remove the premise"
DECOMPOSE_CUE = "simpler questions, each one answerable"


def asked_question(prompt: str) -> str:
    """The question a rendered prompt is about: its "Question:" line, else (HyDE) its last line."""
    lines = re.findall(r"^Question: (.*)$", prompt, flags=re.MULTILINE)
    return lines[-1] if lines else prompt.strip().splitlines()[-1]


def head(q: str, n: int = 30) -> str:
    return q[:n].strip()


def hypothesis(q: str) -> str:
    return f"A passage that answers: {head(q, 40)}"


def subs(q: str) -> list[str]:
    return [f"What is the first part of {head(q)}?", f"What is the second part of {head(q)}?"]


def good_reply(prompt: str, request: LLMRequest) -> str:
    """Well-formed replies in each prompt's requested format (with the decorations chat models add)."""
    q = asked_question(prompt)
    if HYDE_CUE in prompt:
        return hypothesis(q)
    if SPARSE_CUE in prompt:
        return f'**Rewritten question:** "keywords {head(q)}"'
    if DENSE_CUE in prompt:
        return f"Rewritten question: natural {head(q)}?\nThis removes the premise."
    if DECOMPOSE_CUE in prompt:
        return "\n".join(f"Question{i}: {s}" for i, s in enumerate(subs(q), start=1))
    raise AssertionError(f"unexpected prompt: {prompt[:200]}")


@pytest.fixture
def three(data_dir) -> list[Question]:
    """Dev questions 1 and 3 (multi-document by PreQRAG's rule) and 2 (single-document)."""
    return [question("1"), question("2"), question("3")]


# -- HyDE -------------------------------------------------------------------------------------------------------
def test_hyde_searches_the_question_and_the_hypothetical_answer_in_one_batch(three, monkeypatch):
    engine = ScriptedEngine(good_reply)
    calls = CallLog(engine, monkeypatch)
    writer = HyDEWriter()
    sets = writer.write(three, engine)
    assert calls.calls == [("query hyde", 3)]
    for q, s in zip(three, sets):
        assert s.queries == [Query(q.question), Query(hypothesis(q.question))]
        assert all(x.source is None and x.group == 0 for x in s.queries)
        assert s.steps["hypothetical_answer"] == hypothesis(q.question)
        assert not s.groups
    # GRAG's prompt structure: the instruction as the system turn, the bare question as the user turn
    assert engine.prompts[0].endswith("\n\n" + three[0].question)
    assert writer.stats["fallbacks"] == 0 and writer.stats["questions"] == 3


@pytest.mark.parametrize(("reply", "expected"), [
    ("  Hypothetical answer: Dementia is a broad term.\n", "Dementia is a broad term."),
    ("Passage - two lines\nof text", "two lines\nof text"), ("answers vary", "answers vary"), (" \n ", None),
])
def test_parse_passage(reply, expected):
    assert parse_passage(reply) == expected


def test_hyde_without_the_question_searches_the_answer_only(three):
    sets = HyDEWriter(include_question=False).write(three, ScriptedEngine(good_reply))
    assert [s.queries for s in sets] == [[Query(hypothesis(q.question))] for q in three]


# -- rewrite ----------------------------------------------------------------------------------------------------
def test_rewrite_gives_one_query_per_source_in_one_batch(three, monkeypatch):
    engine = ScriptedEngine(good_reply)
    calls = CallLog(engine, monkeypatch)
    sets = RewriteWriter().write(three, engine)
    assert calls.calls == [("query rewrite", 6)]
    for q, s in zip(three, sets):
        assert s.queries == [Query(f"keywords {head(q.question)}", "sparse"),
                             Query(f"natural {head(q.question)}?", "dense")]
        assert s.steps["rewrites"] == {"sparse": f"keywords {head(q.question)}", "dense": f"natural {head(q.question)}?"}
    assert Counter(p.count(SPARSE_CUE) for p in engine.prompts) == Counter({1: 3, 0: 3})


def test_rewrite_source_names_and_the_question_follow_the_settings(three):
    writer = RewriteWriter(sparse_source="bm25", dense_source="e5", include_question=True)
    s = writer.write(three[:1], ScriptedEngine(good_reply))[0]
    assert [(x.source, x.group) for x in s.queries] == [(None, 0), ("bm25", 0), ("e5", 0)]
    assert s.queries[0].text == three[0].question


@pytest.mark.parametrize(("reply", "expected"), [
    ('**Rewrite Question:** "dementia vs alzheimer timing"', "dementia vs alzheimer timing"),
    ("Sure, here is the rewritten query:\n\nRewritten query: wheat protein hair", "wheat protein hair"),
    ("  plain rewrite  \nextra explanation", "plain rewrite"),
    ("", None), ("  \n**:**\n", None), ("Rewritten question:", None),
])
def test_parse_rewrite(reply, expected):
    assert parse_rewrite(reply) == expected


# -- decompose --------------------------------------------------------------------------------------------------
def test_decompose_makes_sub_questions_groups_and_keeps_the_question(three, monkeypatch):
    engine = ScriptedEngine(good_reply)
    calls = CallLog(engine, monkeypatch)
    writer = DecomposeWriter()
    sets = writer.write(three, engine)
    assert calls.calls == [("query decompose", 3)]
    for q, s in zip(three, sets):
        assert s.groups == subs(q.question)
        assert s.queries == [Query(q.question, None, 0), Query(subs(q.question)[0], None, 1),
                             Query(subs(q.question)[1], None, 2)]
        assert s.steps["sub_questions"] == subs(q.question)
    assert writer.per_group_k is None and writer.single_k is None


def test_decompose_caps_and_dedupes_sub_questions(three):
    reply = "Question1: A?\nQuestion 2: **B?**\nQuestion3: a?\nQuestion4: C?\nQuestion5: D?"
    writer = DecomposeWriter(max_subquestions=3, include_question=False)
    s = writer.write(three[:1], ScriptedEngine(lambda p, r: reply))[0]
    assert s.groups == ["A?", "B?", "C?"]
    assert [(x.text, x.group) for x in s.queries] == [("A?", 1), ("B?", 2), ("C?", 3)]
    assert "at most 3 simpler questions" in writer.prompt("preqrag_decompose").messages(
        question="q", max_subquestions=3)[-1]["content"]


@pytest.mark.parametrize(("reply", "expected"), [
    ('Question1: "Who built it?"\nQuestion2: When was it built?', ["Who built it?", "When was it built?"]),
    ("**Question 1:** Who built it? (the bridge)\n**Question 2:** Why?", ["Who built it?", "Why?"]),
    ("1. Who built it?\n2) When was it built?", ["Who built it?", "When was it built?"]),
    ("Question1: no question mark here", None), ("I cannot split this question.", None), ("", None),
])
def test_parse_subquestions(reply, expected):
    assert parse_subquestions(reply, 4) == expected


# -- PreQRAG ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "label"), [
    ("What is the difference between dementia and Alzheimer's disease?", "multi"),
    ("How does wheat protein work differently in hair products?", "multi"),  # substring "differ"
    ("Can you compare storage properties of saline and batteries?", "multi"),
    ("What is HyDE and how does it work?", "multi"),  # two wh-words
    ("Which company focused more on male dancers?", "multi"),  # one wh-word, but starts with "which"
    ("Why do some training programs need realistic physical controls?", "single"),
    ("whatever somehow happened to the dancers?", "single"),  # wh-words count as whole words only
    ("construction industry types safety monitoring methods", "single"),
])
def test_classify_follows_preqrags_rule(text, label):
    assert classify(text).label == label


def test_classify_reports_which_check_fired():
    assert classify("Which company focused more on male dancers?").rule == "starts with 'which'"
    assert classify("What is HyDE and how does it work?").rule == "2 wh-words (what, how)"
    assert classify("Is it between a and b?").rule == "comparison keyword 'between'"


def test_classify_on_the_dev_set(data_dir):
    """PreQRAG's rule over the 295 dev questions: the counts pin the rule (a changed keyword or check moves them)."""
    labels = Counter((q.hop, classify(q.question).label) for q in dev_questions())
    assert labels == Counter({("single", "single"): 110, ("multi", "multi"): 82, ("multi", "single"): 82,
                              ("single", "multi"): 21})


def test_preqrag_routes_by_class_in_one_batch_and_records_it(three, monkeypatch):
    engine = ScriptedEngine(good_reply)
    calls = CallLog(engine, monkeypatch)
    writer = PreQRAGWriter()
    sets = writer.write(three, engine)
    assert calls.calls == [("query preqrag", 4)]  # one decomposition each for 1 and 3, two rewrites for 2
    assert [s.steps["class"] for s in sets] == ["multi", "single", "multi"]
    assert sets[0].steps["class_rule"] == "comparison keyword 'differ'"
    for s, q in ((sets[0], three[0]), (sets[2], three[2])):
        assert s.groups == subs(q.question)
        assert s.queries == [Query(sub, None, g) for g, sub in enumerate(subs(q.question), start=1)]
    assert not sets[1].groups
    assert [(x.source, x.group) for x in sets[1].queries] == [("sparse", 0), ("dense", 0)]
    assert writer.per_group_k == 3 and writer.single_k == 5
    assert writer.stats == {"questions": 3, "outputs": 4, "retried": 0, "fallbacks": 0, "multi": 2, "single": 1}
    json.dumps([s.to_json() for s in sets])  # the answer records' `queries`


def test_preqrag_all_single_or_all_multi(data_dir, monkeypatch):
    singles = [q for q in dev_questions() if classify(q.question).label == "single"][:4]
    engine = ScriptedEngine(good_reply)
    calls = CallLog(engine, monkeypatch)
    sets = PreQRAGWriter().write(singles, engine)
    assert calls.calls == [("query preqrag", 8)]
    assert all(s.steps["class"] == "single" and not s.groups for s in sets)


# -- fallbacks --------------------------------------------------------------------------------------------------
def garbage(prompt: str, request: LLMRequest) -> str:
    """An unusable reply for every prompt: blank for HyDE and rewrites, no sub-question for decomposition."""
    return "I am not able to split that." if DECOMPOSE_CUE in prompt else "  \n"


@pytest.mark.parametrize("writer_cls", [HyDEWriter, RewriteWriter, DecomposeWriter, PreQRAGWriter])
def test_unparsable_output_falls_back_to_the_question(three, writer_cls, monkeypatch):
    engine = ScriptedEngine(garbage)
    calls = CallLog(engine, monkeypatch)
    writer = writer_cls(max_retries=1)
    sets = writer.write(three, engine)
    first = calls.calls[0][1]
    assert [n for _, n in calls.calls] == [first, first]  # one batch, then one re-ask batch of the failures
    assert calls.calls[1][0].endswith("retry 1")
    for q, s in zip(three, sets):
        assert s.queries == [Query(q.question)] and not s.groups
        assert s.steps["fallbacks"]
        assert "raw" in s.steps
    assert writer.stats["fallbacks"] == first and writer.stats["retried"] == first


def test_one_failed_rewrite_falls_back_for_its_source_only(three):
    def reply(prompt: str, request: LLMRequest) -> str:
        return "" if SPARSE_CUE in prompt else good_reply(prompt, request)

    writer = RewriteWriter(max_retries=0)
    s = writer.write(three[:1], ScriptedEngine(reply))[0]
    assert s.queries == [Query(three[0].question, "sparse"), Query(f"natural {head(three[0].question)}?", "dense")]
    assert s.steps["fallbacks"] == ["sparse"] and writer.stats["fallbacks"] == 1


def test_a_reask_that_parses_is_no_fallback(three, monkeypatch):
    seen: list[tuple[int, float]] = []

    def reply(prompt: str, request: LLMRequest) -> str:
        seen.append((request.params.seed, request.params.temperature))
        return garbage(prompt, request) if request.params.seed == 0 else good_reply(prompt, request)

    engine = ScriptedEngine(reply)
    calls = CallLog(engine, monkeypatch)
    writer = DecomposeWriter()
    sets = writer.write(three, engine)
    assert [n for _, n in calls.calls] == [3, 3]
    assert [s.groups for s in sets] == [subs(q.question) for q in three]
    assert writer.stats["fallbacks"] == 0 and writer.stats["retried"] == 3
    assert seen[:3] == [(0, 0.0)] * 3 and all(seed > 0 and t >= 0.2 for seed, t in seen[3:])


def test_no_retries_and_no_crash_without_engine_or_questions(three, monkeypatch):
    engine = ScriptedEngine(garbage)
    calls = CallLog(engine, monkeypatch)
    assert HyDEWriter(max_retries=0).write(three, engine)[0].queries == [Query(three[0].question)]
    assert calls.n == 1
    assert PreQRAGWriter().write([], engine) == [] and calls.n == 1
    with pytest.raises(ConfigError, match="query=hyde"):
        HyDEWriter().write(three, None)
    with pytest.raises(ConfigError, match="max_retries"):
        HyDEWriter(max_retries=-1)


# -- keys -------------------------------------------------------------------------------------------------------
def _prompt_copy(tmp_path: Path, name: str, edit: str | None = None) -> str:
    folder = tmp_path / "prompts"
    folder.mkdir(parents=True, exist_ok=True)
    for f in PROMPT_DIR.glob("*.yaml"):
        shutil.copy(f, folder / f.name)
    if edit is not None:
        path = folder / f"{name}.yaml"
        path.write_text(path.read_text(encoding="utf-8").replace("Question: {{", edit + " {{", 1), encoding="utf-8")
    return str(folder)


@pytest.mark.parametrize(("writer_cls", "prompt"), [
    (HyDEWriter, None), (RewriteWriter, "preqrag_rewrite_dense"), (DecomposeWriter, "preqrag_decompose"),
    (PreQRAGWriter, "preqrag_rewrite_sparse"), (PreQRAGWriter, "preqrag_decompose"),
])
def test_key_follows_prompt_text(tmp_path, writer_cls, prompt):
    same = writer_cls(prompt_dir=_prompt_copy(tmp_path / "a", prompt or "hyde"))
    assert same.key == writer_cls().key
    if prompt is None:  # HyDE's prompt has no "Question:": edit its system line
        folder = _prompt_copy(tmp_path / "b", "hyde")
        path = Path(folder) / "hyde.yaml"
        path.write_text(path.read_text(encoding="utf-8").replace("concise", "brief"), encoding="utf-8")
    else:
        folder = _prompt_copy(tmp_path / "b", prompt, edit="Q:")
    assert writer_cls(prompt_dir=folder).key != writer_cls().key


@pytest.mark.parametrize(("writer_cls", "change"), [
    (HyDEWriter, {"include_question": False}), (HyDEWriter, {"temperature": 0.5}), (HyDEWriter, {"max_retries": 0}),
    (RewriteWriter, {"sparse_source": "bm25"}), (RewriteWriter, {"max_tokens": 64}),
    (DecomposeWriter, {"max_subquestions": 3}), (DecomposeWriter, {"per_group_k": 3}),
    (PreQRAGWriter, {"max_subquestions": 3}), (PreQRAGWriter, {"single_k": 10}),
    (PreQRAGWriter, {"rewrite_max_tokens": 64}), (PreQRAGWriter, {"dense_source": "e5"}),
])
def test_key_follows_settings(writer_cls, change):
    assert writer_cls().key == writer_cls().key
    assert writer_cls(**change).key != writer_cls().key
    assert writer_cls().key.startswith(f"{writer_cls.name}-")


def test_writers_have_distinct_keys():
    keys = {cls().key for cls in (HyDEWriter, RewriteWriter, DecomposeWriter, PreQRAGWriter)}
    assert len(keys) == 4


# -- configs ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "cls", "attrs"), [
    ("hyde", HyDEWriter, {"include_question": True}),
    ("rewrite", RewriteWriter, {"include_question": False, "sources": {"sparse": "sparse", "dense": "dense"}}),
    ("decompose", DecomposeWriter, {"max_subquestions": 2, "include_question": True, "per_group_k": None}),
    ("preqrag", PreQRAGWriter, {"per_group_k": 3, "single_k": 5, "include_question": False}),
])
def test_query_configs_build_the_writers(name, cls, attrs):
    text = (Path(__file__).resolve().parents[2] / "conf" / "query" / f"{name}.yaml").read_text(encoding="utf-8")
    assert "@package" not in text
    writer = instantiate(compose_config([f"query={name}"]).query)
    assert type(writer) is cls and writer.name == name and writer.uses_llm
    assert writer.key == cls().key  # the YAML's values are the class defaults
    for attr, value in attrs.items():
        assert getattr(writer, attr) == value
