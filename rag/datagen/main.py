"""Entry point: `python -m rag.datagen corpus=<jsonl.gz> n=500 categories=ragtifier llm=<engine> out=<folder>`.

Composes `conf/datagen.yaml` (the project's `llm`, `retriever` and `paths` groups, the `datagen/categories`
presets), generates the pairs into a journal in `out`, then writes the data folder (see `rag.datagen.output`)
and `report.md` / `report.json`. Bad settings or data end in one line naming the setting or file (exit 2).
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import hydra
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from rag.core.errors import ConfigError, DataError, MissingDataError, ServiceError
from rag.core.hashing import stable_hash
from rag.core.io import atomic_write_json, atomic_write_text
from rag.data.corpus import JsonlCorpus
from rag.datagen.categories import CategorySet
from rag.datagen.config import CONF_DIR  # also registers the resolver conf/datagen.yaml uses
from rag.datagen.documents import DocumentPool
from rag.datagen.filters import Filters
from rag.datagen.generator import JOURNAL_FILE, DataGenerator, GenerationSettings
from rag.datagen.output import QA_FILE, place_corpus, qa_rows, write_qa
from rag.datagen.report import build_report, render_markdown
from rag.llm.cache import ResponseCache
from rag.prompts import PROMPT_DIR

log = logging.getLogger(__name__)

CLEAR_ERRORS = (DataError, MissingDataError, ServiceError, ConfigError, FileNotFoundError)


def resolve_corpus(corpus: str | None, data_dir: str | None) -> Path:
    if not corpus:
        raise ConfigError("corpus=<path> is required: a {doc_id, text} JSONL file (gzip allowed)")
    path = Path(str(corpus)).expanduser()
    candidates = [path] if path.is_absolute() else [Path.cwd() / path] + (
        [Path(data_dir).expanduser() / path] if data_dir else [])
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    raise MissingDataError(f"corpus={corpus}: file not found (looked at {', '.join(str(c) for c in candidates)})")


def _prompt_text(name: str, prompt_dir: str | None) -> str:
    path = Path(prompt_dir or PROMPT_DIR) / f"{name}.yaml"
    return path.read_text(encoding="utf-8") if path.is_file() else name


def fingerprint(cfg: DictConfig, corpus: Path) -> str:
    """Everything that changes which pairs a slot gets (not `n`: a rerun with a larger n extends the set)."""
    container = OmegaConf.to_container(cfg, resolve=True)
    prompts = [cfg.generation.prompt, cfg.filters.answerable.get("prompt", "datagen_answerable"),
               cfg.filters.closed_book.get("prompt", "datagen_closed_book")]
    return stable_hash({
        "corpus": str(corpus), "corpus_size": corpus.stat().st_size, "corpus_fields": container["corpus_fields"],
        "seed": cfg.seed, "categories": container["categories"], "llm": container["llm"],
        "judge_llm": container.get("judge_llm"), "retriever": container["retriever"],
        "documents": container["documents"], "generation": container["generation"],
        "filters": container["filters"], "embedder": container["embedder"],
        "prompts": [_prompt_text(p, cfg.generation.prompt_dir) for p in prompts],
    }, length=16)


def datagen_corpus(cfg: DictConfig, corpus_path: Path, cache_dir: Path) -> JsonlCorpus:
    """The corpus documents are drawn from; its content hash is remembered under `paths.cache_dir/file_hashes`,
    as rag.main's is (not under ~/.cache/rag, where the default would put it)."""
    return JsonlCorpus(path=str(corpus_path), data_dir=None, chunk_words=int(cfg.documents.chunk_words),
                       name=corpus_path.name.split(".")[0], id_field=cfg.corpus_fields.id,
                       text_field=cfg.corpus_fields.text, hash_cache_dir=str(cache_dir / "file_hashes"))


