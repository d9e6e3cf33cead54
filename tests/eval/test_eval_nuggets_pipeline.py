"""AutoNuggetizer steps with a scripted engine: batching across topics, caching, limits, failures, file shapes."""

from __future__ import annotations

import json
import re

import pytest
from evaltools import ScriptedEngine, factory_with, judge_root, prompt_text, synthetic_records
from nuggetizer.core.metrics import calculate_global_metrics

from eval.nuggets import AutoNuggetizer, Topic
from rag.core.io import read_jsonl
from rag.judge.run import evaluate_records


def respond(request, n_nuggets: int = 25, bad_assign_for: str | None = None) -> str:
    """Creation: `n_nuggets` nuggets; importance: every third vital; assignment: alternating labels."""
    text = prompt_text(request)
    if "Update the list of atomic nuggets" in text:
        query = re.search(r"Query: (.*)", text).group(1)
        return json.dumps({"nuggets": [f"{query} nugget {i}" for i in range(n_nuggets)]})
    shown = json.loads(re.search(r"Nuggets: (\[.*\])", text).group(1))
    if "vital" in text and "okay" in text and "Answer:" not in text:
        return json.dumps({"labels": ["vital" if int(s.rsplit(" ", 1)[1]) % 3 == 0 else "okay" for s in shown]})
    if bad_assign_for and bad_assign_for in text:
        return "These nuggets look supported to me."
    labels = ["support", "partial_support", "not_support"]
    return json.dumps({"labels": [labels[int(s.rsplit(" ", 1)[1]) % 3] for s in shown]})


def _cfg(**nuggetizer):
    """conf/judge/nuggets.yaml (and the nuggetizer node it adds, with overrides), under a root whose `llm` is the
    scripted engine's."""
    return judge_root("nuggets", nuggetizer=nuggetizer)


def test_creation_is_batched_over_topics_windows_and_limits():
    engine = ScriptedEngine(respond)
    nz = AutoNuggetizer()
    topics = [Topic("a", "alpha", [f"p{i}" for i in range(15)]), Topic("b", "beta", ["p"]), Topic("c", "gamma", ["q"])]
    sets = nz.create(engine, topics)
    sizes = [len(b) for b in engine.batches]
    # window 1 for all three topics, window 2 (passages 11-15) for topic a only, then one importance batch
    # (25 nuggets per topic, labelled 10 at a time -> 3 windows x 3 topics)
    assert sizes == [3, 1, 9]
    for nset in sets:
        assert len(nset.nuggets) == 20  # sorted vital first, top 20 kept
        importances = [n["importance"] for n in nset.nuggets]
        assert importances == sorted(importances, key=lambda x: x != "vital")
        vital_ids = [int(n["text"].rsplit(" ", 1)[1]) for n in nset.nuggets if n["importance"] == "vital"]
        assert vital_ids == sorted(vital_ids) and len(vital_ids) == 9  # 0, 3, ..., 24: stable order kept
    second = engine.batches[1][0]
    assert "alpha nugget 0" in prompt_text(second)  # the running list is fed to the next window
    assert "[1] p10" in prompt_text(second)


def test_max_nuggets_is_enforced_during_creation():
    engine = ScriptedEngine(lambda r: respond(r, n_nuggets=40))
    nz = AutoNuggetizer(keep_top=100)
    nset = nz.create(engine, [Topic("a", "alpha", ["p"])])[0]
    assert len(nset.nuggets) == 30


def test_hook_scores_caches_and_writes_nuggetizer_files(tmp_path):
    records = synthetic_records(3)
    records[2].gold_docs = []  # falls back to the retrieved passages
    cfg = _cfg()
    engine = ScriptedEngine(respond, supports_json_schema=True)
    metrics = evaluate_records(cfg.judge, records, tmp_path / "run1", tmp_path / "cache",
                               factory_with(engine, cfg))
    # one batch per step, never one call per question: creation (1 window each), importance (25 nuggets ->
    # 3 windows of <= 10 per topic), assignment (20 kept nuggets -> 2 windows per answer)
    assert [len(b) for b in engine.batches] == [3, 9, 6]
    schema = engine.batches[2][0].params.json_schema["properties"]["labels"]
    assert schema["items"]["enum"] == ["support", "partial_support", "not_support"] and schema["minItems"] == 10
    assert records[2].judges["nuggets"]["source"] == "passages" and records[0].judges["nuggets"]["source"] == "gold_docs"
    # 20 kept: 9 vital (ids 0,3,..,24), 11 okay; assignment label = id % 3 -> every vital id is "support"
    rec = records[0].judges["nuggets"]
    assert rec["n_nuggets"] == 20 and rec["n_vital"] == 9 and rec["vital_strict"] == 1.0
    assign_rows = read_jsonl(tmp_path / "run1" / "nuggets" / "assign.jsonl")
    create_rows = read_jsonl(tmp_path / "run1" / "nuggets" / "create.jsonl")
    assert set(create_rows[0]) == {"qid", "query", "nuggets", "source"} and set(create_rows[0]["nuggets"][0]) == {
        "text", "importance"}
    assert {"qid", "query", "answer_text", "nuggets"} <= set(assign_rows[0])
    theirs = calculate_global_metrics(assign_rows)
    assert metrics["nuggets/vital_strict/all"] == pytest.approx(theirs["strict_vital_score"], abs=1e-9)
    assert metrics["nuggets/all/all"] == pytest.approx(theirs["all_score"], abs=1e-9)
    assert metrics["nuggets/n_scored"] == 3 and metrics["nuggets/parse_failures"] == 0

    # a second run (another engine, no response cache) reuses the nuggets from disk: assignment calls only
    again = ScriptedEngine(respond, supports_json_schema=True)
    fresh = synthetic_records(3)
    fresh[2].gold_docs = []
    metrics2 = evaluate_records(cfg.judge, fresh, tmp_path / "run2", tmp_path / "cache",
                                factory_with(again, cfg))
    assert metrics2["nuggets/cached_topics"] == 3
    assert [len(b) for b in again.batches] == [6]
    assert all("captures it" in prompt_text(r) for r in again.batches[0])
    assert metrics2["nuggets/vital_strict/all"] == metrics["nuggets/vital_strict/all"]


