"""Hugging Face model folders made from GGUF files, for engines that cannot read GGUF (vLLM).

vLLM loads only Hugging Face folders, while the project's small models ship as GGUF files (Gemma 3 270M,
SmolLM2-135M-Instruct). transformers reads a GGUF file (`gguf_file=`, with the `gguf` package) and dequantizes
it, but refuses to `save_pretrained` a model loaded that way ("quantized with QuantizationMethod.GGUF and is
not serializable"), so the weights are moved into a fresh model built from the same config and that one is
saved, with the tokenizer (and the chat template the GGUF carries, if any).

A conversion runs once per GGUF file: the folder is named by the SHA-256 of the file's bytes (memoised like the
response cache's model hashes), the dtype and `CONVERTER_VERSION`, and built with `build_once` (file lock, temp
folder, atomic rename), so concurrent jobs never convert the same file twice or see half a folder.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from rag.core.hashing import slug
from rag.core.io import build_once, shared_mode
from rag.llm.cache import file_sha256

log = logging.getLogger(__name__)

#: bump when the conversion's output changes for the same file (folders of older versions are never reused)
CONVERTER_VERSION = 2
#: where converted folders go unless `root` or $RAG_GGUF_CONVERT_DIR says otherwise: once per machine, beside
#: the llama.cpp wheels, since a conversion depends only on the file
DEFAULT_ROOT = Path("~/.cache/rag-toolkit/gguf-hf")
DTYPES = ("bfloat16", "float16", "float32")
#: the provenance file written into every converted folder
PROVENANCE = "gguf_conversion.json"


def conversion_root(root: str | Path | None = None) -> Path:
    return Path(os.path.expanduser(str(root or os.environ.get("RAG_GGUF_CONVERT_DIR") or DEFAULT_ROOT)))


def converted_folder(gguf_file: str | Path, root: str | Path | None = None, dtype: str = "bfloat16",
                     memo_dir: str | Path | None = None) -> Path:
    """The Hugging Face folder for `gguf_file`, converted on first use and reused after (by content hash)."""
    if dtype not in DTYPES:
        raise ValueError(f"llm.dtype={dtype!r}: a GGUF model converts to one of {', '.join(DTYPES)}")
    gguf_file = Path(gguf_file)
    digest = file_sha256(gguf_file, memo_dir)
    target = conversion_root(root) / f"{slug(gguf_file.stem)}-{digest[:16]}-{dtype}-v{CONVERTER_VERSION}"
    return build_once(target, lambda tmp: convert(gguf_file, tmp, dtype, digest))


def convert(gguf_file: Path, out: Path, dtype: str = "bfloat16", sha256: str | None = None) -> dict[str, Any]:
    """Dequantize `gguf_file` into a Hugging Face folder at `out`; returns the provenance written beside it."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = time.perf_counter()
    torch_dtype = getattr(torch, dtype)
    folder, name = str(gguf_file.parent), gguf_file.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    special = special_token_flags(gguf_file)
    for flag, value in special.items():  # transformers drops these (Gemma then runs without its <bos>)
        setattr(tokenizer, flag, value)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch_dtype)
    config = loaded.config
    # the GGUF marker is what makes save_pretrained refuse; the weights are already dequantized
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    fresh.load_state_dict(loaded.state_dict(), strict=True)
    fresh.save_pretrained(out)
    tokenizer.save_pretrained(out)
    provenance = {"gguf_file": name, "gguf_sha256": sha256 or file_sha256(gguf_file), "dtype": dtype,
                  "converter_version": CONVERTER_VERSION, "transformers": transformers.__version__,
                  "architectures": list(config.architectures or []),
                  "chat_template": bool(getattr(tokenizer, "chat_template", None)), **special,
                  "seconds": round(time.perf_counter() - start, 1)}
    (out / PROVENANCE).write_text(json.dumps(provenance, indent=1) + "\n")
    for path in out.iterdir():  # safetensors writes 0600: widen to the umask's mode, so a shared cache works
        os.chmod(path, shared_mode())
    log.info("converted %s to a Hugging Face folder (%s) in %.0f s", name, dtype, provenance["seconds"])
    return provenance


def special_token_flags(gguf_file: Path) -> dict[str, bool]:
    """`add_bos_token` / `add_eos_token` as the GGUF's metadata sets them (llama.cpp follows them; transformers'
    GGUF tokenizer ignores them, and Gemma without its leading <bos> repeats the prompt instead of answering)."""
    from gguf import GGUFReader

    fields = GGUFReader(str(gguf_file)).fields
    out = {}
    for flag in ("add_bos_token", "add_eos_token"):
        field = fields.get(f"tokenizer.ggml.{flag}")
        if field is not None:
            out[flag] = bool(field.contents())
    return out
