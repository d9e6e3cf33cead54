"""`python -m rag.index`: build an index as a stage of its own, in shards, on the cluster or on a laptop.

    python -m rag.index corpus=liverag_dm/fineweb_docs.jsonl.gz retriever=bm25        # one process, then merged
    python -m rag.index -m corpus='fineweb/sample/10BT/*.parquet' retriever=dense index.num_shards=64 \\
        'index.shard=range(0,64)' hydra/launcher=slurm                  # one array task per shard, then merged
    python -m rag.index corpus=... retriever=bm25 index.num_shards=64 index.step=merge   # merge by hand
    python -m rag.index backend=opensearch corpus=...   # bulk-index into your OpenSearch (backend.service.*)
    python -m rag.index backend=pinecone corpus=...     # upsert e5-base-v2 vectors into your Pinecone index

The index lands in `<paths.cache_dir>/index/<retriever key>__<corpus key>/`, the folder `rag.main` with the same
`retriever` config looks up, so `python -m rag.main retriever=bm25` (or `dense`, or `sharded`) finds it instead
of building it. `index.shard=i` builds shard i only; a multirun over `index.shard` merges when every task has
finished (`MergeShardsCallback`); `index.shard=null` (the default) builds every shard here and merges.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.errors import InstantiationException
from hydra.experimental.callback import Callback
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from rag.core.errors import ConfigError, DataError, MissingDataError, ServiceError
from rag.index.build import build_shard, merge, remove_build
from rag.index.plan import BuildFolder, CorpusInput
from rag.index.sources import Fields, expand_corpus

log = logging.getLogger(__name__)

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
CLEAR_ERRORS = (DataError, MissingDataError, ServiceError, ConfigError, FileNotFoundError)
REMOTE = {"opensearch": "rag.retrieve.opensearch.OpenSearchRetriever",
          "pinecone": "rag.retrieve.pinecone.PineconeRetriever"}


def corpus_input(cfg: DictConfig) -> CorpusInput:
    spec = cfg.get("corpus")
    if spec is None or OmegaConf.is_missing(cfg, "corpus"):
        raise ConfigError("corpus: give the files to index, e.g. corpus=liverag_dm/fineweb_docs.jsonl.gz or "
                          "corpus='fineweb/sample/10BT/*.parquet'")
    spec = OmegaConf.to_container(spec) if OmegaConf.is_config(spec) else spec
    files = expand_corpus(spec, cfg.paths.data_dir)
    ix = cfg.index
    chunk_words = None if ix.chunk_words is None else int(ix.chunk_words)  # None: every record one passage
    return CorpusInput(tuple(files), Fields(ix.id_field, ix.text_field, ix.title_field), chunk_words,
                       int(ix.overlap_words), ix.name, str(ix.empty_text),
                       str(Path(cfg.paths.cache_dir) / "file_hashes"))


def service_config(cfg: DictConfig, kind: str) -> DictConfig:
    """The service's retriever config: `retriever=<kind>` when given (exactly what rag.main uses), else the
    backend's own copy of conf/retriever/<kind>.yaml (`backend.service.*`)."""
    if str(cfg.retriever.get("_target_", "")) == REMOTE[kind]:
        return cfg.retriever
    return cfg.backend.service


def make_backend(cfg: DictConfig) -> Any:
    kind = str(cfg.backend.kind)
    ix = cfg.index
    if kind in REMOTE:
        retriever = instantiate(service_config(cfg, kind))
        if getattr(retriever, "embedder", None) is not None and str(cfg.retriever.get("_target_", "")) != REMOTE[kind]:
            retriever.embedder.setting = "backend.service.embedder"
        if kind == "opensearch":
            from rag.index.opensearch import OpenSearchIngest

            return OpenSearchIngest(retriever, cfg.backend)
        from rag.index.pinecone import PineconeIngest

        return PineconeIngest(retriever, cfg.backend)
    if kind != "local":
        raise ConfigError(f"backend must be local, opensearch or pinecone, got {kind!r}")
    retriever = instantiate(cfg.retriever)
    if getattr(retriever, "kind", None) == "bm25":
        from rag.index.bm25 import Bm25Builder

        return Bm25Builder(retriever, int(ix.bm25_batch_passages))
    if getattr(retriever, "kind", None) == "dense":
        from rag.index.dense import DenseBuilder

        return DenseBuilder(retriever, OmegaConf.to_container(ix.ann, resolve=True), int(ix.dense_group_docs))
    raise ConfigError(f"backend=local builds retriever=bm25 or retriever=dense, got {type(retriever).__name__}; "
                      f"for a service use backend=opensearch or backend=pinecone")


