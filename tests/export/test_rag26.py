"""TREC RAG answer exports through the organizers' own checker, and the 2026 format.

The checker is autojudge-base's `python -m autojudge_base.report_tool check REPORT --spec S --topics REQUESTS`,
run here as a subprocess exactly as the organizers document it (TREC-RAG/trec-rag-skills,
validate-trec-rag-2026-submissions), on every TREC export: rag26 and rag25 / rag25_ids with their specs, rag24
structure-only (the checker has no 2024 spec). Answers come from a real run over a TREC RAG 2026-shaped folder
(the track's topics TSV, ClimbMix ids, real HotpotQA text, `generator=extractive`: no LLM) and from answer records
written by hand in the record format (`rag.records.AnswerRecord`) for what that run cannot show: a cited strategy's
sentences (Crucible, GINGER), `[n]` markers, a fourth citation, an answer past 1,024 words, an empty answer.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from hydra.utils import instantiate

from rag.core.errors import DataError
from rag.data.collections import TrecTopics
from rag.export.trec import RAG26_FILE, RAG26_METADATA, checker_words, main, to_rag25, to_rag26, validate
from rag.folders import RunFolder
from rag.records import AnswerRecord
from tests.conftest import compose_config
from tests.nltk_data import make_nltk_data
from tests.trec_checker import as_checker_report, organizers_check, write_topics


def climbmix(i: int) -> str:
    return f"shard_{i:05d}_{61000 + i}"


@pytest.fixture(scope="module")
def nltk_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """NLTK data for the checker, built locally (`tests.nltk_data` says why a few stopwords suffice)."""
    return make_nltk_data(tmp_path_factory.mktemp("nltk_data"))


# -- answers written by hand, in the record format ---------------------------------------------------------------
TOPICS = {"rag2026-0": "What does a cited strategy's answer look like?",
          "rag2026-1": "How do marker citations map to the ranked list?",
          "rag2026-2": "What if the model cites nothing at all?",
          "rag2026-3": "And an answer the model left empty?",
          "rag2026-4": "Is a long answer cut at a sentence boundary, as the track\u2019s \"1,024 words\" rule says?"}


def _ranked(ids: list[str]) -> list[dict]:
    return [{"passage_id": d, "doc_id": d, "score": 1.0 - i / 100} for i, d in enumerate(ids)]


def hand_records() -> list[AnswerRecord]:
    docs = [climbmix(i) for i in range(6)]
    prompt = [{"doc_IDs": [d], "passage": f"text of {d}"} for d in reversed(docs[:4])]  # prompt order: inverted
    cited = AnswerRecord(  # a cited strategy (Crucible, GINGER): sentences with their own citations, strongest first
        id="rag2026-0", question=TOPICS["rag2026-0"], answer="unused", passages=prompt, reranked=_ranked(docs),
        sentences=[{"text": "Claim with four sources.", "citations": [docs[3], docs[1], docs[0], docs[2]]},
                   {"text": "Claim from a document of its own retrieval.", "citations": [climbmix(99)]},
                   {"text": "   ", "citations": [docs[5]]},  # blank: left out, and its citation with it
                   {"text": "A sentence citing nothing.", "citations": []}])
    markers = AnswerRecord(id="rag2026-1", question=TOPICS["rag2026-1"], passages=prompt, reranked=_ranked(docs),
                           answer="First claim [1]. Second claim [3, 2]. Third claim, unsupported.")
    simple = AnswerRecord(id="rag2026-2", question=TOPICS["rag2026-2"], passages=prompt, reranked=_ranked(docs),
                          answer="The Simple strategy writes no markers. So nothing is cited.")
    empty = AnswerRecord(id="rag2026-3", question=TOPICS["rag2026-3"], passages=prompt, reranked=_ranked(docs),
                         answer="", failure="empty_answer")
    many = [climbmix(100 + i) for i in range(30)]
    long = AnswerRecord(id="rag2026-4", question=TOPICS["rag2026-4"], reranked=_ranked(many),
                        sentences=[{"text": f"Sentence {i} " + "word " * 37 + "end.", "citations": [d]}
                                   for i, d in enumerate(many)])  # 30 sentences of 40 words each
    return [cited, markers, simple, empty, long]


def test_rag26_caps_citations_reduces_references_to_the_cited_and_cuts_at_1024_words():
    cited, markers, simple, empty, long = (to_rag26(r, "my-run", "team-x", "BM25, extractive") for r in hand_records())
    docs = [climbmix(i) for i in range(6)]
    assert list(cited["metadata"]) == list(RAG26_METADATA)
    assert cited["metadata"] == {"team_id": "team-x", "narrative_id": "rag2026-0", "narrative": TOPICS["rag2026-0"],
                                 "run_id": "my-run", "run_desc": "BM25, extractive"}
    # the first three citations kept (the answer's order: strongest first); references only the cited documents,
    # in ranked order, then the one from the strategy's own retrieval; the blank sentence is gone with its citation
    assert cited["references"] == [docs[0], docs[1], docs[3], climbmix(99)]
    assert cited["answer"] == [{"text": "Claim with four sources.", "citations": [2, 1, 0]},
                               {"text": "Claim from a document of its own retrieval.", "citations": [3]},
                               {"text": "A sentence citing nothing.", "citations": []}]
    # [n] is the prompt's passage n (inverted order: [1] is the fourth ranked document)
    assert markers["references"] == [docs[1], docs[2], docs[3]]
    assert [a["citations"] for a in markers["answer"]] == [[2], [0, 1], []]
    # no citation at all: no references (2025 lists the ranked list anyway, which the 2026 guidelines forbid)
    assert simple["references"] == [] and [a["citations"] for a in simple["answer"]] == [[], []]
    assert len(to_rag25(hand_records()[2], "my-run")["references"]) == 6
    assert empty["answer"] == [] and empty["references"] == []
    # 30 sentences x 40 words: 25 kept (1,000 words; a 26th would make 1,040), references only theirs
    assert len(long["answer"]) == 25 and sum(checker_words(a["text"]) for a in long["answer"]) == 1000
    assert long["references"] == [climbmix(100 + i) for i in range(25)]
    rows = [cited, markers, simple, empty, long]
    errors, warnings = validate(rows, "rag26", TOPICS, climbmix_ids=True)
    assert errors == [] and warnings == ["export:4 topic rag2026-3: empty answer (the track accepts it: no "
                                         "response for the topic)"]


def test_rag26_rules_each_bad_record_is_one_error_line_and_nothing_is_written(tmp_path):
    good = to_rag26(hand_records()[1], "my-run", run_desc="d")
    bad_md = to_rag26(hand_records()[0], "a-run-id-longer-than-twenty", run_desc="")
    bad_md["metadata"]["type"] = "automatic"
    bad_answer = to_rag26(hand_records()[2], ".hidden", run_desc="d")
    bad_answer["metadata"]["narrative"] = "not the topic's text"
    bad_answer["references"] = ["doc-7", climbmix(1)]
    bad_answer["answer"] = [{"text": "x " * 1030, "citations": [0, 0, 0, 0]}, {"text": " ", "citations": []}]
    errors, warnings = validate([good, bad_md, bad_answer], "rag26", TOPICS, climbmix_ids=True)
    assert errors == [
        "export:2 topic rag2026-0: metadata missing or empty keys: run_desc (--run-desc); metadata keys the track "
        "forbids: type; metadata.run_id 'a-run-id-longer-than-twenty' is not 1-20 characters of A-Z a-z 0-9 - _ . "
        "(not starting with a period): --run-id",
        "export:3 topic rag2026-2: metadata.run_id '.hidden' is not 1-20 characters of A-Z a-z 0-9 - _ . (not "
        "starting with a period): --run-id; metadata.narrative is not the topic's text copied exactly; reference "
        "doc-7 is not a ClimbMix document id (shard_<n>_<row>); answer[0] has 4 citations (max 3); answer[1].text "
        "is blank; references never cited: " + climbmix(1) + "; answer is too long (1030 words, max 1024)"]
    assert warnings == ["export: no response for topic rag2026-3", "export: no response for topic rag2026-4"]
    folder = RunFolder(tmp_path / "cell")
    folder.write_answers(hand_records())
    with pytest.raises(SystemExit, match=r"rag_output_trec_rag_2026.jsonl:1 topic rag2026-0: metadata.run_id "
                                         r"'this-cell-name-is-far-too-long' is not 1-20"):
        main([str(folder.dir), "--format", "rag26", "--run-id", "this-cell-name-is-far-too-long"])
    assert not (folder.dir / RAG26_FILE).exists()


def test_every_trec_export_of_hand_written_answers_passes_the_organizers_checker(tmp_path, nltk_data):
    folder = RunFolder(tmp_path / "cell")
    folder.write_answers(hand_records())
    (folder.dir / ".hydra").mkdir()
    (folder.dir / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["generator=crucible", "rerank.k=6"]))
    tsv, requests = write_topics(tmp_path / "topics", TOPICS)
    main([str(folder.dir), "--format", "rag26", "--run-id", "hand-written", "--topics", str(tsv), "--climbmix-ids"])
    rows = [json.loads(line) for line in (folder.dir / RAG26_FILE).read_text().splitlines()]
    assert rows[0]["metadata"]["run_desc"] == "ragtifier RAG pipeline, overrides: generator=crucible, rerank.k=6"
    # rag26 over ClimbMix ids, the track's collection: no exception; the only finding is the empty answer, which
    # the spec lists as a smell (organizers accept `answer: []`). No uncited reference, no fourth citation.
    checked = organizers_check(folder.dir / RAG26_FILE, "rag26", requests, nltk_data)
    assert checked.rc == 0 and checked.unexcepted(foreign_ids=False) == [], checked.output
    assert checked.smells == ["rag26: empty answer given (no sentences)"], checked.output
    # the same answers over LiveRAG's FineWeb ids (what `make demo` cites): only the declared exception is found
    liverag = RunFolder(tmp_path / "liverag")
    liverag.write_answers([AnswerRecord.from_json(json.loads(re.sub(
        r"shard_(\d+)_(\d+)", r"<urn:uuid:00000000-0000-4000-8000-\1\2>", r.model_dump_json())))
        for r in hand_records()])
    main([str(liverag.dir), "--format", "rag26", "--run-id", "hand-written", "--topics", str(tsv)])
    checked = organizers_check(liverag.dir / RAG26_FILE, "rag26", requests, nltk_data)
    assert checked.problems and checked.unexcepted(foreign_ids=True) == [], checked.output
    # 2025's formats: ClimbMix ids are not MS MARCO v2.1 segments (the declared exception); its references are the
    # ranked list by 2025's definition, so a topic citing nothing is a smell there (uncited), never a problem
    for fmt in ("rag25", "rag25_ids"):
        main([str(folder.dir), "--format", fmt, "--run-id", "hand-written", "--topics", str(tsv)])
        checked = organizers_check(folder.dir / f"trec_{fmt}.jsonl", "rag25", requests, nltk_data)
        assert checked.problems and checked.unexcepted(foreign_ids=True) == [], (fmt, checked.output)
        assert any("never cited in the answer" in s for s in checked.smells), checked.output
    # 2024: no spec in the checker, structure only (non-blank sentences, citation indices within references). With
    # no spec nothing is a smell, so the empty answer, which the 2025 and 2026 specs accept, is left out here
    # (with its topic).
    main([str(folder.dir), "--format", "rag24", "--run-id", "hand-written", "--topics", str(tsv)])
    rows24 = [json.loads(line) for line in (folder.dir / "trec_rag24.jsonl").read_text().splitlines()]
    projected = tmp_path / "rag24_as_report.jsonl"
    projected.write_text("".join(json.dumps(as_checker_report(r)) + "\n" for r in rows24 if r["answer"]))
    _, answered = write_topics(tmp_path / "topics24", {t: x for t, x in TOPICS.items() if t != "rag2026-3"})
    checked = organizers_check(projected, None, answered, nltk_data)
    assert checked.rc == 0 and checked.problems == checked.smells == checked.coverage == [], checked.output


# -- TREC RAG 2026 topics and ClimbMix ids through dataset=trec --------------------------------------------------
def write_climbmix_folder(folder: Path, topics: dict[str, str], docs: list[tuple[str, str]]) -> Path:
    """A TREC RAG 2026 folder as the track ships it: trec_rag_2026_queries.tsv, and corpus.jsonl in the shape of
    the track's create_climbmix_corpus.py `--format corpus-jsonl` (`id` = `docid` = shard_<n>_<row>, `contents`)."""
    write_topics(folder, topics)
    (folder / "requests.jsonl").unlink()
    rows = [{"id": d, "contents": text, "docid": d, "source_file": f"/climbmix/{d.rsplit('_', 1)[0]}.parquet",
             "row_number": int(d.rsplit("_", 1)[1]), "mode": "generated_segment_row"} for d, text in docs]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


