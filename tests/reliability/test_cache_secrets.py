"""Issue 25, fault 2: `+llm.extra_body.api_key=...` was masked in `.hydra/`, config.json, logs and folder names,
but written verbatim into every `cache/llm/**/*.json` request record. The key's hash may use it; the stored
record may not."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rag.llm.base import Completion, LLMEngine, LLMRequest, SamplingParams
from rag.llm.cache import ResponseCache

SECRET = "sk-live-4f9a8b7c6d5e"


class KeyedEngine(LLMEngine):
    """An engine whose settings carry a key in `extra_body`, as the OpenAI-compatible engine's signature does."""

    def __init__(self, api_key: str, cache: ResponseCache):
        super().__init__(model="keyed", chat_format="chat", cache=cache)
        self.extra_body = {"api_key": api_key, "top_k": 20}
        self.asked = 0

    def signature(self) -> dict[str, Any]:
        return {"base_url": f"https://user:{self.extra_body['api_key']}@llm.example/v1",
                "extra_body": self.extra_body}

    def _generate(self, requests: Sequence[LLMRequest], desc: str) -> list[Completion]:
        self.asked += len(requests)
        return [Completion(text="Paris", prompt_tokens=2, completion_tokens=1) for _ in requests]


def test_no_secret_reaches_the_response_cache_and_entries_still_answer(tmp_path):
    cache = ResponseCache(tmp_path / "llm")
    request = LLMRequest(messages=[{"role": "user", "content": "capital of France?"}],
                         params=SamplingParams(max_tokens=4))
    engine = KeyedEngine(SECRET, cache)
    engine.generate([request])
    again = KeyedEngine(SECRET, cache)
    assert again.generate([request])[0].cached and again.asked == 0  # the masked record still answers
    files = list((tmp_path / "llm").rglob("*"))
    assert files and not any(SECRET in p.read_text() for p in files if p.is_file())
    assert any("***" in p.read_text() for p in files if p.is_file())
    # another key is another entry: the hash uses the key, only the stored copy is masked
    other = KeyedEngine("sk-live-000000000000", cache)
    assert not other.generate([request])[0].cached and other.asked == 1
