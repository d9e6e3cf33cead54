"""The attribution stage on its own: the embedding method on real MiniLM over real HotpotQA paragraphs, the LLM
support method with a scripted engine (its requests and the labels it reads), cited strategies left alone, the
agreement of two attributions and the gold-document citation metric."""

from __future__ import annotations

import math
import re
from functools import cache

import pytest
from hydra.errors import InstantiationException
from hydra.utils import instantiate

from rag.attribute.agreement import citation_agreement, cohen_kappa
from rag.attribute.base import build_attribution, prompt_candidates
from rag.attribute.embedding import EmbeddingAttribution
from rag.attribute.llm_support import LLMSupportAttribution, parse_support
from rag.core.text import split_sentences
from rag.data.questions import HotpotQAQuestions
from rag.metrics.citation import CitationGold
from rag.records import AnswerRecord, Question
from tests.conftest import DATA_DIR, compose_config
from tests.generate.helpers import ScriptedEngine

UNRELATED = "Bake the bread at two hundred degrees for forty minutes."


@cache
def hotpot_questions() -> tuple[Question, ...]:
    return tuple(HotpotQAQuestions(path="hotpotqa_musique/hotpotqa_train.json", data_dir=str(DATA_DIR)).load()[:3])


def record_over(answer: str, questions: tuple[Question, ...], **fields) -> AnswerRecord:
    """A record whose prompt held the questions' gold paragraphs (doc id = title), ranked in that order and put in
    the prompt inverted (`ordering=inverted`), as the pipeline writes it."""
    docs = [(title, text) for q in questions for title, text in zip(q.gold_doc_ids, q.gold_docs)]
    ranked = [{"passage_id": f"{t}#p0", "doc_id": t, "score": 10.0 - i, "rank": i + 1} for i, (t, _) in enumerate(docs)]
    prompt = list(reversed(docs))
    return AnswerRecord(id=questions[0].id, question=questions[0].question, answer=answer,
                        passages=[{"doc_IDs": [t], "passage": text} for t, text in prompt],
                        context=[f"{t}#p0" for t, _ in prompt], reranked=ranked,
                        gold_doc_ids=list(questions[0].gold_doc_ids), **fields)


@pytest.fixture(scope="module")
def embedding(hotpot_data) -> EmbeddingAttribution:
    """The shipped YAML's method (its threshold and MiniLM)."""
    method = build_attribution(compose_config(["attribution=embedding"]).attribution)
    assert isinstance(method, EmbeddingAttribution) and method.threshold == 0.5
    return method


def test_prompt_candidates_are_best_ranked_first_with_their_doc_ids(hotpot_data):
    record = record_over("x.", hotpot_questions())
    candidates = prompt_candidates(record)
    assert [c.rank for c in candidates] == list(range(1, 7))
    assert [c.doc_id for c in candidates] == [t for q in hotpot_questions() for t in q.gold_doc_ids]
    assert candidates[0].text == hotpot_questions()[0].gold_docs[0]


def test_embedding_cites_the_passage_a_sentence_was_copied_from_first(embedding):
    questions = hotpot_questions()
    nolan = split_sentences(questions[1].gold_docs[0])[0]  # "Christopher Edward Nolan ... film director, ..."
    haymo = split_sentences(questions[2].gold_docs[0])[0]
    record = record_over(f"{nolan} {haymo} {UNRELATED}", questions)
    assert embedding.attribute([record]) == 1
    first, second, third = record.sentences
    assert first["text"] == nolan and first["citations"][0] == "Christopher Nolan"
    assert second["text"] == haymo and second["citations"][0] == "Haymo of Faversham"
    assert first["support"][0] > 0.95 and second["support"][0] > 0.95  # the copied sentence itself
    assert third == {"text": UNRELATED, "citations": [], "support": []}  # nothing about baking in the prompt
    steps = record.steps["attribution"]
    assert steps["method"] == "embedding" and steps["threshold"] == 0.5 and steps["embedder"]
    assert embedding.threshold_source.startswith("untuned")
    strength = steps["strength"]
    assert len(strength) == 3 and all(len(row) == 6 for row in strength)
    for sentence, row in zip(record.sentences, strength):  # the threshold respected, at most three, strongest first
        docs = [c.doc_id for c in prompt_candidates(record)]
        above = sorted((s, d) for s, d in zip(row, docs) if s >= 0.5)[::-1]
        assert sentence["citations"] == [d for _, d in above][:3]
        assert sentence["support"] == sorted(sentence["support"], reverse=True)
        assert all(s >= 0.5 for s in sentence["support"]) and len(sentence["citations"]) <= 3


