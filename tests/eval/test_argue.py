"""ARGUE's sentence flow (Mayfield et al. 2024, as Auto-ARGUE runs it): every path on hand-worked sentences with
mixed citations, the four per-answer metrics, unreadable judgments that can only lower a score, and the judge
end to end on a scripted engine (which steps are asked of which sentences, in how many batches)."""

from __future__ import annotations

import json
import math
import re

import pytest
from evaltools import ScriptedEngine, factory_with, judge_root, prompt_text

from eval.argue import (
    ArgueFlow,
    ArgueJudge,
    JudgedSentence,
    answer_sentences,
    argue_scores,
    parse_yes_no,
    sentence_outcome,
)
from eval.nuggets import AutoNuggetizer
from rag.judge.base import EvalContext
from rag.judge.nugget_sets import nugget_set_hash
from rag.judge.run import evaluate_records
from rag.llm.base import Completion, LLMRequest
from rag.records import AnswerRecord


def _s(citations=(), attested=(), negative=None, needs=None, first=None, matched=()) -> JudgedSentence:
    return JudgedSentence("x.", list(citations), list(attested), negative, needs, first, set(matched))


# (sentence, verdict, credited, judged, correct)
PATHS = [
    (_s(["d1"], [True], matched={0}), "reward", {0}, True, True),
    (_s(["d1", "d2"], [True, False], matched={1}), "penalty", set(), True, False),   # any citation fails
    (_s(["d1", "d2"], [True, True]), "ignore", set(), True, True),                   # supported, no nugget
    (_s(negative=True, matched={2}), "reward", {2}, True, True),                     # negative, confirmed
    (_s(negative=True), "penalty", set(), True, False),                               # negative, unconfirmed
    (_s(negative=False, needs=True, first=True, matched={3}), "penalty", set(), True, False),  # uncited claim
    (_s(negative=False, needs=True, first=False), "ignore", set(), False, False),     # claim made before
    (_s(negative=False, needs=False, matched={3}), "ignore", set(), False, False),    # needs no citation
]


@pytest.mark.parametrize("sentence,verdict,credited,judged,correct", PATHS)
def test_every_path_of_the_flow(sentence, verdict, credited, judged, correct):
    out = sentence_outcome(sentence)
    assert (out.verdict, set(out.credited), out.judged, out.correct) == (verdict, credited, judged, correct)


def test_hand_worked_answer_with_mixed_citations():
    # the first seven paths above as one answer, N = 4 nuggets:
    # credited {0} (s1) and {2} (s4): recall 2/4; judged s1..s6 = 6, correct s1, s3, s4 = 3: precision 1/2;
    # citations: s1 T, s2 T F, s3 T T -> 4 of 5 support; F1 = 2 * .5 * .5 / 1 = .5
    sentences = [p[0] for p in PATHS[:7]]
    assert argue_scores(sentences, 4) == pytest.approx(
        {"nugget_recall": 0.5, "sentence_precision": 0.5, "citation_support": 0.8, "f1": 0.5})
    # nothing judged (only ignorable sentences): precision 0 as in Auto-ARGUE, F1 0
    assert argue_scores([PATHS[7][0]], 4) == {"nugget_recall": 0.0, "sentence_precision": 0.0,
                                              "citation_support": 0.0, "f1": 0.0}
    with pytest.raises(ValueError, match="at least one nugget"):
        argue_scores(sentences, 0)


@pytest.mark.parametrize("sentence", [
    _s(["d1"], [None], matched={0}), _s(["d1", "d2"], [True, None], matched={0}), _s(negative=None, matched={0}),
    _s(negative=False, needs=None, matched={0}), _s(negative=False, needs=True, first=None)])
def test_an_unreadable_judgment_penalises_and_can_only_lower_scores(sentence):
    out = sentence_outcome(sentence)
    assert out.verdict == "penalty" and not out.credited and out.judged and not out.correct
    good = _s(["d9"], [True], matched={1})
    assert argue_scores([good, sentence], 2)["sentence_precision"] == 0.5
    assert argue_scores([good, sentence], 2)["nugget_recall"] == 0.5


def test_parse_yes_no():
    assert parse_yes_no('{"answer": "YES"}') is True and parse_yes_no("NO.") is False
    assert parse_yes_no("answer: no") is False and parse_yes_no("  Yes, it does") is True
    assert parse_yes_no("Maybe") is None and parse_yes_no("") is None


