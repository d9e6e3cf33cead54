"""Each loader on the real files in the shared data folder."""

from __future__ import annotations

from rag.data.corpus import HotpotQACorpus, JsonlCorpus, MuSiQueCorpus, SquadCorpus
from rag.data.questions import (
    DataMorganaQA,
    HotpotQAQuestions,
    LiveRagQuestions,
    MuSiQueQuestions,
    SquadQuestions,
)


def test_datamorgana_dev_tsv(data_dir):
    questions = DataMorganaQA("liverag_dm/dev_qa.tsv", data_dir=str(data_dir)).load()
    assert len(questions) == 295
    assert len({q.id for q in questions}) == 295  # repeated qids made unique
    assert {q.hop for q in questions} == {"single", "multi"}
    for q in questions:
        assert q.question and q.answer
        assert len(q.gold_doc_ids) == len(q.gold_docs) >= 1
        assert all(d.startswith("<urn:uuid:") for d in q.gold_doc_ids)
        assert (q.hop == "multi") == (q.categories["question_multi-doc"] != "single-doc")
        if q.hop == "multi":
            assert len(q.gold_doc_ids) == 2
    assert "user_expertise-categorization" in questions[0].categories


def test_liverag_live_questions(data_dir):
    questions = LiveRagQuestions("liverag_dm/LiveRAG_LCD_Session1_Question_file.jsonl", str(data_dir)).load()
    assert len(questions) == 500
    assert questions[0].id == "0" and questions[0].answer is None
    assert questions[0].question.startswith("How deep can fish survive")


def test_squad_v1_and_v2(data_dir):
    v1 = SquadQuestions("squad/dev-v1.1.json.gz", str(data_dir)).load()
    assert len(v1) == 10570
    assert all(q.answer for q in v1) and all(len(q.gold_doc_ids) == 1 for q in v1)
    v2 = SquadQuestions("squad/dev-v2.0.json.gz", str(data_dir)).load()
    assert len(v2) == 11873
    assert sum(q.categories["answerable"] == "false" for q in v2) == 5945
    corpus_ids = SquadCorpus("squad/dev-v1.1.json.gz", str(data_dir)).doc_ids
    assert len(corpus_ids) == 2067
    assert all(q.gold_doc_ids[0] in corpus_ids for q in v1)


def test_hotpotqa(data_dir):
    questions = HotpotQAQuestions("hotpotqa_musique/hotpotqa_train.json", str(data_dir)).load()
    assert len(questions) == 100
    assert all(q.hop == "multi" and len(q.gold_doc_ids) == 2 for q in questions)
    corpus = HotpotQACorpus("hotpotqa_musique/hotpotqa_train_corpus.json", str(data_dir))
    assert len(corpus.doc_ids) == 994
    assert all(d in corpus.doc_ids for q in questions for d in q.gold_doc_ids)


def test_musique(data_dir):
    questions = MuSiQueQuestions("hotpotqa_musique/musique_train.json", str(data_dir)).load()
    assert len(questions) == 100
    assert all(2 <= len(q.gold_doc_ids) <= 4 for q in questions)
    assert {q.categories["hops"] for q in questions} <= {"2hop", "3hop", "4hop"}
    corpus = MuSiQueCorpus("hotpotqa_musique/musique_train_corpus.json", str(data_dir))
    assert all(d in corpus.doc_ids for q in questions for d in q.gold_doc_ids)


def test_fineweb_corpus_chunks_and_covers_dev_gold(data_dir):
    corpus = JsonlCorpus("liverag_dm/fineweb_docs.jsonl.gz", str(data_dir), chunk_words=512)
    passages = corpus.passages
    assert len(corpus.doc_ids) == 9998
    assert max(len(p.text.split()) for p in passages) <= 512
    assert len(passages) > 9998  # long documents split into several passages
    first = [p for p in passages if p.doc_id == passages[0].doc_id]
    assert [p.passage_id for p in first] == [f"{passages[0].doc_id}#p{i}" for i in range(len(first))]
    questions = DataMorganaQA("liverag_dm/dev_qa.tsv", data_dir=str(data_dir)).load()
    assert all(d in corpus.doc_ids for q in questions for d in q.gold_doc_ids)