def test_embedding_caps_at_three_and_a_higher_threshold_cites_less(hotpot_data):
    questions = hotpot_questions()
    node = compose_config(["attribution=embedding", "attribution.threshold=-1.0"]).attribution
    everything = instantiate(node)
    record = record_over(split_sentences(questions[0].gold_docs[0])[0], questions)
    everything.attribute([record])
    assert len(record.sentences[0]["citations"]) == 3  # six passages over a threshold of -1: three kept
    assert record.sentences[0]["citations"][0] == "Alû"
    strict = instantiate(node, threshold=0.99)
    record = record_over(split_sentences(questions[0].gold_docs[0])[0], questions)
    strict.attribute([record])
    assert record.sentences[0]["citations"] == ["Alû"]


def test_post_cite_cites_every_sentence_its_best_passage_as_alce_posthoc_does(embedding):
    """attribution=post_cite (ALCE's PostCite): one citation per sentence, the passage of highest similarity, even for
    a sentence no passage supports; the same strengths as attribution=embedding, which cites that sentence nothing."""
    questions = hotpot_questions()
    nolan = split_sentences(questions[1].gold_docs[0])[0]
    post_cite = build_attribution(compose_config(["attribution=post_cite"]).attribution)
    assert isinstance(post_cite, EmbeddingAttribution)
    assert (post_cite.min_citations, post_cite.max_citations, post_cite.threshold) == (1, 1, 0.5)
    assert post_cite.passage_sentences is False  # ALCE: the whole passage
    whole = instantiate(compose_config(["attribution=embedding", "attribution.passage_sentences=false"]).attribution)
    record, plain = (record_over(f"{nolan} {UNRELATED}", questions) for _ in range(2))
    post_cite.attribute([record])
    whole.attribute([plain])
    assert record.steps["attribution"]["strength"] == plain.steps["attribution"]["strength"]
    # independently: sentence-transformers' own normalised embeddings, the argmax over whole passages (ALCE)
    model = post_cite.embedder.model
    texts = [c.text for c in prompt_candidates(record)]
    for sentence in record.sentences:
        vectors = model.encode([sentence["text"], *texts], normalize_embeddings=True)
        cosine = vectors[1:] @ vectors[0]
        assert sentence["citations"] == [prompt_candidates(record)[int(cosine.argmax())].doc_id]
        assert sentence["support"][0] == pytest.approx(float(cosine.max()), abs=1e-3)
    docs = [c.doc_id for c in prompt_candidates(record)]
    for sentence, row in zip(record.sentences, record.steps["attribution"]["strength"]):
        best = max(range(len(row)), key=lambda c: (row[c], -c))
        assert sentence["citations"] == [docs[best]] and sentence["support"] == [round(row[best], 4)]
    assert record.sentences[0]["citations"] == ["Christopher Nolan"]
    assert record.sentences[1]["support"][0] < 0.5 and plain.sentences[1]["citations"] == []  # cited all the same
    embedding.attribute([other := record_over(UNRELATED, questions)])
    assert other.sentences[0]["citations"] == []  # the embedding method's threshold cites it nothing
    assert record.steps["attribution"]["min_citations"] == 1
    # more than one: the best always, the rest at the threshold (ours); bounds are checked when built
    wider = instantiate(compose_config(["attribution=post_cite", "attribution.max_citations=3"]).attribution)
    record = record_over(UNRELATED, questions)
    wider.attribute([record])
    assert len(record.sentences[0]["citations"]) == 1
    with pytest.raises(InstantiationException, match=r"attribution.min_citations must be in 0..max_citations \(1\), got 2"):
        instantiate(compose_config(["attribution=post_cite", "attribution.min_citations=2"]).attribution)


