"""LLM engines behind one batched interface: a list of requests in, a list of completions out."""

from rag.llm.base import Completion, LLMEngine, LLMRequest, SamplingParams, Usage

__all__ = ["Completion", "LLMEngine", "LLMRequest", "SamplingParams", "Usage"]