# -- end to end on a scripted engine --------------------------------------------------------------------------
PASSAGES = [{"doc_IDs": ["d1"], "passage": "Paris is the capital of France."},
            {"doc_IDs": ["d2"], "passage": "Lyon is known for its food."}]
NUGGETS = [{"text": "Paris is the capital", "importance": "vital"},
           {"text": "No other capital was ever used", "importance": "okay"},
           {"text": "France is in Europe", "importance": "okay"}]
# s1 cites d1 (supports) -> matched nugget 0; s2 cites d1 and d2 (d2 does not support) -> penalised;
# s3 uncited negative assertion -> matched nugget 1 -> rewarded; s4 uncited claim needing a citation, first ->
# penalised; s5 uncited, repeats s4 -> ignored; s6 transition -> needs no citation
ANSWER = ("Paris is the capital of France [1]. Paris is a capital known for food [1, 2]. No other capital was "
          "ever used. France is in Europe. As said, France is in Europe. In summary, here is the answer.")


def _respond(request: LLMRequest) -> str:
    text = prompt_text(request)
    if "Does the document support" in text:
        return "YES" if "Paris is the capital of France." in text.split("Sentence:")[0] else "NO"
    if "negative assertion" in text:
        return "YES" if "No other capital" in text else "NO"
    if "back with a source" in text:
        return "NO" if "In summary" in text else "YES"
    if "for the first time" in text:
        return "NO" if "As said" in text.split("Sentence:")[1] else "YES"
    if "Nuggets:" in text:  # list assignment: support for the nugget the sentence states
        answer = re.search(r"Answer: (.*)", text).group(1)
        nuggets = json.loads(re.search(r"Nuggets: (\[.*\])", text).group(1))
        stated = {"Paris is the capital": "Paris is the capital", "No other capital was ever used": "No other",
                  "France is in Europe": "France is in Europe"}
        return json.dumps({"labels": ["support" if stated[n] in answer else "not_support" for n in nuggets]})
    raise AssertionError(f"unexpected prompt: {text[:80]}")


@pytest.fixture
def nugget_file(tmp_path):
    path = tmp_path / "create.jsonl"
    path.write_text(json.dumps({"qid": "q1", "query": "What is the capital of France?", "nuggets": NUGGETS}) + "\n")
    return path


def _record() -> AnswerRecord:
    return AnswerRecord.from_json({"id": "q1", "question": "What is the capital of France?", "answer": ANSWER,
                                   "passages": PASSAGES, "hop": "single"})


def _ctx(tmp_path, nugget_file, records) -> EvalContext:
    """What `rag.judge.run.evaluate_records` hands a nugget judge: the run's one nugget set and its source."""
    nuggetizer = AutoNuggetizer(nugget_file=str(nugget_file))
    return EvalContext(tmp_path / "run", tmp_path / "cache", nuggetizer.nugget_set(records, None, tmp_path / "cache"),
                       nuggetizer)


def test_the_judge_end_to_end(nugget_file, tmp_path):
    engine = ScriptedEngine(_respond)
    judge = ArgueJudge()
    record = _record()
    metrics = judge.evaluate([record], engine, _ctx(tmp_path, nugget_file, [record]))
    result = record.judges["argue"]
    verdicts = [s["verdict"] for s in result["sentences"]]
    assert verdicts == ["reward", "penalty", "reward", "penalty", "ignore", "ignore"]
    assert [s["credited"] for s in result["sentences"]] == [[0], [], [1], [], [], []]
    # recall 2/3; judged s1..s4 = 4, correct s1, s3 = 2 -> precision 1/2; citations 2 of 3 support
    expected = {"nugget_recall": 2 / 3, "sentence_precision": 0.5, "citation_support": 2 / 3,
                "f1": 2 * (2 / 3) * 0.5 / (2 / 3 + 0.5)}
    assert {k: result[k] for k in expected} == pytest.approx(expected)
    assert metrics["argue/f1/all"] == pytest.approx(round(expected["f1"], 6)) and metrics["argue/n_scored"] == 1
    assert result["parse_failures"] == 0 and result["rewarded"] == 2 and result["penalized"] == 2
    # one batch per step: citation check (3 citations), negative assertion (4 uncited), nugget matching (s1 and
    # s3, one window each), needs citation (3 non-negative uncited), first instance (s4 and s5)
    sizes = [len(b) for b in engine.batches]
    assert sizes == [3, 4, 2, 3, 2]
    assert "Paris is the capital of France" in prompt_text(engine.batches[4][0])  # earlier sentences shown
    assert (tmp_path / "run" / "argue" / "scores.jsonl").is_file()
    assert record.judge_values()["argue/f1"] == pytest.approx(expected["f1"])


