"""Our judges as TREC AutoJudge systems: AutoNuggetizer, UMBRELA and ARGUE under autojudge-base's protocols.

TREC AutoJudge takes a judge as code: classes implementing autojudge-base's protocols (`autojudge_base/__init__.py`:
`NuggetCreatorProtocol.create_nuggets`, `QrelsCreatorProtocol.create_qrels`, `LeaderboardJudgeProtocol.judge`),
named in a `workflow.yml` (`nugget_class`, `qrels_class`, `judge_class`) and run by its own runner,
`python -m autojudge_base.cli run --workflow W --rag-responses DIR --rag-topics FILE [--corpus C] --out-dir OUT`
(`autojudge_base.judge_runner.run_judge`: nuggets, then qrels, then the leaderboard). The workflows are in
`eval/autojudge_submission/` (`nuggets/`, `argue/`); a team submits them as they are.

- `AutoNuggetizerNuggets` (nuggets): the TREC 2024 RAG procedure as `python -m eval.pool` runs it over a sweep
  (`eval.pool.NuggetPool`): per topic, the `pool_depth` first references of every run's report (the ranked list a
  rag25 report carries), graded by UMBRELA, nuggets created with `eval.nuggets.AutoNuggetizer` from those graded at
  least `threshold` (1, "related"); a topic with none falls back to its best-ranked pooled documents (a warning
  names it: the runner refuses an empty nugget bank). Returns `NuggetizerNuggetBanks` (castorini/nuggetizer's
  shape, which `judge.nuggetizer.nugget_file` reads back).
- `UmbrelaQrels` (qrels): the same pool's UMBRELA grades (`eval.umbrela.UmbrelaGrader`; cached per pair, so after
  the nugget step no pair is asked twice) as qrels; an unreadable grade is left out, never read as 0.
- `NuggetScoreJudge` (leaderboard): AutoNuggetizer's assignment per report against the given nugget banks and
  its four scores, measures named as our evaluations are (`nuggets/vital_strict`, ... as `eval.autojudge` writes
  them), so a leaderboard of the runner and `python -m eval.summary SWEEP --leaderboards` compare line by line.
- `ArgueLeaderboardJudge` (leaderboard): ARGUE's sentence flow (`eval.argue.ArgueFlow`) on each report's own
  sentences and citations: `argue/nugget_recall`, `argue/sentence_precision`, `argue/citation_support`, `argue/f1`.

The endpoint comes as AutoJudge gives it (its starter kit's endpoint contract): the runner builds `llm_config`
(`autojudge_base.llm_config.LlmConfigBase.from_env`) from `OPENAI_BASE_URL` (or `OPENAI_API_BASE`), `OPENAI_MODEL`
and `OPENAI_API_KEY`; `engine_from` maps it onto our `OpenAICompatibleEngine` (the key stays in the environment,
as our engine reads it). Responses and grades are cached under `CACHE_DIR` (the config's `cache_dir`), else under
`<out-dir>/cache`.

A report becomes one of our answer records (`report_record`): the topic's text from the Request (its `title`,
else the report's `narrative`), the answer as the report's sentences joined by a space, those sentences with their
cited document ids (ARGUE reads them as a cited strategy's `sentences`), and the references as its passages, in
order, with their text from the report's `documents` or the `--corpus` (a JSONL file of documents, optionally
gzipped, or a folder of them: `id`/`docid`/`doc_id`, `text`/`segment`/`contents`, optional `title`).

autojudge_base is imported where it is used (it fetches NLTK data when imported), so importing this module costs
nothing until the runner calls it.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from statistics import mean
from typing import TYPE_CHECKING, Any

from eval.argue import ARGUE_METRICS, ArgueFlow, JudgedAnswer, argue_scores
from eval.nuggets import SCORE_NAMES, AutoNuggetizer, Topic, nugget_scores
from eval.pool import NuggetPool, PoolTopic, pool_topics
from eval.umbrela import RELATED, GradeItem, UmbrelaGrader
from rag.core.errors import ConfigError
from rag.judge.nugget_sets import TopicNuggets
from rag.llm.cache import ResponseCache
from rag.llm.openai_compat import OpenAICompatibleEngine
from rag.records import AnswerRecord

if TYPE_CHECKING:
    from autojudge_base import Leaderboard, LlmConfigProtocol, Qrels, Report, Request
    from autojudge_base.nugget_data import NuggetBanksProtocol, NuggetizerNuggetBanks

log = logging.getLogger(__name__)

#: the leaderboard measures: our evaluation names (eval.autojudge writes the same)
NUGGET_MEASURES = tuple(f"nuggets/{n}" for n in SCORE_NAMES)
ARGUE_MEASURES = tuple(f"argue/{m}" for m in ARGUE_METRICS)
#: what each measure means, for the runner's `*.measures.yml`
DESCRIPTIONS = {
    "nuggets/vital_strict": "AutoNuggetizer Vital Strict: vital nuggets the answer supports / vital nuggets",
    "nuggets/all_strict": "AutoNuggetizer All Strict: nuggets the answer supports / nuggets",
    "nuggets/vital": "AutoNuggetizer Vital: vital nuggets, support 1 and partial support 0.5, / vital nuggets",
    "nuggets/all": "AutoNuggetizer All: nuggets, support 1 and partial support 0.5, / nuggets",
    "argue/nugget_recall": "ARGUE nugget recall: nuggets credited by rewarded sentences / nuggets",
    "argue/sentence_precision": "ARGUE sentence precision: correct / judged sentences",
    "argue/citation_support": "ARGUE citation support: supporting citations / citations",
    "argue/f1": "harmonic mean of ARGUE nugget recall and sentence precision",
}
#: fields a corpus line may name its id and its text with
ID_FIELDS = ("id", "docid", "doc_id", "_id", "segment_id")
TEXT_FIELDS = ("text", "segment", "contents", "body")


# -- the endpoint ---------------------------------------------------------------------------------------------
def engine_from(llm_config: LlmConfigProtocol, cache_dir: Path | None, **settings: Any) -> OpenAICompatibleEngine:
    """Our OpenAI-compatible engine on the endpoint AutoJudge injects (`llm_config.base_url` / `model`, from
    OPENAI_BASE_URL / OPENAI_MODEL; the key read from OPENAI_API_KEY by the engine itself); `settings` are the
    engine's own (`llm:` in a workflow's settings: json_mode, concurrency, timeout_s, n_ctx, ...)."""
    base_url = getattr(llm_config, "base_url", None) or os.environ.get("OPENAI_BASE_URL") \
        or os.environ.get("OPENAI_API_BASE")
    if not base_url:
        raise ConfigError("no LLM endpoint: AutoJudge injects it as OPENAI_BASE_URL (with OPENAI_MODEL and "
                          "OPENAI_API_KEY); set it")
    cache = ResponseCache(Path(cache_dir) / "llm") if cache_dir else None
    return OpenAICompatibleEngine(model=str(llm_config.model), base_url=str(base_url), api_key_env="OPENAI_API_KEY",
                                  cache=cache, **settings)


def cache_dir_of(llm_config: LlmConfigProtocol, outdir: Any) -> Path:
    """Where responses, grades and nuggets are cached: the config's `cache_dir` (CACHE_DIR), else `<outdir>/cache`."""
    configured = getattr(llm_config, "cache_dir", None)
    return Path(configured) if configured else Path(outdir or ".") / "cache"