def test_assignment_parse_failure_is_counted_and_scored_not_supported(tmp_path):
    """An unreadable assignment window scores its nuggets as not supported, as nuggetizer does: the answer stays in
    the mean, so a parse failure lowers a run's mean and never raises it by leaving a hard topic out."""
    records = synthetic_records(2)
    cfg = _cfg(max_retries=1)
    clean = evaluate_records(cfg.judge, synthetic_records(2), tmp_path / "clean", tmp_path / "cache_clean",
                             factory_with(ScriptedEngine(respond), cfg))
    engine = ScriptedEngine(lambda r: respond(r, bad_assign_for="Fact 1 is true"))
    metrics = evaluate_records(cfg.judge, records, tmp_path, tmp_path / "cache", factory_with(engine, cfg))
    bad = records[1].judges["nuggets"]
    assert not bad.get("parse_failed") and bad["failure_stage"] == "assign" and bad["failed_windows"] == 2
    assert all(n["assignment"] == "failed" for n in bad["assignments"])  # nuggetizer's marker, kept
    assert bad["vital_strict"] == bad["all"] == 0.0
    assert metrics["nuggets/parse_failures"] == 1 and metrics["nuggets/assign_failures"] == 1
    assert metrics["nuggets/n_scored"] == 2
    assert metrics["nuggets/vital_strict/all"] == pytest.approx(records[0].judges["nuggets"]["vital_strict"] / 2)
    assert metrics["nuggets/vital_strict/all"] <= clean["nuggets/vital_strict/all"]
    assert records[1].evaluation_values()["nuggets/vital_strict"] == 0.0  # agreement sees the same topic set
    # nuggetizer's own arithmetic on the assign file gives the same run mean, failures included
    theirs = calculate_global_metrics(read_jsonl(tmp_path / "nuggets" / "assign.jsonl"))
    assert metrics["nuggets/vital_strict/all"] == pytest.approx(theirs["strict_vital_score"], abs=1e-9)
    # the two unreadable windows were re-asked together in one batch
    assert [len(b) for b in engine.batches][-1] == 2


def test_creation_failure_and_missing_passages(tmp_path):
    records = synthetic_records(3)
    records[1].gold_docs, records[1].passages = [], []
    cfg = _cfg(max_retries=1)

    def broken(request):
        return "no idea" if "Update the list" in prompt_text(request) and "fact 2" in prompt_text(request) \
            else respond(request)

    engine = ScriptedEngine(broken)
    metrics = evaluate_records(cfg.judge, records, tmp_path, tmp_path / "cache", factory_with(engine, cfg))
    assert records[1].judges["nuggets"]["skipped"] and metrics["nuggets/skipped"] == 1
    assert records[2].judges["nuggets"]["failure_stage"] == "create" and metrics["nuggets/create_failures"] == 1
    assert metrics["nuggets/n_scored"] == 1
    # failed topics are not cached: a later run tries again
    assert len(list((tmp_path / "cache" / "nuggets").rglob("*.json"))) == 1


def test_external_nugget_file(tmp_path):
    nugget_file = tmp_path / "nuggets.jsonl"
    nugget_file.write_text(json.dumps({"qid": "q0", "query": "x", "nuggets": [
        {"text": "Fact 0 nugget 0", "importance": "vital"}, {"text": "Fact 0 nugget 1", "importance": "okay"}]}) + "\n")
    cfg = _cfg(nugget_file=str(nugget_file))
    engine = ScriptedEngine(respond)
    records = synthetic_records(2)
    metrics = evaluate_records(cfg.judge, records, tmp_path, tmp_path / "cache", factory_with(engine, cfg))
    assert len(engine.batches) == 1  # assignment only
    assert records[0].judges["nuggets"]["n_nuggets"] == 2
    assert records[1].judges["nuggets"]["skip_reason"] == "not_in_nugget_file" and metrics["nuggets/skipped"] == 1


def test_labels_follow_the_nuggets_not_their_positions_and_prompts_show_no_label_order():
    """Issue 23, item 6: Gemma 3 270M copied the format example's label order into 24 of 25 answers. The prompts
    give the reply's shape only, and a permuted nugget list gets its labels permuted with it."""
    engine = ScriptedEngine(respond)
    nz = AutoNuggetizer()
    nuggets = [{"text": f"alpha nugget {i}", "importance": "vital"} for i in range(6)]
    permuted = [nuggets[i] for i in (5, 2, 0, 4, 1, 3)]
    [first, second] = nz.assign(engine, [("alpha", "an answer", nuggets), ("alpha", "an answer", permuted)])
    by_text = {n["text"]: n["assignment"] for n in first.nuggets}
    assert [n["assignment"] for n in second.nuggets] == [by_text[n["text"]] for n in permuted]
    assert [n["assignment"] for n in second.nuggets] != [n["assignment"] for n in first.nuggets]
    for request in engine.batches[0]:
        text = prompt_text(request)
        assert not re.search(r'\[\s*"(support|partial_support|not_support|vital|okay)"', text), text
    importance = AutoNuggetizer()
    importance.create(engine, [Topic("b", "beta", ["p"])])
    for request in engine.batches[-1]:
        assert not re.search(r'\[\s*"(vital|okay)"', prompt_text(request))
