"""Live-day parts on hand-checkable inputs: durations, the guard's choices, submission rules, extraction."""

from __future__ import annotations

import pytest

from rag.core.errors import ConfigError, DataError
from rag.generate.extractive import best_span
from rag.live.day import compose_live, merge_overrides, parse_duration, split_overrides
from rag.live.guard import DeadlineGuard
from rag.live.submission import SubmissionSpec

LADDER = [{"name": "full", "overrides": [], "relative_cost": 1.0},
          {"name": "smaller_k", "overrides": ["retriever.k=20"], "relative_cost": 0.5},
          {"name": "extractive", "overrides": ["generator=extractive"], "relative_cost": 0.01}]


def test_durations_and_override_merging():
    assert parse_duration("2h") == 7200 and parse_duration("1h30m") == 5400 and parse_duration("45s") == 45
    assert parse_duration("90") == 90 and parse_duration(2.5) == 2.5
    with pytest.raises(ConfigError, match="live.deadline"):
        parse_duration("two hours")
    assert merge_overrides(["retriever.k=50", "generator=iterdrag"], ["retriever.k=20"]) == \
        ["retriever.k=20", "generator=iterdrag"]
    assert split_overrides(["questions=q.jsonl", "deadline=2h", "out=x", "live.batch_size=4", "retriever=dense",
                            "hydra.run.dir=y", "+generator.max_tokens=9"]) == ["retriever=dense",
                                                                               "+generator.max_tokens=9"]
    cfg = compose_live(["deadline=5m", "live.batch_size=2", "retriever=dense"])
    assert cfg.live.deadline == "5m" and cfg.live.batch_size == 2 and cfg.live.guard.rungs[-1].name == "extractive"
    assert cfg.retriever._target_ == "rag.retrieve.dense.DenseRetriever"  # a pipeline group, as in rag.main


def test_the_live_folder_is_hydras_run_folder(tmp_path):
    """Issue 25, fault 4: `python -m rag.live ... hydra.run.dir=X` wrote to live.out_dir anyway. Now the day's
    folder is Hydra's run folder: out=DIR and hydra.run.dir=DIR are one setting."""
    from hydra import compose, initialize_config_dir

    from rag.live.day import CONF_DIR

    def run_dir(overrides):
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name="live", overrides=overrides, return_hydra_config=True)
        return str(cfg.hydra.run.dir)

    assert run_dir([f"out={tmp_path}"]) == str(tmp_path)
    assert run_dir([f"paths.output_dir={tmp_path}", "questions=/q/Session1.jsonl"]) == f"{tmp_path}/live/Session1"
    assert run_dir([f"paths.output_dir={tmp_path}"]) == f"{tmp_path}/live/liverag_dev"