# -- reports as our answer records ----------------------------------------------------------------------------
def read_corpus(corpus: str | Path | None, wanted: set[str]) -> dict[str, str]:
    """Texts (title first, as autojudge-base's `Document.get_text`) of the `wanted` ids in a JSONL corpus file or
    folder; {} without a corpus. An ir-datasets id or URL is refused in one line (nothing here downloads)."""
    if not corpus or not wanted:
        return {}
    path = Path(corpus).expanduser()
    if not path.exists():
        raise ConfigError(f"--corpus {corpus}: not a local file or folder; give a JSONL of documents (id, text)")
    files = sorted(p for p in path.rglob("*") if p.name.endswith((".jsonl", ".jsonl.gz", ".json", ".json.gz"))) \
        if path.is_dir() else [path]
    found: dict[str, str] = {}
    for file in files:
        with (gzip.open(file, "rt", encoding="utf-8") if file.name.endswith(".gz")
              else open(file, encoding="utf-8")) as handle:
            for line in handle:
                if not line.strip():
                    continue
                row = json.loads(line)
                doc_id = next((str(row[k]) for k in ID_FIELDS if row.get(k) is not None), None)
                if doc_id in wanted and doc_id not in found:
                    text = next((str(row[k]) for k in TEXT_FIELDS if row.get(k)), "")
                    found[doc_id] = f"{row['title']} {text}" if row.get("title") else text
    return found


