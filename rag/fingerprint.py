"""Run-folder fingerprints: a run folder only ever holds answers of one configuration.

The fingerprint is a hash of the resolved config minus the keys that cannot change an answer (where files
live, how runs are logged or launched, cache switches, flush sizes, judges). It is written to
`<run dir>/fingerprint.json` before any work starts, together with the fingerprinted (secret-masked) config,
so a later run into the same folder can name the first keys that differ.

`resume=auto` (default) resumes a folder whose fingerprint matches and refuses one that differs, before any
index is built or model loaded; `resume=overwrite` moves the outputs of another (or an unknown) config away and
starts afresh. A folder that already holds this very config's answers is resumed under both, so a job that is
requeued with its command line (SLURM preemption, time limits) never discards its own work. The one difference
both accept as "this config" is a larger `dataset.limit`: the first questions keep their answers and the new ones
are added, so a pilot run grows into the full one.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rag.core.errors import ConfigError
from rag.core.hashing import stable_hash
from rag.core.io import atomic_write_json
from rag.core.secrets import redact
from rag.folders import RunFolder
from rag.metrics.base import SETTINGS

log = logging.getLogger(__name__)

FINGERPRINT_FILE = RunFolder.FINGERPRINT
#: files a run writes into its folder; their presence means the folder holds answers of some config
RUN_OUTPUTS = RunFolder.OUTPUTS
RESUME_MODES = ("auto", "overwrite")

#: top-level keys (and dotted keys) that never change an answer, with the reason (docs/reliability.md lists them)
NOT_FINGERPRINTED: dict[str, str] = {
    "paths": "where data, caches and outputs live (a moved folder holds the same answers)",
    "logger": "where runs are reported (W&B or none)",
    "hydra": "launcher, run and sweep folders",
    "local": "cluster settings (partition, account, setup lines)",
    "cluster": "cluster settings (partition, account, setup lines)",
    "cache": "cache switches and the shared retrieval depth (a deeper retrieval cut to k is the same list)",
    "resume": "this switch itself",
    "system": "what an experiment says of the system it reproduces (name, paper, published scores): no setting",
    "substitutions": "the stand-ins' declaration; the nodes they replaced are fingerprinted as they ran",
    "objective": "the metric reported to Hydra sweepers",
    "report_console": "what the console prints when a run ends",
    "judge": "judges re-score every record on every run; their metrics are recomputed, never resumed",
    "attack.metrics": "the metric options an attack adds to the run's; they are fingerprinted as metrics.<name>",
    "metrics.retrieval_measures": "scored again from the stored ranked lists and judgments on every run "
                                  "(rag.metrics.base.RecordMetric), resumed answers too",
    "metrics.citation": "scored again from the stored records' cited sentences on every run (rag.metrics.base."
                        "RecordMetric), resumed answers too",
    "metrics.no_answer": "scored again from the stored records' answers on every run (rag.metrics.base."
                         "RecordMetric), resumed answers too",
    "generation.chunk_size": "how many answers are journalled per flush",
    "generation.repeats": "extra answers drawn after the folder's own, kept apart in generation_repeats/ (the "
                          "folder's answers are the same)",
    "generation.repeat_temperature": "the sampling temperature of those extra answers only",
    "generation.release_reranker": "whether the reranker's engine is closed before generation (the same lists)",
    "preflight": "checks made before a run (the run itself is the same)",
    "llm.reasoning_floor_tokens": "a limit the preflight checks callers against (the requests are the same)",
    "llm.base_url": "where the endpoint listens: a server restarted on another port resumes its own folder (the "
                    "model name and every sampling setting stay fingerprinted; the response cache keys by the URL, "
                    "so no answer of another endpoint is replayed)",
}
#: keys (at any depth) that hold where a file lives, not what it holds: `dataset.corpus.data_dir` and the like
PATH_KEYS = {"data_dir", "cache_dir", "hash_cache_dir", "output_dir"}
#: keys added after run folders had fingerprints, left out at the value that reproduces the older behaviour so
#: folders written before them keep resuming (a non-default value is fingerprinted like any other key)
ADDED_LATER: dict[str, Any] = {"dataset.offset": 0, "llm.n_threads_batch": None, "attack": None, "query": None,
                               "generation.max_context_words": None, "attribution": None,
                               "compress._target_": "rag.compress.base.NoCompression"}
#: the per-answer metrics (`metrics=[f1,em,recall]`, the default) every answer was scored with before metrics became a
#: config list: at exactly this set they are left out, so older folders resume; any other set is fingerprinted
DEFAULT_METRICS: dict[str, str] = {"metrics.em._target_": "rag.metrics.qa.ExactMatch",
                                   "metrics.f1._target_": "rag.metrics.qa.TokenF1",
                                   "metrics.recall._target_": "rag.metrics.retrieval.GoldRecall"}
#: the one fingerprinted key a folder may change on resume, upwards only (`_extends_limit`)
LIMIT_KEY = "dataset.limit"


def fingerprinted_config(cfg: DictConfig | dict[str, Any]) -> dict[str, Any]:
    """The resolved config as a flat {dotted key: value} dict, without the keys in NOT_FINGERPRINTED and with
    secret-looking values masked (a key never reaches fingerprint.json, and rotating it keeps the folder)."""
    data = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    flat = _flatten(redact(data))
    metric_keys = {k: v for k, v in flat.items()
                   if k.startswith("metrics.") and k.split(".")[1] not in SETTINGS and not _ignored(k)}
    default_metrics = metric_keys == DEFAULT_METRICS
    return {k: v for k, v in sorted(flat.items())
            if not _ignored(k) and not (k in ADDED_LATER and v == ADDED_LATER[k])
            and not (default_metrics and k in metric_keys)}


def fingerprint(cfg: DictConfig | dict[str, Any]) -> dict[str, Any]:
    config = fingerprinted_config(cfg)
    return {"hash": stable_hash(config), "config": config}


def _ignored(key: str) -> bool:
    return key.rsplit(".", 1)[-1] in PATH_KEYS or any(key == name or key.startswith(name + ".")
                                                      for name in NOT_FINGERPRINTED)


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out or ({prefix: {}} if prefix else {})
    return {prefix: obj}


def differing_keys(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Keys whose value differs (or that only one side has): a component swapped for another is named once by
    its `_target_` (its other keys are left out), then the other keys, sorted."""
    keys = sorted(k for k in set(old) | set(new) if old.get(k, "<unset>") != new.get(k, "<unset>"))
    targets = [k for k in keys if k.endswith("._target_") or k == "_target_"]
    swapped = tuple(k[: -len("_target_")] for k in targets)
    return targets + [k for k in keys if k not in targets and not (swapped and k.startswith(swapped))]


