"""vLLM offline engine for GPU runs (Falcon3-10B generation, Gemma-3-27B judging).

vLLM is imported only when the engine is built, so CPU installs never need it. The whole batch goes to
`LLM.chat` / `LLM.generate` at once, which is where vLLM's continuous batching pays off.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rag.llm.base import Completion, LLMEngine, LLMRequest
from rag.llm.cache import ResponseCache, local_model_identity


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


class VLLMEngine(LLMEngine):
    supports_logprobs = True
    def __init__(self, model: str, tensor_parallel_size: int = 1, max_model_len: int | None = None,
                 gpu_memory_utilization: float = 0.9, dtype: str = "auto", seed: int = 0,
                 chat_format: str = "chat", trust_remote_code: bool = False, download_dir: str | None = None,
                 cache: ResponseCache | None = None):
        super().__init__(model=model, chat_format=chat_format, cache=cache,
                         supports_json_schema=True)
        self.engine_args = dict(model=model, tensor_parallel_size=tensor_parallel_size,
                                max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
                                dtype=dtype, seed=seed, trust_remote_code=trust_remote_code,
                                download_dir=download_dir)
        self._llm = None
        #: how many times this engine loaded its weights (a sweep's goal: once per distinct model)
        self.model_loads = 0

    def model_identity(self) -> dict[str, Any]:
        memo = self.cache.memo_dir if self.cache is not None else None
        return local_model_identity(self.engine_args["model"], memo)

    def signature(self) -> dict[str, Any]:
        args = self.engine_args
        return {"max_model_len": args["max_model_len"], "dtype": args["dtype"], "seed": args["seed"],
                "rendering": self.chat_format}

    @property
    def llm(self):
        if self._llm is None:
            try:
                from vllm import LLM
            except ImportError:
                raise ImportError("llm engine vllm needs the `gpu` extra: pip install -e '.[gpu]'") from None
            self._llm = LLM(**{k: v for k, v in self.engine_args.items() if v is not None})
            self.model_loads += 1
        return self._llm

    def close(self) -> None:
        """Free the GPU memory of the loaded model, so another model (a judge) can load in the same process."""
        if self._llm is None:
            return
        import contextlib
        import gc

        self._llm = None
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

    def sampling_params(self, request: LLMRequest):
        """Translate our parameters to vLLM's, with JSON-schema guided decoding where asked."""
        import vllm

        p = request.params
        kwargs: dict[str, Any] = dict(temperature=p.temperature, top_p=p.top_p, max_tokens=p.max_tokens,
                                      stop=list(p.stop) or None, seed=p.seed)
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

    def _generate(self, requests: Sequence[LLMRequest], desc: str) -> list[Completion]:
        params = [self.sampling_params(r) for r in requests]
        if self.uses_plain_text():
            prompts = [self._plain.render(r.messages) for r in requests]
            outputs = self.llm.generate(prompts, params, use_tqdm=True)
        else:
            outputs = self.llm.chat([r.messages for r in requests], params, use_tqdm=True)
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