def report_record(report: Report, query: str, texts: Mapping[str, str]) -> AnswerRecord:
    """One report as our answer record (module docstring): what every judge of ours reads."""
    sentences = [{"text": s.text, "citations": list(s.citations or [])}
                 for s in report.get_sentences_with_citations()]
    references = list(dict.fromkeys(report.references or [d for s in sentences for d in s["citations"]]))
    documents = report.documents or {}
    passages = [{"doc_IDs": [d], "passage": documents[d].get_text() if d in documents else texts.get(d, "")}
                for d in references]
    return AnswerRecord.from_json({"id": report.metadata.topic_id, "question": query,
                                   "answer": report.get_report_text(), "sentences": sentences,
                                   "passages": passages, "context": references, "hop": None},
                                  where=f"report {report.metadata.run_id}/{report.metadata.topic_id}")


def topic_queries(rag_topics: Sequence[Request]) -> dict[str, str]:
    return {t.request_id: t.title or t.problem_statement or t.background or "" for t in rag_topics}


def runs_as_records(rag_responses: Iterable[Report], rag_topics: Sequence[Request], corpus: str | None
                    ) -> list[tuple[Report, AnswerRecord]]:
    """Every report of a listed topic with its answer record, in the runner's order."""
    queries = topic_queries(rag_topics)
    reports = [r for r in rag_responses if r.metadata.topic_id in queries]
    wanted = {d for r in reports for d in (r.references or []) if d not in (r.documents or {})}
    wanted |= {d for r in reports for s in r.get_sentences_with_citations() for d in s.citations or []}
    texts = read_corpus(corpus, wanted)
    missing = wanted - set(texts) - {d for r in reports for d in (r.documents or {})}
    if missing:
        log.warning("%d referenced documents have no text (not in the reports' documents or --corpus): they are "
                    "not pooled, and citing them supports nothing", len(missing))
    return [(r, report_record(r, queries.get(r.metadata.topic_id) or r.metadata.narrative or "", texts))
            for r in reports]


def by_run(pairs: Sequence[tuple[Report, AnswerRecord]]) -> list[tuple[str, list[AnswerRecord]]]:
    """(run id, its records) in order of first appearance: the cells `eval.pool.pool_topics` pools."""
    runs: dict[str, list[AnswerRecord]] = {}
    for report, record in pairs:
        runs.setdefault(report.metadata.run_id, []).append(record)
    return list(runs.items())


def bank_nuggets(nugget_banks: NuggetBanksProtocol | None, qid: str, query: str) -> TopicNuggets:
    """A topic's nuggets from nugget banks (Nuggetizer's: text, importance; a missing importance is vital, as
    `rag.records.read_nugget_file` reads it), as our judges receive them."""
    bank = (nugget_banks.banks if nugget_banks is not None else {}).get(qid)
    nuggets = [{"text": n.text, "importance": n.importance or "vital"} for n in getattr(bank, "nuggets", None) or []]
    if not nuggets:
        return TopicNuggets(qid, query, source="nugget_file", failure="not_in_nugget_file")
    return TopicNuggets(qid, query, nuggets, source="nugget_file")


def _nugget_banks(sets: Sequence[TopicNuggets]) -> NuggetizerNuggetBanks:
    from autojudge_base.nugget_data import NuggetizerNuggetBank, NuggetizerNuggetBanks

    return NuggetizerNuggetBanks.from_banks_list([
        NuggetizerNuggetBank(qid=s.qid, query=s.query, nuggets=[
            {"text": n["text"], "importance": n.get("importance")} for n in s.nuggets]) for s in sets])


def _require_responses(rag_responses: Iterable[Report] | None, what: str) -> Iterable[Report]:
    if rag_responses is None:
        raise ConfigError(f"{what} pools the runs' reports: set nugget_depends_on_responses: true in workflow.yml")
    return rag_responses