def test_decisions_from_logprobs_and_unreadable_ones(nugget_file, tmp_path):
    class Probs(ScriptedEngine):
        supports_logprobs = True

        def _generate(self, requests, desc):
            self.batches.append(list(requests))
            out = []
            for r in requests:
                if r.params.top_logprobs:
                    said = _respond(r)
                    if "negative assertion" in prompt_text(r):  # the model names no label here: unreadable
                        alts = {" The": -0.1}
                    else:
                        alts = {" " + said: math.log(0.8), " " + ("NO" if said == "YES" else "YES"): math.log(0.2)}
                    out.append(Completion(text="", prompt_tokens=1, completion_tokens=1, top_logprobs=[alts]))
                else:
                    out.append(Completion(text=_respond(r), prompt_tokens=1, completion_tokens=1))
            return out

    engine = Probs(_respond)
    judge = ArgueJudge(decisions="logprobs")
    record = _record()
    judge.evaluate([record], engine, _ctx(tmp_path, nugget_file, [record]))
    result = record.judges["argue"]
    # the four uncited sentences' negative checks are unreadable: each penalised and counted, never re-asked
    assert [s["verdict"] for s in result["sentences"]] == ["reward", "penalty", "penalty", "penalty", "penalty",
                                                           "penalty"]
    assert result["parse_failures"] == 4 and result["nugget_recall"] == pytest.approx(1 / 3)
    assert all(r.params.max_tokens == 1 for b in engine.batches[:2] for r in b)


def test_bad_settings_fail_when_the_judge_is_built():
    with pytest.raises(Exception, match="decisions='maybe'"):
        ArgueFlow(decisions="maybe")
    with pytest.raises(TypeError):
        ArgueJudge(nuggets={"windowsize": 3})