def test_cited_strategies_empty_answers_and_none_are_left_untouched(embedding):
    own = [{"text": "Nolan directs films.", "citations": ["Sathish Kalathil"], "nugget": "n", "confidence": 0.9}]
    crucible = record_over("Nolan directs films.", hotpot_questions(), sentences=[dict(s) for s in own],
                           steps={"crucible": 1})
    empty = record_over("", hotpot_questions())
    failed = record_over("Some words.", hotpot_questions(), failure="empty_answer")
    assert embedding.attribute([crucible, empty, failed]) == 0
    assert crucible.sentences == own and crucible.steps == {"crucible": 1}
    assert empty.sentences is None and failed.sentences is None
    plain = record_over("Nolan directs films.", hotpot_questions())
    none = build_attribution(compose_config([]).attribution)
    assert not none.active and none.attribute([plain]) == 0 and plain.sentences is None


# -- the LLM support judgment, scripted -------------------------------------------------------------------------
_ASKED = re.compile(r"Passage: (?P<passage>.*)\nStatement: (?P<sentence>.*?)\n", re.DOTALL)


def scripted_support() -> ScriptedEngine:
    """support when the passage holds the statement, partial_support when it names the statement's first two
    words, else not_support; the first question about bread gets a reply with no label (re-asked)."""
    unlabelled = [True]

    def reply(prompt: str, _request) -> str:
        asked = _ASKED.search(prompt)
        passage, sentence = asked["passage"], asked["sentence"]
        if sentence == UNRELATED and unlabelled:
            unlabelled.pop()
            return "Hmm, let me think."
        if sentence.rstrip(".") in passage:
            return "support"
        if " ".join(sentence.split()[:2]) in passage:
            return "Partially supported."
        return "not_support"

    return ScriptedEngine(reply)


def test_llm_support_asks_every_pair_and_cites_support_before_partial(hotpot_data):
    questions = hotpot_questions()
    nolan = split_sentences(questions[1].gold_docs[0])[0]
    claim = "Christopher Edward Nolan won the Tour de France."  # first two words in Nolan's paragraph: partial
    record = record_over(f"{nolan} {claim} {UNRELATED}", questions)
    method = build_attribution(compose_config(["attribution=llm_support", "attribution.max_candidates=4"]).attribution)
    assert isinstance(method, LLMSupportAttribution) and method.uses_llm
    engine = scripted_support()
    assert method.attribute([record], lambda: engine) == 1
    # 3 sentences x the 4 best-ranked passages, in one batch, then the one unreadable reply re-asked
    first_batch = engine.prompts[:12]
    best = [c.text for c in prompt_candidates(record)[:4]]
    assert [_ASKED.search(p)["passage"] for p in first_batch] == best * 3
    assert [_ASKED.search(p)["sentence"] for p in first_batch] == [nolan] * 4 + [claim] * 4 + [UNRELATED] * 4
    assert len(engine.prompts) == 13 and "Thakur" not in first_batch[0]  # the source stays in the prompt file
    assert "support (everything the statement says" in first_batch[0]
    steps = record.steps["attribution"]
    assert steps["method"] == "llm_support" and steps["prompt"] == "attribution_support" and steps["unreadable"] == 0
    assert steps["labels"][0] == ["not_support", "not_support", "support", "not_support"]  # Nolan is ranked third
    assert steps["labels"][1] == ["not_support", "not_support", "partial_support", "not_support"]
    assert steps["labels"][2] == ["not_support"] * 4
    assert steps["strength"][0] == [0.0, 0.0, 1.0, 0.0, 0.0, 0.0]  # passages past max_candidates: not asked, 0
    assert [s["citations"] for s in record.sentences] == [["Christopher Nolan"], ["Christopher Nolan"], []]
    assert [s["support"] for s in record.sentences] == [[1.0], [0.5], []]
    strict = build_attribution(compose_config(["attribution=llm_support", "attribution.cite_partial=false"]).attribution)
    again = record_over(f"{nolan} {claim}", questions)
    strict.attribute([again], scripted_support)
    assert [s["citations"] for s in again.sentences] == [["Christopher Nolan"], []]