# -- the protocols --------------------------------------------------------------------------------------------
class AutoNuggetizerNuggets:
    """NuggetCreatorProtocol: AutoNuggetizer's nuggets from the runs' UMBRELA-graded pool (module docstring)."""

    def __init__(self) -> None:
        from autojudge_base.nugget_data import NuggetizerNuggetBanks

        #: what the runner loads and saves nuggets as (castorini/nuggetizer's create shape)
        self.nugget_banks_type = NuggetizerNuggetBanks

    def create_nuggets(self, rag_responses: Iterable[Report] | None, rag_topics: Sequence[Request],
                       llm_config: LlmConfigProtocol, nugget_banks: NuggetBanksProtocol | None = None,
                       corpus: str | None = None, *, pool_depth: int = 10, threshold: int = RELATED,
                       nuggetizer: Mapping[str, Any] | None = None, umbrela: Mapping[str, Any] | None = None,
                       llm: Mapping[str, Any] | None = None, outdir: Any = None, **_settings: Any
                       ) -> NuggetizerNuggetBanks:
        """Pool, grade, create (as `eval.pool`); `nuggetizer` / `umbrela` / `llm` override AutoNuggetizer's,
        UMBRELA's and the engine's settings (our config defaults). Given nugget banks are returned unchanged
        (AutoNuggetizer has no refinement step)."""
        if nugget_banks is not None:
            log.info("nugget banks given: kept as they are (AutoNuggetizer creates, it does not refine)")
            return nugget_banks  # type: ignore[return-value]
        pairs = runs_as_records(_require_responses(rag_responses, "create_nuggets"), rag_topics, corpus)
        cache_dir = cache_dir_of(llm_config, outdir)
        engine = engine_from(llm_config, cache_dir, **dict(llm or {}))
        maker = AutoNuggetizer(**dict(nuggetizer or {}), cache_dir=cache_dir)
        pool = NuggetPool(UmbrelaGrader(**dict(umbrela or {}), cache_dir=cache_dir), maker, pool_depth, threshold)
        result = pool.build(engine, by_run(pairs), Path(outdir or ".") / "pool")
        sets = {s.qid: s for s in result.sets}
        fallback = [t for t in result.topics if t.qid not in sets and t.passages]
        if fallback:
            log.warning("%d topics have no pooled document graded >= %d: their nuggets come from their best-ranked "
                        "pooled documents, ungraded (%s)", len(fallback), threshold, ", ".join(t.qid for t in fallback))
            top = maker.max_passages or None
            made = maker.create(engine, [Topic(t.qid, t.query, [p.text for p in t.passages][:top], "pooled")
                                         for t in fallback])
            sets.update({s.qid: s for s in made if s.failure is None})
        order = [t.request_id for t in rag_topics]
        return _nugget_banks([sets[q] for q in order if q in sets])


class UmbrelaQrels:
    """QrelsCreatorProtocol: UMBRELA's 0-3 grade of every pooled referenced document (module docstring)."""

    def create_qrels(self, rag_responses: Iterable[Report], rag_topics: Sequence[Request],
                     llm_config: LlmConfigProtocol, nugget_banks: NuggetBanksProtocol | None = None,
                     corpus: str | None = None, *, pool_depth: int = 10, umbrela: Mapping[str, Any] | None = None,
                     llm: Mapping[str, Any] | None = None, outdir: Any = None, **_settings: Any) -> Qrels:
        from autojudge_base import QrelRow, Qrels

        pairs = runs_as_records(_require_responses(rag_responses, "create_qrels"), rag_topics, corpus)
        cache_dir = cache_dir_of(llm_config, outdir)
        engine = engine_from(llm_config, cache_dir, **dict(llm or {}))
        topics: list[PoolTopic] = pool_topics(by_run(pairs), pool_depth)
        items = [GradeItem(t.qid, t.query, p.passage_id, p.text) for t in topics for p in t.passages]
        grades = UmbrelaGrader(**dict(umbrela or {}), cache_dir=cache_dir).grade(engine, items)
        unreadable = sum(1 for g in grades if g.grade is None)
        if unreadable:
            log.warning("umbrela: %d of %d grades unreadable after the re-asks: left out of the qrels", unreadable,
                        len(grades))
        return Qrels(rows=[QrelRow(topic_id=g.qid, doc_id=g.passage_id, grade=g.grade)
                           for g in grades if g.grade is not None])


class _LeaderboardJudge:
    """What both leaderboard judges share: reports as records, their nuggets, the leaderboard."""

    measures: tuple[str, ...] = ()

    def _build(self, rows: Sequence[tuple[str, str, Mapping[str, float]]], rag_topics: Sequence[Request]
               ) -> Leaderboard:
        from autojudge_base import LeaderboardBuilder, LeaderboardSpec, MeasureSpec

        spec = LeaderboardSpec(measures=tuple(MeasureSpec(m, float, DESCRIPTIONS.get(m, "")) for m in self.measures))
        builder = LeaderboardBuilder(spec)
        for run_id, topic_id, values in rows:
            builder.add(run_id=run_id, topic_id=topic_id, values=dict(values))
        # a report left unscored (its topic has no nuggets) is no row; the runner's `all` row counts it as 0
        return builder.build(expected_topic_ids=[t.request_id for t in rag_topics], on_missing="fix_aggregate")

    def _inputs(self, rag_responses: Iterable[Report], rag_topics: Sequence[Request], llm_config: LlmConfigProtocol,
                nugget_banks: NuggetBanksProtocol | None, corpus: str | None, nuggetizer: Mapping[str, Any] | None,
                llm: Mapping[str, Any] | None, outdir: Any
                ) -> tuple[list[tuple[Report, AnswerRecord]], list[TopicNuggets], AutoNuggetizer, Any]:
        if nugget_banks is None:
            raise ConfigError(f"{type(self).__name__} scores against nuggets: run it with create_nuggets (or "
                              f"--nugget-banks) and judge_uses_nuggets: true")
        pairs = runs_as_records(rag_responses, rag_topics, corpus)
        sets = [bank_nuggets(nugget_banks, record.id, record.question) for _report, record in pairs]
        cache_dir = cache_dir_of(llm_config, outdir)
        return pairs, sets, AutoNuggetizer(**dict(nuggetizer or {}), cache_dir=cache_dir), \
            engine_from(llm_config, cache_dir, **dict(llm or {}))