def _describe(key: str, old: dict[str, Any], new: dict[str, Any]) -> str:
    def show(d: dict[str, Any]) -> str:
        return json.dumps(d[key], default=str) if key in d else "unset"
    return f"{key} ({show(old)} -> {show(new)})"


def _extends_limit(keys: list[str], old: dict[str, Any], new: dict[str, Any]) -> bool:
    """True when the only change is a larger `dataset.limit` (or none): the dataset's first questions are the same
    questions with the same answers, so a pilot on 20 questions grows into the full run without redoing them.
    A smaller limit still refuses: the rewritten answers.jsonl would drop answers already paid for."""
    if keys != [LIMIT_KEY]:
        return False
    before, after = old.get(LIMIT_KEY), new.get(LIMIT_KEY)
    return isinstance(before, int) and (after is None or (isinstance(after, int) and after > before))


def has_outputs(run_dir: Path) -> bool:
    return any((run_dir / name).exists() for name in RUN_OUTPUTS)


def _previous(run_dir: Path) -> dict[str, Any] | None:
    """The folder's fingerprint; for folders written before fingerprints, rebuilt from its config.json."""
    path = run_dir / FINGERPRINT_FILE
    if path.is_file():
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            raise ConfigError(f"{path}: unreadable fingerprint; start afresh with resume=overwrite") from None
    legacy = RunFolder(run_dir)
    if legacy.config_path.is_file():
        return fingerprint(legacy.config())
    return None


def check_run_dir(cfg: DictConfig, run_dir: str | Path) -> dict[str, Any]:
    """Make `run_dir` safe to run `cfg` in, before any work: resume only the same config.

    Returns the fingerprint written to the folder. Raises ConfigError naming the first differing keys when
    the folder holds outputs of another config (unless `resume=overwrite`, which moves them away first).
    """
    run_dir = Path(run_dir)
    mode = str(cfg.get("resume", "auto") or "auto")
    if mode not in RESUME_MODES:
        raise ConfigError(f"resume={mode!r}: expected one of {', '.join(RESUME_MODES)}")
    current = fingerprint(cfg)
    previous = _previous(run_dir) if has_outputs(run_dir) else None
    old = (previous or {}).get("config", {})
    keys = [] if previous is None or previous.get("hash") == current["hash"] else differing_keys(old, current["config"])
    if _extends_limit(keys, old, current["config"]):
        log.info("%s: dataset.limit raised from %s to %s; the answers already written are kept", run_dir,
                 old[LIMIT_KEY], current["config"][LIMIT_KEY])
        keys = []
    if mode == "overwrite":
        if previous is not None and not keys:
            # a requeued or restarted job repeats its command line: its own answers are kept
            log.info("resume=overwrite: %s already holds answers of this config; resuming them", run_dir)
        else:
            clear_outputs(run_dir)
    elif has_outputs(run_dir):
        if previous is None:
            raise ConfigError(f"{run_dir} holds answers of a run without a fingerprint, so its config cannot be "
                              f"checked: run into a new folder, or pass resume=overwrite to start this one afresh")
        if keys:
            shown = "; ".join(_describe(k, old, current["config"]) for k in keys[:3])
            more = f" and {len(keys) - 3} more" if len(keys) > 3 else ""
            raise ConfigError(f"{run_dir} holds answers of another config (differs in {shown}{more}): run into a "
                              f"new folder (drop hydra.run.dir), or pass resume=overwrite to start this one "
                              f"afresh")
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(run_dir / FINGERPRINT_FILE, current)
    return current


def clear_outputs(run_dir: Path) -> None:
    """Move everything the earlier run wrote out of the folder, then delete it (Hydra's `.hydra/` and the
    current log stay). A kill in between leaves the old outputs in `.replaced-*`, never mixed with new ones."""
    if not run_dir.is_dir():
        return
    keep = {".hydra"}
    entries = [p for p in run_dir.iterdir()
               if p.name not in keep and not p.name.startswith(".replaced-") and p.suffix != ".log"]
    trash = run_dir / f".replaced-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    if entries:
        trash.mkdir()
        for entry in entries:
            os.replace(entry, trash / entry.name)
        log.warning("resume=overwrite: moved %d earlier output(s) of %s away and start afresh", len(entries),
                    run_dir)
    for old in run_dir.glob(".replaced-*"):
        shutil.rmtree(old, ignore_errors=True)
