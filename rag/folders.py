"""A run folder as one type: the files a run writes, read and written in one place.

Every reader of a run (the report, the sweep summary and status, re-judging, agreement, export, the live day)
goes through `RunFolder` instead of spelling out file names, so what a run folder holds is written down once:

    answers.jsonl          one `AnswerRecord` per question (the final answers, written last but one)
    answers.partial.jsonl  the journal of an unfinished run (what a resume keeps)
    metrics.json           the run metrics (names declared in `rag.metrics.registry`); its work counters
                           (tokens, seconds, calls) are those of the work that produced the answers
    work_history.jsonl     one line per execution of the folder with its own work counters (a rerun's cache
                           hits land here, beside the measured work, never over it; a killed execution too)
    work.partial.jsonl     the work journal of unfinished executions: each one's counters so far, written with
                           every journalled chunk of answers and when it is stopped (what a killed one did)
    config.json            the resolved config, secrets masked
    fingerprint.json       what a resume must match (`rag.fingerprint`)
    eval_report.md         the judges' report
    run.retrieval.trec     the retrieved lists as a TREC run file (`qid Q0 docid rank score tag`)
    run.rerank.trec        the reranked, cut lists, the same way
    qrels.trec             the questions' judgments (TREC qrels), so trec_eval, ranx or ir_measures read the cell
    .run.lock              the lock an execution holds while it writes the folder (`RunFolder.held`)
    run.holder.json        who holds it (host, process, SLURM job, since when), removed when it lets go

Final outputs are written atomically; a folder with `metrics.json` is complete.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from rag.core.errors import BusyError, ConfigError, DataError
from rag.core.hashing import cap_name
from rag.core.io import JsonlJournal, atomic_write_json, atomic_write_jsonl, atomic_write_text, read_jsonl
from rag.core.progress import progress_bar
from rag.core.secrets import mask_text
from rag.core.signals import stop_name, terminate_as_exit
from rag.records import RANKED_LISTS, AnswerRecord, Question, load_answer_records, stage_ranking

log = logging.getLogger(__name__)


def read_json_file(path: Path) -> dict[str, Any]:
    """A JSON object from a file; a malformed file is one DataError naming it and the line."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{err.lineno}: malformed JSON ({err.msg})") from None