def test_multirun_and_bad_pipeline_overrides_are_one_line(tmp_path):
    import subprocess
    import sys

    from tests.conftest import DATA_DIR, ROOT

    proc = subprocess.run([sys.executable, "-m", "rag.live", "-m", "questions=q.jsonl", f"out={tmp_path}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "a live day is one run" in proc.stderr and "Traceback" not in proc.stderr
    # the pipeline's own overrides go through the same preflight as rag.main, before any work
    from rag.live.day import LiveDay

    questions = DATA_DIR / "liverag_dm" / "LiveRAG_LCD_Session1_Question_file.jsonl"
    with pytest.raises(ConfigError, match="retreiver: no config reads a top-level key"):
        LiveDay(compose_live([f"questions={questions}"]).live, ["+retreiver.k=5", f"paths.data_dir={DATA_DIR}"])


def test_guard_keeps_settings_while_on_time_and_steps_down_when_late():
    guard = DeadlineGuard(LADDER, safety=1.0)
    assert guard.choose(100, 1000).reason == "first batch"
    guard.observe(0, 10, 50.0)  # 5 s per question
    on_time = guard.choose(90, 1000)  # 450 s needed, 1000 left
    assert (on_time.rung, on_time.reason, on_time.estimate_s) == (0, "on time", 450.0)
    late = guard.choose(90, 300)  # full: 450 s > 300; smaller_k estimated at 2.5 s/q: 225 s fits
    assert late.rung == 1 and late.estimate_s == pytest.approx(225.0) and "passed the deadline" in late.reason
    assert guard.choose(90, 10_000).rung == 1  # never climbs back up
    guard.observe(1, 10, 40.0)  # measured 4 s/q at smaller_k: the measurement replaces the estimate
    assert guard.choose(80, 100).rung == 2  # 320 s > 100; extractive 0.08 s/q fits
    assert guard.choose(5, -1).reason == "deadline passed"


def test_guard_rejects_bad_settings():
    with pytest.raises(ValueError, match="at least one rung"):
        DeadlineGuard([])
    with pytest.raises(ValueError, match="safety"):
        DeadlineGuard(LADDER, safety=1.5)


def _line(qid, answer="Paris.", passages=None):
    return {"id": qid, "question": "q?", "final_prompt": "p", "answer": answer,
            "passages": passages if passages is not None else [{"passage": "text", "doc_IDs": ["<urn:uuid:1>"]}]}


def test_submission_rules(tmp_path):
    spec = SubmissionSpec(max_answer_words=3, max_passages=1)
    assert spec.problems([_line(0), _line(1)], [0, 1]) == []
    problems = spec.problems([_line(0, answer="one two three four"), _line(0), _line(5, answer=" "),
                              {"id": 2, "question": "q"},
                              _line(3, passages=[{"passage": "a", "doc_IDs": ["d"]}] * 2)], [0, 1, 2, 3])
    text = "\n".join(problems)
    for expected in ("4 words (limit 3)", "id '0' answered 2 times", "id not in the question file", "empty answer",
                     "missing field(s) passages, final_prompt, answer", "2 passages (limit 1)",
                     "id '1' not answered"):
        assert expected in text, (expected, text)
    with pytest.raises(DataError, match="not written"):
        spec.write(tmp_path / "submission.jsonl", [_line(0)], [0, 1])
    assert not (tmp_path / "submission.jsonl").exists()
    # a record becomes a line: the answer cut to the limit, the id as the question file wrote it
    line = spec.line({"id": "7", "question": "q", "answer": "a b c d e", "final_prompt": "p",
                      "passages": [{"doc_IDs": ["d"], "passage": "t"}], "retrieved": []}, 7)
    assert line == {"id": 7, "question": "q", "passages": [{"passage": "t", "doc_IDs": ["d"]}],
                    "final_prompt": "p", "answer": "a b c"}


def test_extractive_span_takes_the_sentence_that_matches_the_question():
    passage = ("The Mariana Trench is in the Pacific. Fish have been filmed at 8,336 metres in the Izu-Ogasawara "
               "trench. No fish live deeper than about 8,400 metres. Squid are different.")
    span = best_span("How deep can fish survive in ocean trenches?", passage, 12)
    assert span.startswith("Fish have been filmed at 8,336 metres") and len(span.split()) == 12


def test_a_secret_passed_as_an_override_is_refused_before_the_live_folder_exists(tmp_path):
    """The live day is a Hydra app: `.hydra/overrides.yaml` would hold the command line, a key included; the key
    is refused first (rag.core.entry), in one line naming the variable to set, and no folder is made."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    secret = "sk-live-never-written-9876"
    bad = tmp_path / "questions.jsonl"
    bad.write_text('{"id": 0}\n')
    proc = subprocess.run([sys.executable, "-m", "rag.live", f"questions={bad}", f"out={tmp_path / 'out'}",
                           f"+retriever.api_key={secret}"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("ConfigError: refused: retriever.api_key:") and "retriever.api_key_env=" in line
    assert secret not in proc.stderr + proc.stdout and not (tmp_path / "out").exists()