def rag26_overrides(folder: Path) -> list[str]:
    """dataset=trec over a 2026 folder, as conf/dataset/trec.yaml documents it."""
    return ["dataset=trec", f"dataset.path={folder}", f"dataset.questions.path={folder / 'trec_rag_2026_queries.tsv'}",
            "dataset.corpus.text_field=contents", "dataset.qrels=null"]


def test_dataset_trec_reads_the_2026_topics_tsv_and_keeps_climbmix_ids(tmp_path):
    topics = {"rag2026-37": "Is congestion pricing a \u201ccredible\u201d and fair way to fund the MTA? What's "
                            "the Bronx\u2019s tradeoff?", "rag2026-118": "  Another need.  "}
    docs = [("shard_00459_61697", "Congestion pricing funds transit in New York."),
            ("shard_01789_3390", "The Bronx has asthma rates well above the city's average and heavy traffic.")]
    folder = write_climbmix_folder(tmp_path / "rag26", topics, docs)
    read = [(q.id, q.question) for q in TrecTopics(str(folder / "trec_rag_2026_queries.tsv")).load()]
    assert read == [("rag2026-37", topics["rag2026-37"]), ("rag2026-118", "Another need.")]
    # dataset=trec as conf/dataset/trec.yaml says for 2026: the ids as written, ClimbMix ids as passage ids
    dataset = instantiate(compose_config(rag26_overrides(folder), tmp_path).dataset)
    assert [(q.id, q.question) for q in dataset.questions] == read
    assert [(p.passage_id, p.doc_id) for p in dataset.corpus.passages] == [(d, d) for d, _ in docs]
    chunked = instantiate(compose_config([*rag26_overrides(folder), "dataset.corpus.chunk_words=8"], tmp_path).dataset)
    assert [(p.passage_id, p.doc_id) for p in chunked.corpus.passages][1:] == [
        ("shard_01789_3390#p0", "shard_01789_3390"), ("shard_01789_3390#p1", "shard_01789_3390")]
    (folder / "bad.tsv").write_text("rag2026-1 no tab\n")
    with pytest.raises(DataError, match=r"bad.tsv:1: expected 2 tab-separated columns"):
        TrecTopics(str(folder / "bad.tsv")).load()


