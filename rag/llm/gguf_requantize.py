"""A shipped GGUF file requantized once into a type whose llama.cpp CPU kernels run fastest on this machine.

Why: the small models ship in mixed "K-quant" files (Gemma 3 270M's Q4_K_M holds 81 q5_0 tensors, since its
640-wide rows do not fit Q4_K's 256-value blocks; SmolLM2's file is Q4_1), and llama.cpp's CPU kernels for those types
are slower than its q8_0 ones; only 13 of Gemma's 235 MiB could be repacked into llama.cpp's interleaved AVX layouts.
Requantizing to q8_0 stores every weight the shipped file holds in 8 bits per value with a block scale: a 4-, 5- or
6-bit value lands on the 8-bit grid within 1/254 of its block's largest magnitude, so the answers change only as
much as a different summation order changes them (docs/benchmarks.md, "LLM throughput", has the speed and the
paired F1 comparison). q4_0 and iq4_nl are faster still but round the shipped 5- and 6-bit weights down to 4 bits:
offered, not the default.

The file is made with llama.cpp's own quantizer (`llama_model_quantize`, the library the engine runs), once per
source file, type and `REQUANTIZE_VERSION`: named by the SHA-256 of the source's bytes and built with `build_once`
(file lock, temporary folder, atomic rename), so concurrent jobs never requantize one file twice or read half a
file. The quantizer is deterministic (two runs give the same bytes), and the response cache names a model by its
file's hash, so answers made from the requantized file are cached apart from the shipped file's.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import time
from pathlib import Path

from rag.core.hashing import slug
from rag.core.io import build_once, shared_mode
from rag.llm.cache import file_sha256
from rag.llm.gguf_convert import conversion_root

log = logging.getLogger(__name__)

#: the types offered, as llama.cpp's file types (`llama_ftype`); a type the source cannot be requantized into is
#: refused by llama.cpp itself
FILE_TYPES = {"q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0", "q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0",
              "iq4_nl": "LLAMA_FTYPE_MOSTLY_IQ4_NL"}
#: bump when the requantization's output changes for the same file and type (older files are never reused)
REQUANTIZE_VERSION = 1
#: the provenance file written beside every requantized model
PROVENANCE = "requantized.json"
MODEL_NAME = "model.gguf"


def requantized_file(gguf_file: str | Path, file_type: str, root: str | Path | None = None,
                     memo_dir: str | Path | None = None) -> Path:
    """`gguf_file` requantized to `file_type`, made on first use and reused after (by the source's content hash).
    Kept beside the Hugging Face conversions (`$RAG_GGUF_CONVERT_DIR`, else ~/.cache/rag-toolkit/gguf-hf), in
    `requantized/`: both depend only on the file."""
    if file_type not in FILE_TYPES:
        raise ValueError(f"llm.requantize={file_type!r}: one of {', '.join(FILE_TYPES)}, or null for the file as "
                         "shipped")
    gguf_file = Path(gguf_file)
    digest = file_sha256(gguf_file, memo_dir)
    target = (conversion_root(root) / "requantized"
              / f"{slug(gguf_file.stem)}-{digest[:16]}-{file_type}-v{REQUANTIZE_VERSION}")
    return build_once(target, lambda tmp: requantize(gguf_file, tmp / MODEL_NAME, file_type, digest)) / MODEL_NAME


def requantize(source: Path, out: Path, file_type: str, sha256: str | None = None,
               threads: int | None = None) -> dict:
    """Write `source` requantized to `file_type` at `out` with llama.cpp's quantizer; returns the provenance
    written beside it. Tensors whose rows do not fit the type's blocks keep llama.cpp's own fallback type."""
    import llama_cpp
    from llama_cpp._utils import suppress_stdout_stderr

    start = time.perf_counter()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, FILE_TYPES[file_type])
    params.allow_requantize = True  # the source is already quantized: that is the point
    params.nthread = threads or 0  # 0: llama.cpp's own choice (the hardware threads)
    # llama.cpp prints a line per tensor to the process's own stdout and stderr: kept out of the run's log
    with suppress_stdout_stderr(disable=False):
        code = llama_cpp.llama_model_quantize(str(source).encode(), str(out).encode(), ctypes.byref(params))
    if code != 0 or not out.is_file():
        raise RuntimeError(f"llama.cpp could not requantize {source} to {file_type} (llama_model_quantize "
                           f"returned {code})")
    provenance = {"source": source.name, "source_sha256": sha256 or file_sha256(source), "file_type": file_type,
                  "requantize_version": REQUANTIZE_VERSION, "llama_cpp": llama_cpp.__version__,
                  "bytes": out.stat().st_size, "seconds": round(time.perf_counter() - start, 1)}
    (out.parent / PROVENANCE).write_text(json.dumps(provenance, indent=1) + "\n")
    for path in out.parent.iterdir():  # widen to the umask's mode, so a shared cache works
        os.chmod(path, shared_mode())
    log.info("requantized %s to %s in %.1f s (%d MiB)", source.name, file_type, provenance["seconds"],
             provenance["bytes"] >> 20)
    return provenance
