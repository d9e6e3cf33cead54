"""Issue 35, item 4: every cache of model output is keyed by the engine, as the response cache is (engine kind,
weights by content, engine settings), never by the display name alone. `llm=gemma3_270m` (llama.cpp) and
`llm=vllm_gemma3_270m` (vLLM) load the same GGUF under the same name; they share no nugget set, no UMBRELA grade and
no InstructRAG rationale.

vLLM does not run here. Its engine is built from its config without loading a model (as tests/vllm's key test
does): its identity names the GGUF by hash and its engine settings, which is all a cache key needs. The vLLM config
gets `llm.max_model_len=null` here only so that rendering a rationale prompt needs no tokenizer (counting tokens
would convert the GGUF into a Hugging Face folder first); the key still holds vLLM's own signature.
"""

from __future__ import annotations

import pytest
from hydra.utils import instantiate

from eval.nuggets import AutoNuggetizer, Topic
from eval.umbrela import GradeItem, UmbrelaGrader
from rag.generate.base import GenerationContext
from rag.llm.cache import ResponseCache, file_sha256
from rag.llm.factory import build_engine
from tests.conftest import compose_config
from tests.generate.helpers import DATA_DIR


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    """(llama.cpp, vLLM) engines of one GGUF, built from their conf/llm YAMLs, neither loaded."""
    import llama_cpp  # noqa: F401  (installed by `make setup`: missing fails, never skips)

    root = tmp_path_factory.mktemp("engines")
    cache = ResponseCache(root / "llm")
    llama = build_engine(compose_config(["llm=gemma3_270m"], root).llm, cache)
    vllm = build_engine(compose_config(["llm=vllm_gemma3_270m", "llm.max_model_len=null"], root).llm, cache)
    yield llama, vllm
    llama.close()


def test_one_gguf_one_name_two_engine_identities(engines):
    llama, vllm = engines
    assert llama.model == vllm.model == "gemma-3-270m-q4_k_m"  # the display name every cache used to key on
    # one shipped file: vLLM converts it, llama.cpp loads its q8_0 copy (llm.requantize), named by that copy's hash
    assert file_sha256(llama.shipped_file) == vllm.identity()["model_id"]["gguf"]["sha256"]
    assert llama.identity()["model_id"]["sha256"] == file_sha256(llama.model_file) != file_sha256(llama.shipped_file)
    assert vllm.identity()["engine"]["backend"] == "vllm" and "llama_cpp" in llama.identity()["engine"]


def test_no_nugget_set_is_shared(engines, tmp_path):
    llama, vllm = engines
    nuggetizer = AutoNuggetizer(cache_dir=tmp_path)
    topic = Topic("q1", "What is the capital of France?", ["Paris is the capital of France."])
    made = {"qid": "q1", "query": topic.query, "nuggets": [{"text": "Paris is the capital", "importance": "vital"}]}
    nuggetizer.cache.put(llama, nuggetizer.cache_key(llama, topic), made)  # what `create` stores after making them
    [hit] = nuggetizer.create(llama, [topic])  # read back: no model call
    assert hit.cached and hit.nuggets == made["nuggets"]
    assert nuggetizer.cache_key(vllm, topic) == nuggetizer.cache_key(llama, topic)  # same topic, prompts, settings
    assert nuggetizer.cache.get(vllm, nuggetizer.cache_key(vllm, topic)) is None  # ... yet vLLM's entry is its own
    assert nuggetizer.cache.path(vllm, {}) != nuggetizer.cache.path(llama, {})


def test_no_grade_is_shared(engines, tmp_path):
    llama, vllm = engines
    grader = UmbrelaGrader(cache_dir=tmp_path, mode="text")
    item = GradeItem("q1", "What is the capital of France?", "d1#0", "Paris is the capital of France.")
    grader.cache.put(llama, grader.cache_key(llama, item), {"grade": 3, "raw": "##final score: 3"})
    [hit] = grader.grade(llama, [item])
    assert (hit.grade, hit.cached) == (3, True)
    assert grader.cache_key(vllm, item) == grader.cache_key(llama, item)
    assert grader.cache.get(vllm, grader.cache_key(vllm, item)) is None


def test_no_rationale_is_shared(engines, tmp_path):
    llama, vllm = engines
    generator = instantiate(compose_config(["generator=instructrag"], tmp_path).generator)
    contexts = [GenerationContext(engine=e, cache_dir=str(tmp_path / "cache"), data_dir=str(DATA_DIR))
                for e in engines]
    demos, requests = generator.rationale_requests(contexts[0])
    cache, key = generator.rationale_cache(contexts[0], requests)
    cache.put(llama, key, {"demos": [{**d, "rationale": "Because the document says so."} for d in demos]})
    assert generator.demonstrations(contexts[0]) == (cache.get(llama, key)["demos"], False)  # no model call
    vllm_demos, vllm_requests = generator.rationale_requests(contexts[1])
    assert vllm_demos == demos and [vllm.render(r) for r in vllm_requests] == [llama.render(r) for r in requests]
    vllm_cache, vllm_key = generator.rationale_cache(contexts[1], vllm_requests)
    assert vllm_key == key and vllm_cache.get(vllm, vllm_key) is None