@pytest.mark.parametrize(("reply", "label"), [
    ("support", "support"), ("Support.", "support"), ("partial_support", "partial_support"),
    ("Partial support", "partial_support"), ("not_support", "not_support"), ("Not supported", "not_support"),
    ("**not_support**", "not_support"), ("Fully supported", "support"), ("no", "not_support"),
    ("Label: partially", "partial_support"), ("I cannot tell", None), ("", None)])
def test_support_labels_are_read_in_the_nugget_assignment_spellings(reply, label):
    assert parse_support(reply) == label


# -- agreement and the gold-document metric ----------------------------------------------------------------------
def test_agreement_of_two_attributions_counts_overlap_and_kappa(hotpot_data):
    questions = hotpot_questions()
    base = record_over("One. Two. Three.", questions)
    docs = [c.doc_id for c in prompt_candidates(base)]

    def with_citations(cites: list[list[str]]) -> AnswerRecord:
        return base.model_copy(update={"sentences": [{"text": t, "citations": c}
                                                     for t, c in zip(("One.", "Two.", "Three."), cites)]})

    a = with_citations([[docs[0], docs[1]], [docs[2]], []])
    b = with_citations([[docs[1]], [docs[3]], []])
    out = citation_agreement([a], [b])
    assert out["sentences"] == 3 and out["pairs"] == 18 and out["answers_skipped"] == 0
    assert out["overlap"] == pytest.approx(1 / 3) and out["both_uncited"] == pytest.approx(1 / 3)
    # 18 pairs: a cites 3, b cites 2, both cite 1; agree on 1 + 14 = 15
    observed, pa, pb = 15 / 18, 3 / 18, 2 / 18
    chance = pa * pb + (1 - pa) * (1 - pb)
    assert out["kappa"] == pytest.approx((observed - chance) / (1 - chance))
    assert citation_agreement([a], [a])["kappa"] == 1.0
    other_split = with_citations([[], [], []]).model_copy(update={"sentences": [{"text": "One. Two.", "citations": []}]})
    assert citation_agreement([a], [other_split])["answers_skipped"] == 1
    assert math.isnan(cohen_kappa([], []))


def test_gold_citation_precision_recall_and_coverage(hotpot_data):
    questions = hotpot_questions()  # the first question's gold documents: Alû, Lilu (mythology)
    record = record_over("unused", questions, sentences=[
        {"text": "A.", "citations": ["Alû", "Christopher Nolan"]},
        {"text": "B.", "citations": ["Sathish Kalathil"]},
        {"text": "C.", "citations": []}])
    scores = CitationGold().score_record(record, "document")
    assert scores == {"citation_coverage": pytest.approx(2 / 3), "citation_gold_recall": pytest.approx(1 / 3),
                      "citation_gold_precision": pytest.approx(1 / 3)}
    markers = record_over("Alû is a spirit [6]. Nolan [1].", questions)  # [6]: the prompt's sixth, Alû (inverted)
    assert CitationGold().score_record(markers, "document") == {
        "citation_coverage": 1.0, "citation_gold_recall": 0.5, "citation_gold_precision": 0.5}
    assert CitationGold().score_record(record_over("", questions), "document") == {}