def generate(cfg: DictConfig) -> dict[str, Any]:
    """Run a composed datagen config; returns the report (also used by tests)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    start = time.perf_counter()
    out = Path(str(cfg.out)).expanduser().resolve()
    data_dir = cfg.paths.get("data_dir")
    cache_dir = Path(str(cfg.paths.cache_dir)).expanduser().resolve()
    # settings first: a bad categorization or filter fails before any model or index is loaded
    categories = CategorySet(**OmegaConf.to_container(cfg.categories, resolve=True))
    filters = Filters(OmegaConf.to_container(cfg.filters, resolve=True))
    gen = OmegaConf.to_container(cfg.generation, resolve=True)
    try:
        settings = GenerationSettings(**gen)
    except TypeError as err:
        raise ConfigError(f"generation: {err}".replace("__init__()", "setting")) from None
    settings.check()
    corpus_path = resolve_corpus(cfg.corpus, data_dir)
    corpus = datagen_corpus(cfg, corpus_path, cache_dir)
    docs = cfg.documents
    pool = DocumentPool(corpus, min_words=int(docs.min_words), max_prompt_words=int(docs.max_prompt_words),
                        query_words=int(docs.query_words), max_jaccard=float(docs.max_jaccard))

    response_cache = ResponseCache(cache_dir / "llm", enabled=bool(cfg.cache.llm_responses))
    engine = instantiate(cfg.llm, cache=response_cache)
    judge = engine if cfg.get("judge_llm") is None else instantiate(cfg.judge_llm, cache=response_cache)
    retriever = instantiate(cfg.retriever) if categories.multi_doc_probability > 0 else None
    embedder = instantiate(cfg.embedder) if "near_duplicate" in filters.enabled else None
    generator = DataGenerator(
        engine=engine, judge=judge, categories=categories, pool=pool, filters=filters, settings=settings,
        retriever=retriever, prepare_retriever=(lambda: retriever.prepare(corpus, cache_dir)) if retriever else None,
        embedder=embedder, n=int(cfg.n), seed=int(cfg.seed), journal_path=out / JOURNAL_FILE,
        fingerprint=fingerprint(cfg, corpus_path))
    try:
        slots = generator.run()
    finally:
        for part in {id(engine): engine, id(judge): judge}.values():
            part.close()

    kept = sorted((r for r in slots.values() if r["status"] == "kept"), key=lambda r: r["slot"])[: int(cfg.n)]
    columns, rows = qa_rows(kept, categories)
    place_corpus(corpus_path, out, str(cfg.corpus_placement), cfg.corpus_fields.id, cfg.corpus_fields.text)
    write_qa(out, columns, rows)
    seconds = time.perf_counter() - start
    usage = {"engine": engine.usage.to_dict()}
    if judge is not engine:
        usage["judge"] = judge.usage.to_dict()
    run = {"seconds": round(seconds, 1), "pairs_this_run": generator.pairs_this_run,
           "pairs_per_hour_this_run": round(generator.pairs_this_run * 3600 / seconds, 1) if seconds else None,
           "llm_calls": sum(u["calls"] for u in usage.values()),
           "llm_cache_hits": sum(u["cache_hits"] for u in usage.values()),
           "prompt_tokens": sum(u["prompt_tokens"] for u in usage.values()),
           "completion_tokens": sum(u["completion_tokens"] for u in usage.values()),
           "engine": engine.model, "judge": judge.model, "seed": int(cfg.seed), "corpus": str(corpus_path),
           "categories": categories.name, "host": socket.gethostname(),
           "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    report = build_report(slots, kept, categories, int(cfg.n), filters.enabled,
                          {"run": run, "usage": usage, "output": str(out / QA_FILE)})
    atomic_write_json(out / "report.json", report)
    atomic_write_text(out / "report.md", render_markdown(report))
    return report


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="datagen")
def main(cfg: DictConfig) -> None:
    try:
        try:
            report = generate(cfg)
        except InstantiationException as err:
            raise (err.__cause__ if isinstance(err.__cause__, CLEAR_ERRORS) else err) from None
    except CLEAR_ERRORS as err:
        log.error("%s: %s", type(err).__name__, err)
        sys.exit(2)
    out = Path(str(cfg.out)).expanduser().resolve()
    if not report["obtained_pairs"]:  # no dataset to run: say why, never suggest a rag.main command that fails
        log.error("DataError: 0 of %d pairs survived generation and the filters; %s counts what each step "
                  "rejected (e.g. lower documents.min_words, or relax filters.*)", report["requested_pairs"],
                  out / "report.md")
        sys.exit(2)
    print(f"\n{report['obtained_pairs']} of {report['requested_pairs']} pairs -> {out / QA_FILE}\n"
          f"report: {out / 'report.md'}\nrun it: python -m rag.main dataset=liverag_dev paths.data_dir={out}",
          flush=True)