def test_a_2026_folder_runs_end_to_end_and_every_export_passes_the_organizers_checker(data_dir, tmp_path, nltk_data):
    from rag.main import run
    from tests.data.collections import hotpot_collection

    collection = hotpot_collection(data_dir)
    ids = {d["id"]: climbmix(500 + i) for i, d in enumerate(collection.docs)}
    topics = {f"rag2026-{q['id']}": q["text"] for q in collection.queries}
    folder = write_climbmix_folder(tmp_path / "rag26", topics, [(ids[d["id"]], d["text"]) for d in collection.docs])
    _, requests = write_topics(tmp_path / "checker", topics)
    overrides = [*rag26_overrides(folder), "generator=extractive", "retriever=bm25", "retriever.k=10", "rerank.k=3",
                 "logger=none"]
    run_dir = tmp_path / "run"
    run(compose_config([f"paths.cache_dir={tmp_path / 'cache'}", *overrides]), run_dir)
    (run_dir / ".hydra").mkdir()
    (run_dir / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))  # as Hydra writes it
    records = RunFolder(run_dir).records()
    assert [r.id for r in records] == list(topics) and all(r.answer for r in records)
    assert {r.reranked[0]["doc_id"] for r in records} <= set(ids.values())
    tsv = folder / "trec_rag_2026_queries.tsv"
    main([str(run_dir), "--format", "rag26", "--run-id", "extractive-bm25", "--topics", str(tsv), "--climbmix-ids"])
    rows = [json.loads(line) for line in (run_dir / RAG26_FILE).read_text().splitlines()]
    assert [r["metadata"]["narrative_id"] for r in rows] == list(topics)
    assert rows[0]["metadata"]["run_desc"] == "ragtifier RAG pipeline, overrides: " + ", ".join(sorted(
        o for o in overrides if o != "logger=none"))  # the run tag's rule: where-and-how settings left out
    # the extractive answer cites nothing (no markers): sentences with no citation, hence no references
    assert all(r["references"] == [] and r["answer"] and not any(a["citations"] for a in r["answer"]) for r in rows)
    checked = organizers_check(run_dir / RAG26_FILE, "rag26", requests, nltk_data)
    assert checked.rc == 0 and checked.problems == checked.smells == checked.coverage == [], checked.output
    for fmt in ("rag25", "rag25_ids"):
        main([str(run_dir), "--format", fmt, "--run-id", "extractive-bm25", "--topics", str(tsv)])
        checked = organizers_check(run_dir / f"trec_{fmt}.jsonl", "rag25", requests, nltk_data)
        assert checked.unexcepted(foreign_ids=True) == [], (fmt, checked.output)
    main([str(run_dir), "--format", "rag24", "--run-id", "extractive-bm25", "--topics", str(tsv)])
    projected = tmp_path / "rag24_as_report.jsonl"
    projected.write_text("".join(json.dumps(as_checker_report(json.loads(line))) + "\n"
                                 for line in (run_dir / "trec_rag24.jsonl").read_text().splitlines()))
    checked = organizers_check(projected, None, requests, nltk_data)
    assert checked.rc == 0 and checked.problems == [] and checked.coverage == [], checked.output
