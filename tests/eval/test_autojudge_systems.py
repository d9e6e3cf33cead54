"""Our judges as TREC AutoJudge systems (eval/autojudge_systems.py), run by autojudge-base's OWN runner.

Two runs answer three HotpotQA questions (hand-written answers made of the questions' own paragraphs, cited as a
cited strategy's records cite: `sentences` with document ids); their reports are our TREC export of those records
(`rag.export.trec.to_rag25`, the ranked passages as references), the topics a Request JSONL, the
passages a corpus JSONL. The runner is `python -m autojudge_base.cli run --workflow ...` in a subprocess,
exactly the command eval/README.md documents (and its ARGUE form, the other workflow), with the endpoint
injected as AutoJudge injects it (OPENAI_BASE_URL, OPENAI_MODEL, OPENAI_API_KEY) and pointing at the instant
endpoint (tests/instant_endpoint.py). The instant endpoint answers UMBRELA's prompt with a grade here
(`GradingEndpoint`: 2 for a question's own paragraphs, 0 for the others), since
its generic reply is no grade and the pool would have nothing to make nuggets from.

Our side judges the same records with `judge=[nuggets,argue]` (`rag.judge.run.evaluate_records`) against the
nuggets the runner wrote (`judge.nuggetizer.nugget_file`: the same nuggets), in two sweep cells named as the runs,
and `python -m eval.summary SWEEP --leaderboards` writes their leaderboards (eval/autojudge.py). Every per-run and
per-topic value agrees exactly, the `all` rows too: the same nuggets, the same prompts (the answer our nugget judge
reads, `record.answer`, is the report's sentences joined by a space, as a cited strategy's answer is; for an answer
with `[n]` markers it would differ by the markers, which the export strips), the same engine settings, and an
endpoint whose reply depends on the prompt alone. The instant endpoint's replies are no metric value anyone reads:
the check is that the two paths compute the same thing, not what they compute.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from evaltools import DATA_DIR, judge_root

from eval.autojudge_systems import ARGUE_MEASURES, NUGGET_MEASURES
from eval.summary import main as summary_main
from rag.core.io import atomic_write_jsonl
from rag.export.trec import to_rag25
from rag.judge.run import evaluate_records
from rag.records import AnswerRecord
from tests.instant_endpoint import InstantEndpoint, prompt_text
from tests.nltk_data import make_nltk_data

REPO = Path(__file__).resolve().parents[2]
#: the two runs (cell names of our sweep, run ids of the reports)
RUNS = ("0_system=a", "1_system=b")
TOPICS = 3
#: the documented commands (eval/README.md), their placeholders filled by `documented`
WORKFLOWS = {"nuggets": "eval/autojudge_submission/nuggets/workflow.yml",
             "argue": "eval/autojudge_submission/argue/workflow.yml"}
#: a phrase of UMBRELA's prompt (eval/prompts/umbrela.yaml, umbrela_logprobs.yaml)
UMBRELA = "Grade how relevant the passage is to the query"


class GradingEndpoint(InstantEndpoint):
    """The instant endpoint, whose reply to UMBRELA's prompt is a grade: 2 when (query, passage) is one of
    `relevant`, else 0 (the reply and its log-probabilities, so UMBRELA's text and logprobs modes both read it)."""

    def __init__(self, relevant: list[tuple[str, str]], **kwargs: Any):
        super().__init__(**kwargs)
        self.relevant = relevant

    def reply(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        prompt = prompt_text(body)
        out = super().reply(path, body)
        if UMBRELA not in prompt:
            return out
        grade = "2" if any(query in prompt and text in prompt for query, text in self.relevant) else "0"
        choice = out["choices"][0]
        if "message" in choice:
            choice["message"]["content"] = grade
            if "logprobs" in choice:
                choice["logprobs"] = {"content": [{"token": grade, "logprob": -0.1, "bytes": None, "top_logprobs": [
                    {"token": grade, "logprob": -0.1, "bytes": None}]}]}
        else:
            choice["text"] = grade
            if "logprobs" in choice:
                choice["logprobs"] = {"tokens": [grade], "token_logprobs": [-0.1], "top_logprobs": [{grade: -0.1}]}
        return out


def doc_id(title: str) -> str:
    """A corpus id without whitespace (qrels and leaderboards split on it)."""
    return "hotpot:" + "_".join(title.split())


def hand_records() -> dict[str, list[AnswerRecord]]:
    """Per run, three HotpotQA answers: each question's two gold paragraphs and the next question's two as its
    ranked passages; run a cites the right paragraphs, run b cites a wrong one, leaves a sentence uncited and
    answers the third question with nothing."""
    from rag.data.questions import HotpotQAQuestions

    questions = HotpotQAQuestions(path="hotpotqa_musique/hotpotqa_train.json", data_dir=str(DATA_DIR)).load()
    questions = questions[:TOPICS + 1]
    runs: dict[str, list[AnswerRecord]] = {run: [] for run in RUNS}
    for i, q in enumerate(questions[:TOPICS]):
        other = questions[i + 1]
        docs = [(doc_id(t), text) for t, text in zip(q.gold_doc_ids, q.gold_docs)] + \
            [(doc_id(t), text) for t, text in zip(other.gold_doc_ids, other.gold_docs)]
        first = q.gold_docs[0].split(". ")[0].rstrip(".") + "."
        answer = f"The answer is {q.answer}."
        sentences = {
            "0_system=a": [{"text": first, "citations": [docs[0][0]]},
                           {"text": answer, "citations": [docs[0][0], docs[1][0]]}],
            "1_system=b": [[{"text": first, "citations": [docs[2][0]]}, {"text": answer, "citations": []}],
                           [{"text": answer, "citations": [docs[1][0]]}], []][i]}
        for run in RUNS:
            said = sentences[run]
            runs[run].append(AnswerRecord.from_json({
                "id": q.id, "question": q.question, "answer": " ".join(s["text"] for s in said),
                "passages": [{"doc_IDs": [d], "passage": text} for d, text in docs], "context": [d for d, _ in docs],
                "sentences": said, "hop": q.hop, "generator": "hand"}))
    return runs


def write_inputs(root: Path, runs: dict[str, list[AnswerRecord]]) -> dict[str, Path]:
    """The runner's inputs: a report file per run (our rag25 export), the Request JSONL, the corpus JSONL."""
    (root / "runs").mkdir(parents=True)
    for run, records in runs.items():
        atomic_write_jsonl(root / "runs" / f"{run}.jsonl", [to_rag25(r, run) for r in records])
    first = runs[RUNS[0]]
    atomic_write_jsonl(root / "topics.jsonl", [{"request_id": r.id, "title": r.question} for r in first])
    docs = {p.doc_IDs[0]: p.passage for records in runs.values() for r in records for p in r.passages}
    atomic_write_jsonl(root / "docs.jsonl", [{"id": d, "text": t} for d, t in docs.items()])
    return {"RUNS": root / "runs", "TOPICS.jsonl": root / "topics.jsonl", "DOCS.jsonl": root / "docs.jsonl",
            "OUT": root / "out"}


def documented(workflow: str) -> list[str]:
    """The README's command as written (one line of a shell block), with `workflow` as its `--workflow` (the README
    gives ARGUE as the same command with the other workflow)."""
    lines = [line.strip() for line in (REPO / "eval" / "README.md").read_text(encoding="utf-8").splitlines()
             if line.strip().startswith(f"python -m autojudge_base.cli run --workflow {WORKFLOWS['nuggets']} ")]
    assert len(lines) == 1, f"eval/README.md documents the runner's command once: {lines}"
    words = shlex.split(lines[0])
    return [workflow if w == WORKFLOWS["nuggets"] else w for w in words]


def run_documented(workflow: str, fills: dict[str, Path], endpoint: InstantEndpoint, nltk: Path, cache: Path
                   ) -> subprocess.CompletedProcess:
    words = [str(fills.get(w, w)) for w in documented(workflow)]
    env = {**os.environ, "OPENAI_BASE_URL": endpoint.url, "OPENAI_MODEL": endpoint.model,
           "OPENAI_API_KEY": "instant-endpoint-accepts-any-key", "CACHE_DIR": str(cache), "NLTK_DATA": str(nltk)}
    env.pop("OPENAI_API_BASE", None)
    return subprocess.run([sys.executable, *words[1:]], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)


def runner_leaderboard(path: Path) -> dict[tuple[str, str, str], float]:
    """The runner's leaderboard (its default `ir_measures` format: run, topic, measure, value)."""
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            run, topic, measure, value = line.split("\t")
            out[(measure, run, topic)] = float(value)
    return out


def our_leaderboards(folder: Path) -> dict[tuple[str, str, str], float]:
    """eval/autojudge.py's files (`run measure topic value`)."""
    out = {}
    for path in folder.glob("*.txt"):
        for line in path.read_text().splitlines():
            run, measure, topic, value = line.split()
            out[(measure, run, topic)] = float(value)
    return out


def our_sweep(root: Path, runs: dict[str, list[AnswerRecord]], nugget_file: Path, endpoint: InstantEndpoint) -> Path:
    """Our pipeline's judges on the same records, one sweep cell per run, then `eval.summary --leaderboards`."""
    llm = {"_target_": "rag.llm.openai_compat.OpenAICompatibleEngine", "model": endpoint.model,
           "base_url": endpoint.url, "api_key_env": None}
    sweep = root / "multirun" / "2026-01-01" / "00-00-00"
    for run, records in runs.items():
        cell = sweep / run
        (cell / ".hydra").mkdir(parents=True)
        (cell / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([run.split("_", 1)[1]]))
        cfg = judge_root("nuggets", "argue", llm=llm, nuggetizer={"nugget_file": str(nugget_file)})
        judged = [AnswerRecord.from_json(r.to_json()) for r in records]
        metrics = evaluate_records(cfg.judge, judged, cell, root / "our_cache")
        atomic_write_jsonl(cell / "answers.jsonl", [r.to_json() for r in judged])
        (cell / "metrics.json").write_text(json.dumps(metrics, default=str))
    assert summary_main([str(sweep), "--no-wandb", "--leaderboards", "nuggets/*", "argue/*"]) == 0
    return sweep / "leaderboards"


@pytest.fixture(scope="module")
def nltk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_nltk_data(tmp_path_factory.mktemp("nltk_data"))


def test_our_judges_run_through_autojudge_bases_runner_and_agree_with_our_leaderboards(tmp_path, nltk):
    runs = hand_records()
    fills = write_inputs(tmp_path, runs)
    relevant = [(r.question, p.passage) for r in runs[RUNS[0]] for p in r.passages[:2]]
    with GradingEndpoint(relevant) as endpoint:
        done = run_documented(WORKFLOWS["nuggets"], fills, endpoint, nltk, tmp_path / "cache")
        assert done.returncode == 0, done.stderr[-4000:]
        out = fills["OUT"]
        # the runner called the injected endpoint with the injected model
        assert endpoint.requests and {r.get("model") for r in endpoint.requests} == {endpoint.model}

        # qrels: UMBRELA's grade of every pooled reference (a question's own paragraphs relevant, the others not)
        qrels = [line.split() for line in (out / "autonuggetizer.qrels.txt").read_text().splitlines()]
        topic_ids = [r.id for r in runs[RUNS[0]]]
        assert {q for q, *_ in qrels} == set(topic_ids)
        own = {r.id: {p.doc_IDs[0] for p in r.passages[:2]} for r in runs[RUNS[0]]}
        assert all(int(grade) == (2 if doc in own[topic] else 0) for topic, _it, doc, grade in qrels)

        # nuggets: one Nuggetizer bank per topic, read back by our own nugget_file reader
        nugget_file = out / "autonuggetizer.nuggets.jsonl"
        banks = [json.loads(line) for line in nugget_file.read_text().splitlines()]
        assert [b["qid"] for b in banks] == topic_ids and all(b["nuggets"] for b in banks)

        ours = our_leaderboards(our_sweep(tmp_path / "ours", runs, nugget_file, endpoint))
        theirs = runner_leaderboard(out / "autonuggetizer.eval.txt")
        wanted = {(m, run, t) for m in NUGGET_MEASURES for run in RUNS for t in [*topic_ids, "all"]}
        assert set(theirs) == wanted and wanted <= set(ours)
        assert {k: theirs[k] for k in wanted} == pytest.approx({k: ours[k] for k in wanted}, abs=1e-12)
        # the runs differ (run b's empty answer scores 0), so the agreement is not of constants
        assert theirs[("nuggets/vital_strict", RUNS[0], "all")] != theirs[("nuggets/vital_strict", RUNS[1], "all")]

        # ARGUE through its workflow: the same nuggets (recreated from the cache), each report's cited sentences
        fills = {**fills, "OUT": tmp_path / "out_argue"}
        done = run_documented(WORKFLOWS["argue"], fills, endpoint, nltk, tmp_path / "cache")
        assert done.returncode == 0, done.stderr[-4000:]
        assert (fills["OUT"] / "argue.nuggets.jsonl").read_text() == nugget_file.read_text()
        theirs = runner_leaderboard(fills["OUT"] / "argue.eval.txt")
        wanted = {(m, run, t) for m in ARGUE_MEASURES for run in RUNS for t in [*topic_ids, "all"]}
        assert set(theirs) == wanted and wanted <= set(ours)
        assert {k: theirs[k] for k in wanted} == pytest.approx({k: ours[k] for k in wanted}, abs=1e-12)