class NuggetScoreJudge(_LeaderboardJudge):
    """LeaderboardJudgeProtocol: AutoNuggetizer's assignment and scores per report (`eval.nuggets.NuggetJudge`'s,
    on the report's text); the assignments go to `report.evaldata["nuggets"]` (`augment_report: true` saves them)."""

    measures = NUGGET_MEASURES

    def judge(self, rag_responses: Iterable[Report], rag_topics: Sequence[Request], llm_config: LlmConfigProtocol,
              nugget_banks: NuggetBanksProtocol | None = None, qrels: Qrels | None = None,
              corpus: str | None = None, *, nuggetizer: Mapping[str, Any] | None = None,
              llm: Mapping[str, Any] | None = None, outdir: Any = None, **_settings: Any) -> Leaderboard:
        pairs, sets, maker, engine = self._inputs(rag_responses, rag_topics, llm_config, nugget_banks, corpus,
                                                  nuggetizer, llm, outdir)
        usable = [i for i, s in enumerate(sets) if s.failure is None]
        assigned = dict(zip(usable, maker.assign(engine, [(pairs[i][1].question, pairs[i][1].answer, sets[i].nuggets)
                                                          for i in usable])))
        rows = []
        for i, (report, _record) in enumerate(pairs):
            if i not in assigned:
                continue
            scores = nugget_scores(assigned[i].nuggets)
            report.evaldata = {**(report.evaldata or {}), "nuggets": {
                **scores, "nugget_set": sets[i].identity, "assignments": assigned[i].nuggets,
                "failed_windows": assigned[i].failed_windows}}
            values = {f"nuggets/{k}": v for k, v in scores.items()}
            rows.append((report.metadata.run_id, report.metadata.topic_id, values))
        if rows:
            log.info("nuggets: %d reports scored, vital_strict %.3f on average", len(rows),
                     mean(v["nuggets/vital_strict"] for _r, _t, v in rows))
        return self._build(rows, rag_topics)


class ArgueLeaderboardJudge(_LeaderboardJudge):
    """LeaderboardJudgeProtocol: ARGUE's flow (`eval.argue.ArgueFlow`) on each report's sentences and citations;
    `argue` settings are the flow's (decisions, params, count_partial_nugget, ...), `nuggetizer` the matching's."""

    measures = ARGUE_MEASURES

    def judge(self, rag_responses: Iterable[Report], rag_topics: Sequence[Request], llm_config: LlmConfigProtocol,
              nugget_banks: NuggetBanksProtocol | None = None, qrels: Qrels | None = None,
              corpus: str | None = None, *, argue: Mapping[str, Any] | None = None,
              nuggetizer: Mapping[str, Any] | None = None, llm: Mapping[str, Any] | None = None,
              outdir: Any = None, **_settings: Any) -> Leaderboard:
        pairs, sets, maker, engine = self._inputs(rag_responses, rag_topics, llm_config, nugget_banks, corpus,
                                                  nuggetizer, llm, outdir)
        results = ArgueFlow(**dict(argue or {})).run(engine, [r for _p, r in pairs], sets, maker)
        rows = []
        for (report, _record), result in zip(pairs, results):
            if not isinstance(result, JudgedAnswer):
                continue
            scores = argue_scores(result.sentences, len(result.nuggets.nuggets))
            report.evaldata = {**(report.evaldata or {}), "argue": {**scores, "sentences": result.details()}}
            values = {f"argue/{k}": v for k, v in scores.items()}
            rows.append((report.metadata.run_id, report.metadata.topic_id, values))
        return self._build(rows, rag_topics)