@dataclass(frozen=True)
class RunFolder:
    """One run's folder (a sweep cell, a standalone run, a live day's output)."""

    dir: Path

    ANSWERS = "answers.jsonl"
    JOURNAL = "answers.partial.jsonl"
    METRICS = "metrics.json"
    CONFIG = "config.json"
    FINGERPRINT = "fingerprint.json"
    EVAL_REPORT = "eval_report.md"
    #: stage -> its TREC run file (rag.export.trec writes them from the stored lists)
    RUN_FILES = {"retrieval": "run.retrieval.trec", "rerank": "run.rerank.trec"}
    QRELS = "qrels.trec"
    #: overrides that say where or how a run is reported, never what it ran (left out of its run tag)
    TAG_EXCLUDED = ("paths.", "hydra.", "logger", "local", "resume", "cluster")
    WORK_HISTORY = "work_history.jsonl"
    WORK_JOURNAL = "work.partial.jsonl"
    LOCK = ".run.lock"
    HOLDER = "run.holder.json"
    #: what a run writes (a reused folder with any of these must match its fingerprint)
    OUTPUTS = (ANSWERS, JOURNAL, METRICS, WORK_HISTORY, WORK_JOURNAL)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dir", Path(self.dir))

    # -- paths ------------------------------------------------------------------------------------------------
    @property
    def answers_path(self) -> Path:
        return self.dir / self.ANSWERS

    @property
    def journal_path(self) -> Path:
        return self.dir / self.JOURNAL

    @property
    def metrics_path(self) -> Path:
        return self.dir / self.METRICS

    @property
    def config_path(self) -> Path:
        return self.dir / self.CONFIG

    @property
    def fingerprint_path(self) -> Path:
        return self.dir / self.FINGERPRINT

    def run_file_path(self, stage: str) -> Path:
        return self.dir / self.RUN_FILES[stage]

    @property
    def qrels_path(self) -> Path:
        return self.dir / self.QRELS
    @property
    def work_history_path(self) -> Path:
        return self.dir / self.WORK_HISTORY

    # -- state ------------------------------------------------------------------------------------------------
    @property
    def has_answers(self) -> bool:
        return self.answers_path.is_file()

    @property
    def complete(self) -> bool:
        """The run finished: its metrics are written (after its answers)."""
        return self.metrics_path.is_file()

    def journal(self) -> JsonlJournal:
        return JsonlJournal(self.journal_path)

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold the folder while this execution writes it. A second execution into the same folder (a requeue
        while the first still runs, the same `run_dir` given twice) would append to one journal and sum both
        executions' work into metrics.json; it is refused in one line naming the holder instead. The lock is an
        OS file lock (`filelock`), so a killed holder releases it and the next execution resumes."""
        from filelock import FileLock, Timeout

        self.dir.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.dir / self.LOCK))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            raise BusyError(f"{self.dir} is being written by another execution ({self.holder()}); wait for it to "
                            f"end, or stop it (a rerun then resumes the folder)") from None
        holder = self.dir / self.HOLDER
        try:
            atomic_write_json(holder, {"host": socket.gethostname(), "pid": os.getpid(),
                                       "slurm_job": os.environ.get("SLURM_JOB_ID"),
                                       "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
            yield
        finally:
            holder.unlink(missing_ok=True)
            lock.release()

    def holder(self) -> str:
        """Who holds the folder, from `run.holder.json` (in one phrase; "holder unknown" while it is written)."""
        try:
            info = json.loads((self.dir / self.HOLDER).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return "holder unknown"
        job = f", SLURM job {info['slurm_job']}" if info.get("slurm_job") else ""
        return f"process {info.get('pid')} on {info.get('host')}{job}, since {info.get('since')}"

    def resumed(self, questions: Sequence[Question]) -> tuple[dict[str, AnswerRecord], list[Question]]:
        """What a resumed run keeps and what it still answers: the answers journalled or written, by id, without the
        failed ones, and the questions without a kept answer (the failed ones generated again), in order."""
        done = {r.id: r for r in map(AnswerRecord.from_json, self.journal().read())}
        if self.has_answers:
            done.update({r.id: r for r in self.records()})
        retry = sorted(i for i, r in done.items() if r.failure)
        for i in retry:
            del done[i]
        todo = [q for q in questions if q.id not in done]
        if retry:
            log.info("resuming: %d failed answers (%s) are generated again", len(retry), ", ".join(retry[:5]))
        if done:
            log.info("resuming: %d answers already written, %d to go", len(done), len(todo))
        return done, todo

    def journal_lines(self) -> int:
        """Answers journalled by an unfinished run (what a resume keeps)."""
        if not self.journal_path.is_file():
            return 0
        with open(self.journal_path, "rb") as handle:
            return sum(1 for line in handle if line.endswith(b"\n"))

    # -- reading ----------------------------------------------------------------------------------------------
    def records(self) -> list[AnswerRecord]:
        """Every answer of `answers.jsonl` (a malformed line names the file and line)."""
        return load_answer_records(self.answers_path)

    def rows(self) -> list[dict[str, Any]]:
        """`answers.jsonl` as plain JSON rows (what a W&B table or a submission file is made from)."""
        return read_jsonl(self.answers_path)

    def metrics(self) -> dict[str, Any]:
        """`metrics.json`, or {} when the run has not finished."""
        return read_json_file(self.metrics_path) if self.metrics_path.is_file() else {}

    def config(self) -> dict[str, Any]:
        """The resolved config the run saved (`config.json`), or {}."""
        return read_json_file(self.config_path) if self.config_path.is_file() else {}

    def work_history(self) -> list[dict[str, Any]]:
        """Every execution's own work counters, oldest first (`work_history.jsonl`), or []."""
        return read_jsonl(self.work_history_path) if self.work_history_path.is_file() else []

    @cached_property
    def saved_config(self) -> dict[str, Any]:
        """`config()`, read once."""
        return self.config()

    def setting(self, key: str) -> Any:
        """A dotted value of the saved config (`retriever.k`), or None."""
        node: Any = self.saved_config
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return None
            node = node[part]
        return node

    def qrels_level(self) -> str:
        """What the run's judgments name (`dataset.qrels.level`; `document` for gold documents and older runs)."""
        return str(self.setting("dataset.qrels.level") or "document")

    def run_tag(self) -> str:
        """The run's tag in TREC files: its Hydra overrides (`.hydra/overrides.yaml`, secrets already masked),
        sorted and comma-joined as in sweep folder names, without where-and-how settings; else the folder name."""
        import yaml

        path = self.dir / ".hydra" / "overrides.yaml"
        try:
            overrides = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else []
        except (OSError, yaml.YAMLError):
            overrides = []
        kept = sorted(str(o) for o in overrides or []
                      if not str(o).lstrip("+~").startswith(self.TAG_EXCLUDED))
        tag = ",".join(kept) or self.dir.name
        return cap_name("_".join(mask_text(tag).split()), 120)

    def retrieval_depth(self) -> int | None:
        """How deep the retrieve stage ran (what its latency was paid for): the pipeline records it in
        `metrics.json`; for folders written before it did, the rule it used then (max of retriever.k and
        cache.retrieval_depth)."""
        value = self.metrics().get("retrieval_depth")
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        k = max(int(self.setting("retriever.k") or 0), int(self.setting("cache.retrieval_depth") or 0))
        return k or None

    # -- writing ----------------------------------------------------------------------------------------------
    def write_answers(self, records: Iterable[AnswerRecord | Mapping[str, Any]]) -> None:
        atomic_write_jsonl(self.answers_path, [r.to_json() if isinstance(r, AnswerRecord) else dict(r)
                                               for r in records])

    def write_metrics(self, metrics: Mapping[str, Any]) -> None:
        atomic_write_json(self.metrics_path, dict(metrics))

    def write_config(self, config: Mapping[str, Any]) -> None:
        atomic_write_json(self.config_path, dict(config))

    def write_rankings(self, records: Sequence[AnswerRecord], tag: str | None = None,
                       level: str | None = None) -> dict[str, Path]:
        """Both stages' TREC run files and the judgments (`qrels.trec`), atomically, from the stored lists:
        `qid Q0 id rank score tag`, ids at the judgments' level (`rag.records.stage_ranking`), the tag from the
        cell's overrides (`run_tag`)."""
        tag = tag or self.run_tag()
        level = level or self.qrels_level()
        bad = next((r.id for r in records if not r.id or any(c.isspace() for c in r.id)), None)
        if bad is not None:
            raise DataError(f"{self.dir}: question id {bad!r} is empty or holds whitespace: a TREC run file cannot "
                            f"name it")
        written = {}
        for stage, field in RANKED_LISTS.items():
            lines = [f"{r.id} Q0 {item} {rank} {score!r} {tag}" for r in records
                     for rank, (item, score) in enumerate(stage_ranking(getattr(r, field), level), start=1)]
            written[stage] = self.run_file_path(stage)
            atomic_write_text(written[stage], "".join(f"{line}\n" for line in lines))
        judged = [f"{r.id} 0 {item} {grade}" for r in records for item, grade in sorted(r.relevance().items())]
        atomic_write_text(self.qrels_path, "".join(f"{line}\n" for line in judged))
        written["qrels"] = self.qrels_path
        return written

    def answer_journalled(self, todo: Sequence[Question], chunk: int,
                          answer: Callable[[list[Question]], list[AnswerRecord]], work: Callable[[], Mapping[str, Any]],
                          done: dict[str, AnswerRecord], first: Callable[[], None] | None = None) -> str:
        """Answer `todo` chunk by chunk into the answers journal (and `done`), journalling this execution's work
        (`work()`, its counters so far) with every chunk and once more if it is stopped, saying how, so that the
        execution that finishes the folder counts a killed one's work (`record_work`). `first` runs before the first
        chunk, inside the journalled part (ranking every question ahead). Returns this execution's id."""
        execution, answered, journal = f"{socket.gethostname()}-{os.getpid()}-{time.time_ns()}", 0, self.journal()
        with terminate_as_exit(), progress_bar(len(todo), "answers", enabled=bool(todo), unit="q") as bar:
            try:
                if todo and first is not None:
                    first()
                for offset in range(0, len(todo), chunk):
                    rows = answer(list(todo[offset: offset + chunk]))
                    answered += len(rows)
                    # the work first: a kill between the two writes loses answers (made again), never their work
                    self.journal_work(execution, answered, work())
                    journal.append([row.to_json() for row in rows])
                    done.update({row.id: row for row in rows})
                    bar.update(len(rows))
            except BaseException as err:
                # a refusal (ConfigError) is no stop: its folder cannot resume under the same config
                if not isinstance(err, ConfigError) and (answered or did_work(work())):
                    self.journal_work(execution, answered, work(), stopped=stop_name(err))
                raise
        return execution

    def journal_work(self, execution: str, answered: int, work: Mapping[str, Any], stopped: str | None = None) -> None:
        """Journal an unfinished execution's work so far (its counters since it started, and the answers it
        journalled): written with every chunk of answers, and once more when the execution is stopped (`stopped`
        names how), so that a killed execution's work is counted by the execution that finishes the folder."""
        line = {"execution": execution, "answered": answered, **work_of(work)}
        JsonlJournal(self.dir / self.WORK_JOURNAL).append([{**line, "stopped": stopped} if stopped else line])

    def unfinished_work(self, current: str) -> list[dict[str, Any]]:
        """The executions that journalled work and never finished the folder (killed, preempted, failed), oldest
        first: each one's last line, with `wasted`, its work after its last journalled answer (the part of it
        that produced nothing kept), where it was stopped in a way that let it say so."""
        lines = [line for line in JsonlJournal(self.dir / self.WORK_JOURNAL).read() if line.get("execution") != current]
        by_execution: dict[str, list[dict[str, Any]]] = {}
        for line in lines:
            by_execution.setdefault(str(line["execution"]), []).append(line)
        out = []
        for own in by_execution.values():
            last, kept = own[-1], [line for line in own if not line.get("stopped")]
            # stopped with a word: what it did after its last chunk; killed outright: unmeasured (nothing to say)
            wasted = subtract_work(last, kept[-1] if kept else {}) if last.get("stopped") else {}
            out.append({**last, "wasted": wasted})
        return out

    def record_work(self, metrics: Mapping[str, Any], answered: int, execution: str = "") -> dict[str, Any]:
        """The metrics to write for an execution that produced `answered` new answers: its own work counters go to
        `work_history.jsonl`, after those of the executions that were stopped before finishing (the work
        journal); the folder's metrics keep the measured work (`measured_work`): the work that produced its
        answers, killed executions' included, with the work they did after their last kept answer as
        `wasted/...`."""
        previous = self.metrics()
        history = self.work_history()
        lines = []
        if previous and not history:  # a folder finished before histories were kept: its figures come first
            lines.append({"execution": 1, "finished_at": None, "answered": previous.get("n_questions"),
                          "note": "from metrics.json, written before work_history.jsonl", **work_of(previous)})
        wasted: dict[str, Any] = {k: v for k, v in previous.items() if k.startswith("wasted/")}
        for stopped in self.unfinished_work(execution):
            lines.append({"execution": len(history) + len(lines) + 1, "answered": stopped["answered"],
                          "finished_at": None, "stopped": stopped.get("stopped") or "killed",
                          **work_of(stopped), **{f"wasted/{k}": v for k, v in stopped["wasted"].items()}})
            kept = subtract_work(stopped, stopped["wasted"]) if stopped["wasted"] else work_of(stopped)
            previous = measured_work(previous, kept, answered=max(1, int(stopped["answered"] or 0)))
            wasted = add_work(wasted, {f"wasted/{k}": v for k, v in stopped["wasted"].items()})
        lines.append({"execution": len(history) + len(lines) + 1, "answered": answered,
                      "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **work_of(metrics)})
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_write_jsonl(self.work_history_path, [*history, *lines])
        return {**measured_work(previous, dict(metrics), answered), **wasted}

    def finish(self, records: Iterable[AnswerRecord | Mapping[str, Any]], metrics: Mapping[str, Any] | None,
               config: Mapping[str, Any]) -> None:
        """Write a finished run: answers, then metrics (which mark the folder complete), then the config; the
        journal goes last, so a crash in between leaves a folder that resumes."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.write_answers(records)
        if metrics is not None:
            self.write_metrics(metrics)
        self.write_config(config)
        self.journal_path.unlink(missing_ok=True)
        (self.dir / self.WORK_JOURNAL).unlink(missing_ok=True)


# -- work counters: what producing the answers cost ---------------------------------------------------------------
#: the generation side's work counters (retrieval, rerank, generation, stage seconds), summed over executions
GENERATION_WORK = ("retrieval_calls", "rerank_calls", "retrieval_cache_hits", "rerank_cache_hits", "model_loads",
                   "llm_calls", "llm_retries", "llm_cache_hits", "llm_empty_completions", "prompt_tokens",
                   "completion_tokens", "llm_seconds", "llm_tokens_per_s", "llm_cost_usd")
GENERATION_PREFIXES = ("time/", "rerank/")
#: the judges' work counters (`eval/...`, and the evaluate stage's seconds)
EVAL_PREFIXES = ("eval/",)
EVAL_KEYS = ("time/evaluate_s",)
#: ratios, recomputed from their summed parts rather than summed
RATIOS = {"llm_tokens_per_s": (("prompt_tokens", "completion_tokens"), "llm_seconds"),
          "rerank/seconds_per_question": (("rerank/seconds",), "rerank/questions")}


def _is_eval_work(key: str) -> bool:
    return key.startswith(EVAL_PREFIXES) or key in EVAL_KEYS


def _is_generation_work(key: str) -> bool:
    return not _is_eval_work(key) and (key in GENERATION_WORK or key.startswith(GENERATION_PREFIXES))


def work_of(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The work counters among a run's metrics."""
    return {k: v for k, v in metrics.items() if _is_generation_work(k) or _is_eval_work(k)}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def did_work(work: Mapping[str, Any]) -> bool:
    """Any call was made (to the LLM, the retriever, the reranker): there is work to count."""
    return any(work.get(k) for k in ("llm_calls", "retrieval_calls", "rerank_calls", "prompt_tokens"))


def subtract_work(total: Mapping[str, Any], part: Mapping[str, Any]) -> dict[str, Any]:
    """The numeric work counters of `total` less those of `part` (ratios left out: they are no sums)."""
    return {k: round(v - (part.get(k) or 0), 6) if isinstance(v, float) else v - (part.get(k) or 0)
            for k, v in work_of(total).items() if _number(v) and k not in RATIOS}


def add_work(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Counters summed key by key."""
    return {k: round((a.get(k) or 0) + (b.get(k) or 0), 6) for k in {*a, *b}}


def measured_work(previous: Mapping[str, Any], current: dict[str, Any], answered: int) -> dict[str, Any]:
    """`current` metrics whose work counters say what the folder's answers cost, not what this execution did.

    Generation: an execution that made no answer (a rerun of a finished folder: stage-cache and response-cache
    hits at most) keeps the previous figures; one that made some (a failed answer redone, a larger
    `dataset.limit`) adds its own to them. Judges: re-scoring from the response cache (no fresh judge call) keeps
    the previous figures; fresh judge calls are a newer measurement and replace them. Quality metrics are always
    the current ones. The execution's own counters are in `work_history.jsonl` either way.
    """
    if not previous:
        return current
    out = {k: v for k, v in current.items() if not (_is_generation_work(k) or _is_eval_work(k))}
    generation_now = {k: v for k, v in current.items() if _is_generation_work(k)}
    generation_before = {k: v for k, v in previous.items() if _is_generation_work(k)}
    if answered <= 0:
        merged = dict(generation_before)
    else:
        merged = {**generation_before, **generation_now}
        for key in set(generation_before) & set(generation_now):
            if _number(generation_before[key]) and _number(generation_now[key]) and key not in RATIOS:
                total = generation_before[key] + generation_now[key]
                merged[key] = round(total, 6) if isinstance(total, float) else total
        for key, (parts, denominator) in RATIOS.items():
            if key in merged and _number(merged.get(denominator)) and merged[denominator]:
                merged[key] = round(sum(float(merged.get(p) or 0) for p in parts) / merged[denominator], 4)
    out.update(merged)
    eval_now = {k: v for k, v in current.items() if _is_eval_work(k)}
    eval_before = {k: v for k, v in previous.items() if _is_eval_work(k)}
    # no judges now: none of their figures; judged from the cache alone: the earlier, measured figures
    fresh_judging = not eval_now or bool(eval_now.get("eval/llm_calls")) or not eval_before
    out.update(eval_now if fresh_judging else eval_before)
    return out