def build_folder(cfg: DictConfig, backend: Any) -> BuildFolder:
    ix = cfg.index
    return BuildFolder(Path(cfg.paths.cache_dir) / "index", corpus_input(cfg), int(ix.num_shards), int(ix.part_docs),
                       backend.name, backend.settings(), getattr(backend, "group_docs", 1))


def run(cfg: DictConfig) -> Path | None:
    """One shard (`index.shard=i`), or every shard and the merge (`index.shard=null`), or the merge alone."""
    ix = cfg.index
    if str(ix.step) not in ("build", "merge"):
        raise ConfigError(f"index.step must be build or merge, got {ix.step!r}")
    backend = make_backend(cfg)
    folder = build_folder(cfg, backend)
    if str(ix.step) == "build":
        shards = range(int(ix.num_shards)) if ix.shard is None else [int(ix.shard)]
        for shard in shards:
            summary = build_shard(folder, backend, shard, bool(ix.progress))
            log.info("shard %d/%d: %d passages from %d documents in %.1f s", shard + 1, int(ix.num_shards),
                     summary["passages"], summary["documents"], summary["seconds"])
        if ix.shard is not None:
            log.info("shard %s done; the index is merged when every shard is (a multirun over index.shard does it, "
                     "or index.step=merge)", ix.shard)
            return None
    target = merge(folder, backend, Path(cfg.paths.cache_dir) / "index", ix.single, int(ix.single_max_passages))
    if not bool(ix.keep_build):
        remove_build(folder)
    print(f"index: {target}", flush=True)
    return target


class MergeShardsCallback(Callback):
    """At the end of a multirun over `index.shard` (e.g. SLURM array tasks), merge the shards into the index.

    Hydra calls it after every task succeeded; our SLURM launcher also after failures, when the merge stops
    with one line naming the shards that did not finish. It runs in the submitting process: for a corpus whose
    merge needs more memory than that machine has, set `hydra.callbacks.merge_shards.enabled=false` and merge as
    a job of its own (`python -m rag.index -m hydra/launcher=slurm index.step=merge ...`)."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if not self.enabled:
            return
        overrides = list(config.hydra.overrides.task)
        if not any(o.split("=", 1)[0].lstrip("+~") == "index.shard" for o in overrides):
            return
        swept = [o for o in overrides if not o.startswith("index.shard=") and _is_sweep(o)]
        if swept:
            log.warning("not merging: the sweep varies more than index.shard (%s); merge each index with "
                        "index.step=merge", ", ".join(swept))
            return
        cfg = OmegaConf.masked_copy(config, [k for k in config if k != "hydra"])
        with _open(cfg):
            cfg.index.step = "merge"
            cfg.index.shard = None
        try:
            run(cfg)
        except CLEAR_ERRORS as err:
            log.error("%s: %s", type(err).__name__, err)
            raise SystemExit(2) from None


def _is_sweep(override: str) -> bool:
    """An override that varies across the multirun's jobs (a comma list or a sweep function)."""
    value = override.split("=", 1)[-1].strip()
    if value.startswith(("range(", "choice(", "glob(", "interval(")):
        return True
    return not value.startswith(("[", "{", "'", '"')) and "," in value.replace("\\,", "")


def _open(cfg: DictConfig) -> Any:
    from omegaconf import open_dict

    return open_dict(cfg)


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="index")
def main(cfg: DictConfig) -> None:
    try:
        try:
            run(cfg)
        except InstantiationException as err:
            raise (err.__cause__ if isinstance(err.__cause__, CLEAR_ERRORS) else err) from None
    except CLEAR_ERRORS as err:
        log.error("%s: %s", type(err).__name__, err)
        sys.exit(2)
