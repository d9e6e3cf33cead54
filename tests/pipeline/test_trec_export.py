"""TREC RAG answer exports (2025 formats 1 and 2, 2024) checked by the track validator's rules, and run files."""

from __future__ import annotations

import json

import pytest

from rag.core.errors import DataError
from rag.export.trec import export, main, to_rag25, to_trec, validate
from rag.folders import RunFolder
from rag.records import AnswerRecord

SEG = "msmarco_v2.1_doc_00_{}#0_{}"


def _record(qid: str, answer: str, n_passages: int = 3) -> AnswerRecord:
    docs = [SEG.format(i, i) for i in range(n_passages)]
    return AnswerRecord(
        id=qid, question=f"topic {qid} narrative", answer=answer, final_prompt="prompt",
        passages=[{"doc_IDs": [d], "passage": f"text {d}"} for d in reversed(docs)],  # inverted order in the prompt
        reranked=[{"passage_id": d, "doc_id": d, "score": 1.0 - i / 10} for i, d in enumerate(docs)],
        retrieved=[{"passage_id": d, "doc_id": d, "score": 5.0 - i} for i, d in enumerate(docs)],
        qrels={docs[0]: 2, docs[1]: 0})


def test_rag25_export_names_ranked_references_and_cites_in_answer_order(tmp_path):
    record = _record("7", "First claim [1]. Second claim [3, 2].")
    out = to_rag25(record, "run-a", "team-x")
    # references: the ranked (reranked) list, not the prompt's order; [1] is the prompt's first passage (doc 2)
    assert out["references"] == [SEG.format(i, i) for i in range(3)]
    assert out["answer"] == [{"text": "First claim.", "citations": [2]}, {"text": "Second claim.", "citations": [0, 1]}]
    assert out["metadata"] == {"team_id": "team-x", "run_id": "run-a", "type": "automatic", "narrative_id": "7",
                               "narrative": "topic 7 narrative", "prompt": "prompt"}
    ids = to_rag25(record, "run-a", citations="ids")
    assert ids["answer"][1]["citations"] == [SEG.format(0, 0), SEG.format(1, 1)]
    topics = {"7": "topic 7 narrative"}
    for fmt, row in (("rag25", out), ("rag25_ids", ids), ("rag24", to_trec(record, "run-a"))):
        assert validate([row], fmt, topics, msmarco_ids=True) == ([], []), fmt


def test_answers_over_400_words_lose_sentences_from_the_end_as_the_track_checker_does():
    long = " ".join(f"Sentence {i} " + "word " * 48 + "end." for i in range(10))  # 10 x 51 words
    out = to_rag25(_record("1", long), "r")
    assert len(out["answer"]) == 7 and sum(len(a["text"].split()) for a in out["answer"]) <= 400
    assert to_trec(_record("1", long), "r")["response_length"] == 357


def test_each_bad_record_is_one_error_line_and_nothing_is_written(tmp_path):
    good = to_rag25(_record("1", "Fine [1]."), "r")
    missing = {"references": [], "answer": [{"text": "x", "citations": [0]}]}  # no metadata; citation out of range
    bad_cites = to_rag25(_record("3", "Claim [1]."), "r")
    bad_cites["answer"][0]["citations"] = ["a", 9]  # strings in format 1
    bad_cites["metadata"]["type"] = "semi"
    errors, warnings = validate([good, missing, bad_cites], "rag25", {"1": "", "2": "", "3": ""})
    assert len(errors) == 2
    assert errors[0].startswith("export:2 topic ?: metadata must be an object; ") and "index out of range: 0" in errors[0]
    assert errors[1].startswith("export:3 topic 3: invalid metadata.type 'semi'") and "must be integers" in errors[1]
    assert warnings == ["export: no response for topic 2"]
    # 2024: over 20 references, a duplicate, a non-MS MARCO id and a run tag that changes
    row24 = to_trec(_record("1", "A [1].", n_passages=22), "r1")
    row24["references"][1] = row24["references"][0]
    other = to_trec(_record("2", "B [1]."), "r2")
    other["references"][0] = "doc-9"
    errors, _ = validate([row24, other], "rag24", msmarco_ids=True)
    assert errors == [f"export:1 topic 1: duplicate document {row24['references'][0]} in references; too many "
                      "references (22, max 20)", "export:2 topic 2: invalid reference docno doc-9",
                      "export: run tag inconsistent (r1, r2)"]
    # an export that breaks a rule writes nothing and says which record
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps(_record("5", "Claim [1].").to_json()) + "\n")
    (tmp_path / "topics.jsonl").write_text('{"id": "6", "title": "another topic"}\n')
    with pytest.raises(DataError, match=r"out.jsonl:1 topic 5: metadata.narrative_id '5' not in the topics file"):
        export(answers, tmp_path / "out.jsonl", "r", "rag25", topics=tmp_path / "topics.jsonl")
    assert not (tmp_path / "out.jsonl").exists()


def test_run_files_of_an_older_folder_come_from_its_stored_lists(tmp_path, capsys):
    folder = RunFolder(tmp_path / "cell")
    folder.write_answers([_record("1", "x"), _record("2", "y")])
    main([str(folder.dir), "--format", "runs", "--run-id", "my-tag"])
    retrieval = folder.run_file_path("retrieval").read_text().splitlines()
    assert retrieval[:2] == [f"1 Q0 {SEG.format(0, 0)} 1 5.0 my-tag", f"1 Q0 {SEG.format(1, 1)} 2 4.0 my-tag"]
    assert len(folder.run_file_path("rerank").read_text().splitlines()) == 6
    assert folder.qrels_path.read_text().splitlines()[:2] == [f"1 0 {SEG.format(0, 0)} 2", f"1 0 {SEG.format(1, 1)} 0"]
    assert "wrote" in capsys.readouterr().out
