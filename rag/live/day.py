"""Live-day mode: answer a question file before a deadline, stepping down a ladder of cheaper settings.

Each rung of the ladder is the run's composed config with the rung's overrides, run by `rag.pipeline.Pipeline`
(the same retrieval, rerank, ordering, generation and record code as `python -m rag.main`); rungs share the
loaded LLM engine when their `llm` is the same. Questions go in batches; before each batch the deadline guard
picks the rung. Every answer records its rung (`live` in answers.jsonl) and every batch a line in
decisions.jsonl. Answers are journalled per batch, so a rerun into the same folder resumes (and keeps the first
start's deadline). At the end the submission file is validated and written atomically.
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from rag.core.errors import ConfigError
from rag.core.io import JsonlJournal, atomic_write_json, iter_jsonl
from rag.core.secrets import redact
from rag.folders import RunFolder
from rag.generate.base import empty_fallback_name
from rag.generate.extractive import ExtractiveGenerator
from rag.live.guard import DeadlineGuard
from rag.live.submission import SubmissionSpec
from rag.pipeline import Pipeline
from rag.preflight.substitutions import apply_substitutions

log = logging.getLogger(__name__)

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
STATE_FILE = "live_state.json"
DECISIONS_FILE = "decisions.jsonl"
SUBMISSION_FILE = "submission.jsonl"
#: settings a cheaper rung may lower but never raise above the run's own (e.g. a rung's k=20 on a k=10 run)
SMALLER_ONLY = ("retriever.k", "rerank.k")
_DURATION = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*$")


def parse_duration(text: str | float | int) -> float:
    """Seconds in "2h", "90m", "1h30m", "45s" or a plain number of seconds."""
    if isinstance(text, (int, float)):
        return float(text)
    match = _DURATION.match(str(text))
    if not match or not any(match.groups()):
        raise ConfigError(f"live.deadline: cannot read {text!r} (use e.g. 2h, 90m, 1h30m, 45s or seconds)")
    h, m, s = (float(g) if g else 0.0 for g in match.groups())
    return h * 3600 + m * 60 + s


def merge_overrides(*groups: list[str]) -> list[str]:
    """Concatenate override lists, a later value of the same key replacing an earlier one."""
    out: dict[str, str] = {}
    for group in groups:
        for override in group:
            out[override.split("=", 1)[0].lstrip("+~")] = override
    return list(out.values())


#: the command line's short keys for live settings (conf/live.yaml)
LIVE_KEYS = ("questions", "deadline", "out")


def live_folder(questions: str | None, dataset_name: str) -> str:
    """The default folder name under <output_dir>/live/: the question file's stem, else the dataset's name."""
    return Path(str(questions)).stem if questions not in (None, "", "None") else str(dataset_name)


OmegaConf.register_new_resolver("rag.live_folder", live_folder, replace=True)


def split_overrides(overrides: list[str]) -> list[str]:
    """The pipeline's overrides among the command line's: without the live day's own keys and Hydra's."""
    pipeline = []
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        if key in LIVE_KEYS or key == "live" or key.startswith(("live.", "hydra.", "hydra/")) or key == "hydra":
            continue
        pipeline.append(override)
    return pipeline


def compose_conf(name: str, overrides: list[str]) -> DictConfig:
    """conf/<name>.yaml with overrides: inside the running Hydra app (its search path is conf/) or standalone."""
    if GlobalHydra.instance().is_initialized():
        return compose(config_name=name, overrides=overrides)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name=name, overrides=overrides)


def compose_live(overrides: list[str]) -> DictConfig:
    """conf/live.yaml composed with command-line overrides, as `python -m rag.live` does (for tests and notebooks)."""
    return compose_conf("live", overrides)


class LiveDay:
    """One live-day run into `out_dir` (see the module docstring)."""

    def __init__(self, live: DictConfig, pipeline_overrides: list[str], out: Path | None = None):
        self.live = live
        self.start = time.time()
        base = []
        if live.questions:
            path = Path(str(live.questions)).expanduser().resolve()
            base = ["dataset=liverag_live", f"dataset.questions.path={path}"]
            if any(o.split("=", 1)[0] == "dataset" for o in pipeline_overrides):
                base = [f"dataset.questions.path={path}"]
        self.overrides = merge_overrides(base, pipeline_overrides)
        self.guard: DeadlineGuard = instantiate(live.guard, _convert_="all")
        self.spec: SubmissionSpec = instantiate(live.submission, _convert_="all")
        self.pipelines: dict[int, Pipeline] = {}
        self.cfg0 = self.compose(0)
        from rag.preflight import check_config

        problems = check_config(self.cfg0)  # before any index is built or model loaded, as rag.main does
        if problems:
            raise ConfigError("preflight: " + "; ".join(problems))
        self.out = Path(out) if out is not None else \
            Path(self.cfg0.paths.output_dir) / "live" / live_folder(live.questions, self.cfg0.dataset.name)

    def compose(self, rung: int) -> DictConfig:
        """The rung's config: the command line's overrides, then the rung's; a rung never raises a k."""
        overrides = merge_overrides(self.overrides, list(self.guard.rungs[rung].overrides))
        cfg = compose_conf("config", overrides)
        apply_substitutions(cfg)  # substitutions=embedded: the same stand-ins as `python -m rag.main`
        if rung > 0:
            for key in SMALLER_ONLY:
                own, new = OmegaConf.select(self.cfg0, key), OmegaConf.select(cfg, key)
                if isinstance(own, int) and isinstance(new, int) and new > own:
                    OmegaConf.update(cfg, key, own)
        return cfg

    def pipeline(self, rung: int) -> Pipeline:
        """The rung's pipeline, built on first use, sharing rung 0's engine when the llm config is the same."""
        if rung not in self.pipelines:
            cfg = self.cfg0 if rung == 0 else self.compose(rung)
            engine = None
            if rung != 0 and 0 in self.pipelines:
                same = OmegaConf.to_container(cfg.llm, resolve=True) == \
                    OmegaConf.to_container(self.cfg0.llm, resolve=True)
                engine = self.pipelines[0].engine if same else None
            self.pipelines[rung] = Pipeline(cfg, engine=engine)
        return self.pipelines[rung]

    def _deadline_at(self) -> float:
        state_path = self.out / STATE_FILE
        seconds = parse_duration(self.live.deadline)
        if state_path.is_file() and self.live.resume_deadline:
            import json

            state = json.loads(state_path.read_text(encoding="utf-8"))
            log.info("resuming %s: keeping the deadline of the first start", self.out)
            return float(state["deadline_at"])
        deadline_at = self.start + seconds
        atomic_write_json(state_path, {"started_at": self.start, "deadline_s": seconds, "deadline_at": deadline_at,
                                       "overrides": self.overrides})
        return deadline_at

    def _raw_ids(self, pipeline: Pipeline) -> dict[str, Any]:
        """Question id -> the id exactly as the question file wrote it (the submission echoes it)."""
        loader = pipeline.dataset.loader
        if type(loader).__name__ != "LiveRagQuestions":
            return {}
        return {str(row.get("id")): row.get("id") for row in iter_jsonl(loader.file())}

    def run(self) -> dict[str, Any]:
        from tqdm import tqdm

        self.out.mkdir(parents=True, exist_ok=True)
        if self.live.clock not in ("start", "ready"):
            raise ConfigError(f"live.clock must be start or ready, got {self.live.clock!r}")
        if self.live.clock == "start":
            deadline_at = self._deadline_at()
        first = self.pipeline(0)
        questions = first.dataset.questions
        if self.live.clock == "ready":  # the model is loaded and the index built before the slot starts
            first.prepare_index()
            self.start = time.time()
            deadline_at = self._deadline_at()
        raw_ids = self._raw_ids(first)
        folder = RunFolder(self.out)
        journal, decisions = folder.journal(), JsonlJournal(self.out / DECISIONS_FILE)
        done = {r["id"]: r for r in journal.read()}
        if folder.has_answers:
            done.update({r["id"]: r for r in folder.rows()})
        for row in decisions.read():  # a resumed guard continues from the rung it had reached
            self.guard.current = max(self.guard.current, int(row["rung_index"]))
            self.guard.observe(int(row["rung_index"]), int(row["questions"]), float(row["seconds"]))
        todo = [q for q in questions if q.id not in done]
        batch_no = len(decisions.read())
        bar = tqdm(total=len(questions), initial=len(questions) - len(todo), desc="live", unit="q")
        extractive = ExtractiveGenerator()
        replaced = empty_fallback_name(extractive)
        try:
            while todo:
                decision = self.guard.choose(len(todo), deadline_at - time.time())
                rung = self.guard.rungs[decision.rung]
                pipeline = self.pipeline(decision.rung)
                batch, todo = todo[: max(1, int(self.live.batch_size))], todo[max(1, int(self.live.batch_size)):]
                engine = pipeline.engine
                calls_before = engine.usage.calls
                started = time.time()
                # an empty answer would fail the submission: the extractive generator answers in its place
                rows = []
                for record in pipeline.answer(batch, empty_fallback=extractive):
                    row = record.to_json()  # the answers.jsonl line (a dict)
                    row["live"] = {"rung": rung.name, "rung_index": decision.rung, "overrides": rung.overrides,
                                   "batch": batch_no,
                                   "fallback": "extractive (empty answer)" if record.fallback == replaced else None}
                    rows.append(row)
                seconds = time.time() - started
                self.guard.observe(decision.rung, len(batch), seconds)
                journal.append(rows)
                decisions.append([{"batch": batch_no, "rung": rung.name, "rung_index": decision.rung,
                                   "overrides": rung.overrides, "reason": decision.reason,
                                   "estimate_s": decision.estimate_s, "time_left_s": round(deadline_at - started, 3),
                                   "questions": len(batch), "ids": [q.id for q in batch],
                                   "seconds": round(seconds, 3), "llm_calls": engine.usage.calls - calls_before}])
                done.update({row["id"]: row for row in rows})
                batch_no += 1
                spq = self.guard.seconds_per_question(self.guard.current) or 0.0
                left = deadline_at - time.time()
                bar.update(len(batch))
                bar.set_postfix(rung=rung.name, eta=_fmt(spq * len(todo)), left=_fmt(left),
                                status="on time" if spq * len(todo) <= left else "late")
        finally:
            bar.close()
        return self._finish(questions, done, raw_ids, deadline_at)

    def _finish(self, questions, done, raw_ids, deadline_at) -> dict[str, Any]:
        records = [done[q.id] for q in questions]
        lines = [self.spec.line(r, raw_ids.get(r["id"], r["id"])) for r in records]
        ids = [raw_ids.get(q.id, q.id) for q in questions]
        self.spec.write(self.out / SUBMISSION_FILE, lines, ids)  # validated first; raises, writes nothing if bad
        finished = time.time()
        per_rung: dict[str, int] = {}
        for r in records:
            per_rung[r["live"]["rung"]] = per_rung.get(r["live"]["rung"], 0) + 1
        summary = {"questions": len(records), "per_rung": per_rung,
                   "fallbacks": sum(1 for r in records if r["live"].get("fallback")),
                   "deadline_at": deadline_at, "finished_at": finished, "on_time": finished <= deadline_at,
                   "margin_s": round(deadline_at - finished, 3), "submission": str(self.out / SUBMISSION_FILE),
                   "overrides": self.overrides, "ladder": [r.__dict__ for r in self.guard.rungs]}
        atomic_write_json(self.out / "live.json", summary)
        RunFolder(self.out).finish(records, None, redact(OmegaConf.to_container(self.cfg0, resolve=True)))
        return summary

    def close(self) -> None:
        for rung in sorted(self.pipelines, reverse=True):  # rung 0 owns the shared engine: close it last
            self.pipelines[rung].close()


def _fmt(seconds: float) -> str:
    sign = "-" if seconds < 0 else ""
    seconds = abs(int(seconds))
    return f"{sign}{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