def test_argue_metrics_are_declared_without_building_the_judge():
    import subprocess
    import sys

    code = ("from rag.metrics.registry import REGISTRY; "
            "print(REGISTRY.undeclared(['argue/f1/all', 'argue/sentence_precision/multi', 'argue/parse_failures']),"
            " REGISTRY.direction('argue/nugget_recall/all'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "1"]


@pytest.mark.parametrize("sentences,supported,nuggets,correct,published", [
    # hltcoe/argue-viz assets/example-report.scores.tsv (Auto-ARGUE's output for its example run): topic, sentences
    # (all cited, one citation each), correctly cited, nuggets, correct nuggets -> sentence_support,
    # nugget_coverage, f1 as Auto-ARGUE printed them
    (15, 14, 15, 9, {"sentence_precision": 0.9333333333333333, "nugget_recall": 0.6, "f1": 0.7304347826086957}),
    (10, 10, 10, 7, {"sentence_precision": 1.0, "nugget_recall": 0.7, "f1": 0.8235294117647058}),
    (18, 16, 19, 15, {"sentence_precision": 0.8888888888888888, "nugget_recall": 0.7894736842105263,
                      "f1": 0.8362369337979094}),
])
def test_metrics_match_auto_argues_published_rows(sentences, supported, nuggets, correct, published):
    """The same counts through our definitions give Auto-ARGUE's published per-topic scores (its sentence support
    is our sentence precision, its nugget coverage our nugget recall, and its F1 the harmonic mean of the two)."""
    judged = [_s([f"d{i}"], [i < supported], matched={i} if i < correct else ()) for i in range(sentences)]
    scores = argue_scores(judged, nuggets)
    assert {k: scores[k] for k in published} == pytest.approx(published, abs=1e-12)
    assert scores["citation_support"] == pytest.approx(supported / sentences)


# -- a hand-worked example of ARGUE's published flow, through the judges -------------------------------------
BRIDGE_PASSAGES = [
    {"doc_IDs": ["d1"], "passage": "The Brooklyn Bridge opened to traffic in 1883."},
    {"doc_IDs": ["d2"], "passage": "John A. Roebling designed the Brooklyn Bridge."},
    {"doc_IDs": ["d3"], "passage": "When it opened, the Brooklyn Bridge was the longest suspension bridge in the world."},
    {"doc_IDs": ["d4"], "passage": "New York City has many bridges across the East River."},
    {"doc_IDs": ["d5"], "passage": "Washington Roebling oversaw the construction after his father's death."}]
BRIDGE_NUGGETS = [{"text": "The bridge opened in 1883", "importance": "vital"},
                  {"text": "John Roebling designed the bridge", "importance": "vital"},
                  {"text": "It was the longest suspension bridge of its time", "importance": "okay"},
                  {"text": "Pedestrians pay no toll", "importance": "okay"},
                  {"text": "Washington Roebling oversaw the construction", "importance": "okay"}]
BRIDGE_ANSWER = ("The Brooklyn Bridge opened in 1883 [1]. It was designed by John Roebling and was the longest "
                 "suspension bridge of its time [2, 3]. It is painted red every year [4]. John Roebling also "
                 "designed it [2, 7]. Pedestrians are not charged a toll. The bridge opened in 1883. It carries "
                 "cars across the East River. In short, it is a landmark worth a visit.")
#: (sentence start, cited passage start) pairs the judge model attests; every other citation it does not
ATTESTED = {("The Brooklyn Bridge opened", "The Brooklyn Bridge opened"), ("It was designed", "John A. Roebling"),
            ("It was designed", "When it opened"), ("John Roebling also", "John A. Roebling")}
#: sentence start -> the nuggets it states (asked only where ARGUE's path needs it)
STATES = {"The Brooklyn Bridge opened": [0], "It was designed": [1, 2], "John Roebling also": [1],
          "Pedestrians are not": [3]}


def _bridge_judge(request: LLMRequest) -> str:
    text = prompt_text(request)
    sentence = re.search(r"(?:Sentence|Answer): (.*)", text).group(1)
    if "Does the document support" in text:
        document = re.search(r"Document: (.*)", text).group(1)
        return "YES" if any(sentence.startswith(s) and document.startswith(d) for s, d in ATTESTED) else "NO"
    if "negative assertion" in text:
        return "YES" if sentence.startswith("Pedestrians") else "NO"
    if "back with a source" in text:
        return "NO" if sentence.startswith("In short") else "YES"
    if "for the first time" in text:
        return "NO" if sentence.startswith("The bridge opened in 1883") else "YES"
    nuggets = json.loads(re.search(r"Nuggets: (\[.*\])", text).group(1))
    stated = next((ids for start, ids in STATES.items() if sentence.startswith(start)), [])
    texts = [BRIDGE_NUGGETS[i]["text"] for i in stated]
    return json.dumps({"labels": ["support" if n in texts else "not_support" for n in nuggets]})


def test_hand_worked_example_of_argues_published_flow(tmp_path):
    """ARGUE's flow as Mayfield et al. (SIGIR 2024) describe it and Auto-ARGUE's README restates it: a cited sentence
    is penalised when any cited document does not support it, else rewarded once per nugget it answers (ignored
    when none); an uncited negative assertion is rewarded when a nugget confirms it, else penalised; an uncited
    claim that needs a citation is penalised the first time it is made and ignored when repeated; anything else
    is ignored. Five passages [1]-[5], five nuggets n0-n4, eight sentences:

    s1 "...opened in 1883 [1]"          [1] supports -> answers n0 -> reward, credits {n0}     (judged, correct)
    s2 "...designed by ... [2, 3]"      [2] and [3] support -> answers n1, n2 -> reward {n1,n2} (judged, correct)
    s3 "...painted red every year [4]"  [4] does not support -> penalty                        (judged)
    s4 "...also designed it [2, 7]"     [2] supports, but [7] is beyond the 5 passages the answer had: an invalid
                                        citation, which supports nothing -> penalty, no credit (judged)
    s5 "Pedestrians are not charged..." uncited negative assertion, n3 confirms -> reward {n3} (judged, correct)
    s6 "The bridge opened in 1883."     uncited claim needing a citation, made before (s1) -> ignored
    s7 "It carries cars across..."      uncited claim needing a citation, first time -> penalty (judged)
    s8 "In short, ..."                  needs no citation -> ignored

    nugget recall      = |{n0, n1, n2, n3}| / |N| = 4 / 5 = 0.8 (n4 is never stated)
    sentence precision = correct / judged = |{s1, s2, s5}| / |{s1, s2, s3, s4, s5, s7}| = 3 / 6 = 0.5
    citation support   = supporting / all citations = (s1:1 + s2:2 + s3:0 + s4:1) / (1 + 2 + 1 + 2) = 4 / 6
    F1                 = 2 * 0.8 * 0.5 / (0.8 + 0.5) = 8 / 13
    Crucible's columns on the same credits (m = 8 sentences): density |{n0..n3}| / 8 = 0.5; novelty (s1, s2, s5
    add a nugget no earlier sentence did) 3 / 8; relevant sentences (credited: s1, s2, s5) 3 / 8.

    Were [7] dropped instead of counted, s4 would be a supported citation of [2] answering n1: precision 4 / 6 and
    citation support 4 / 5. Auto-ARGUE's code (hltcoe/auto-argue) could not be fetched here; its visualiser's
    published scores (argue-viz) are matched by `test_metrics_match_auto_argues_published_rows`.
    """
    nugget_file = tmp_path / "create.jsonl"
    nugget_file.write_text(json.dumps({"qid": "b1", "query": "Tell me about the Brooklyn Bridge.",
                                       "nuggets": BRIDGE_NUGGETS}) + "\n")
    record = AnswerRecord.from_json({"id": "b1", "question": "Tell me about the Brooklyn Bridge.",
                                     "answer": BRIDGE_ANSWER, "passages": BRIDGE_PASSAGES, "hop": "single"})
    root = judge_root("argue", "crucible", nuggetizer={"nugget_file": str(nugget_file)})
    engine = ScriptedEngine(_bridge_judge)
    metrics = evaluate_records(root.judge, [record], tmp_path / "run", tmp_path / "cache", factory_with(engine, root))
    argue = record.judges["argue"]
    assert [s["verdict"] for s in argue["sentences"]] == ["reward", "reward", "penalty", "penalty", "reward",
                                                           "ignore", "penalty", "ignore"]
    assert [s["credited"] for s in argue["sentences"]] == [[0], [1, 2], [], [], [3], [], [], []]
    assert argue["sentences"][3]["citations"] == ["d2", "invalid:[7]"] and argue["sentences"][3]["attested"] == [
        True, False]
    assert {k: argue[k] for k in ("nugget_recall", "sentence_precision", "citation_support", "f1")} == pytest.approx(
        {"nugget_recall": 0.8, "sentence_precision": 0.5, "citation_support": 4 / 6, "f1": 8 / 13})
    crucible = record.judges["crucible"]
    assert {k: crucible[k] for k in ("nugget_recall", "nugget_density", "sentence_novelty", "relevant_sentences",
                                     "citation_support")} == pytest.approx(
        {"nugget_recall": 0.8, "nugget_density": 0.5, "sentence_novelty": 3 / 8, "relevant_sentences": 3 / 8,
         "citation_support": 4 / 6})
    # the invalid citation is never put to the model: 5 citation checks per judge, none for [7]
    attests = [r for b in engine.batches for r in b if "Does the document support" in prompt_text(r)]
    assert len(attests) == 10 and sum("John Roebling also" in prompt_text(r) for r in attests) == 2
    # both judges scored against the one set they received, and say so
    assert argue["nugget_set"] == crucible["nugget_set"] == nugget_set_hash(BRIDGE_NUGGETS)
    assert metrics["argue/nugget_set"]["topics"] == metrics["crucible/nugget_set"]["topics"] == {
        "b1": nugget_set_hash(BRIDGE_NUGGETS)}


def test_a_marker_beyond_the_answers_passages_is_an_invalid_citation():
    """`[7]` of 5 passages: a citation of nothing the answer had; it stays a citation (never silently dropped, which
    would leave the sentence uncited or supported by its other citations)."""
    sentences = answer_sentences({"answer": "Roebling designed it [2, 7]. It opened in 1883 [6].",
                                  "passages": BRIDGE_PASSAGES})
    assert sentences == [
        {"text": "Roebling designed it.", "citations": ["d2", "invalid:[7]"],
         "passages": [BRIDGE_PASSAGES[1]["passage"], ""]},
        {"text": "It opened in 1883.", "citations": ["invalid:[6]"], "passages": [""]}]
    judged = _s(["d2", "invalid:[7]"], [True, False], matched={1})  # what the flow records for it
    assert sentence_outcome(judged).verdict == "penalty" and not sentence_outcome(judged).credited
