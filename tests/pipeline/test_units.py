"""Fast checks of the pieces the pipeline is made of: metrics, orderings, caches, files, secrets, export."""

from __future__ import annotations

import json

import pytest
from hydra.errors import ConfigCompositionException

from rag.core.io import JsonlJournal, atomic_write_text
from rag.core.secrets import redact
from rag.export.trec import to_trec
from rag.llm.base import Completion, LLMEngine, LLMRequest, SamplingParams
from rag.llm.cache import ResponseCache
from rag.llm.render import PlainTextRenderer
from rag.metrics.qa import exact_match, normalize_answer, token_f1
from rag.metrics.retrieval import gold_found
from rag.order.ordering import AsRanked, Inverted
from rag.prompts import load_prompt
from rag.records import Passage, ScoredPassage
from tests.conftest import compose_config


def _ranked(*doc_ids: str) -> list[ScoredPassage]:
    return [ScoredPassage(Passage(f"{d}#p0", d, f"text {d}"), 1.0 / (i + 1), i + 1) for i, d in enumerate(doc_ids)]


def test_squad_normalisation_f1_and_em():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert exact_match("the Eiffel Tower", "Eiffel Tower.") == 1.0
    assert token_f1("Paris France", "Paris") == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert token_f1("London", "Paris") == 0.0
    assert token_f1("", "") == 1.0


def test_gold_recall_any_and_all():
    ranked = _ranked("a", "b", "c")
    assert gold_found(["b"], ranked, 1) == (0.0, 0.0, 0.0)
    assert gold_found(["b"], ranked, 2) == (1.0, 1.0, 1.0)
    assert gold_found(["a", "z"], ranked, 3) == (0.5, 1.0, 0.0)


def test_inverted_puts_best_last():
    ranked = _ranked("a", "b", "c")
    assert [p.passage.doc_id for p in Inverted().order(ranked)] == ["c", "b", "a"]
    assert [p.passage.doc_id for p in AsRanked().order(ranked)] == ["a", "b", "c"]


def test_simple_prompt_renders_passages_then_question_as_plain_text():
    template = load_prompt("simple")
    assert "Lewis et al." in template.source
    messages = template.messages(question="Who?", passages=[{"label": 1, "text": "Alpha."},
                                                            {"label": 2, "text": "Beta."}])
    text = PlainTextRenderer().render(messages)
    assert text.endswith("Document [1]: Alpha.\nDocument [2]: Beta.\n\nQuestion: Who?\nAnswer:")
    assert text.startswith("You answer questions using the documents provided.")


class CountingEngine(LLMEngine):
    """Echo backend: lets the cache contract be checked without a model."""

    def __init__(self, cache):
        super().__init__(model="echo", chat_format="plain", cache=cache)
        self.backend_calls = 0

    def _generate(self, requests, desc):
        self.backend_calls += len(requests)
        return [Completion(text=r.messages[-1]["content"][::-1], prompt_tokens=3, completion_tokens=2)
                for r in requests]


def test_response_cache_answers_repeats_for_free(tmp_path):
    requests = [LLMRequest([{"role": "user", "content": t}], SamplingParams(max_tokens=5)) for t in ("ab", "cd")]
    first = CountingEngine(ResponseCache(tmp_path))
    assert [c.text for c in first.generate(requests)] == ["ba", "dc"]
    second = CountingEngine(ResponseCache(tmp_path))
    out = second.generate(requests + [LLMRequest([{"role": "user", "content": "ab"}], SamplingParams(max_tokens=6))])
    assert second.backend_calls == 1  # only the request with new sampling parameters
    assert [c.cached for c in out] == [True, True, False]
    assert second.usage.cache_hits == 2 and second.usage.calls == 1


def test_atomic_write_and_torn_journal(tmp_path):
    target = tmp_path / "out.json"
    atomic_write_text(target, "complete")
    assert target.read_text() == "complete" and not list(tmp_path.glob(".*.tmp"))
    journal = JsonlJournal(tmp_path / "j.jsonl")
    journal.append([{"id": 1}])
    with open(journal.path, "a") as handle:
        handle.write('{"id": 2, "ans')  # killed mid-write
    assert journal.read() == [{"id": 1}]
    journal.append([{"id": 3}])
    assert [r["id"] for r in journal.read()] == [1, 3]


def test_redact_masks_secret_values_but_keeps_env_var_names():
    cfg = {"llm": {"api_key": "sk-123", "api_key_env": "OPENAI_API_KEY", "max_tokens": 5},
           "x": [{"password": "p"}]}
    assert redact(cfg) == {"llm": {"api_key": "***", "api_key_env": "OPENAI_API_KEY", "max_tokens": 5},
                           "x": [{"password": "***"}]}


def test_trec_export_maps_markers_to_references():
    record = {"id": 7, "question": "Why?", "answer": "First claim [2]. Second claim [1, 2].",
              "passages": [{"doc_IDs": ["d1"], "passage": "x"}, {"doc_IDs": ["d2"], "passage": "y"}]}
    out = to_trec(record, "run-a")
    assert out["references"] == ["d1", "d2"] and out["topic_id"] == "7"
    assert out["answer"] == [{"text": "First claim.", "citations": [1]},
                             {"text": "Second claim.", "citations": [0, 1]}]
    assert out["response_length"] == 4
    json.dumps(out)


@pytest.mark.parametrize("override", ["retriever=bm25", "retriever=dense", "rerank=none", "rerank=dense",
                                      "ordering=inverted", "ordering=as_ranked", "generator=simple",
                                      "generator=trustrag", "generator=instructrag", "generator=astuterag",
                                      "generator=iterdrag", "retriever=hybrid", "retriever=e5_base_v2",
                                      "llm=gemma3_270m", "logger=wandb", "logger=none", "dataset=liverag_dev",
                                      "dataset=squad_v2", "dataset=hotpotqa", "dataset=musique",
                                      "dataset=liverag_live"])
def test_every_config_choice_composes_and_instantiates(override, tmp_path):
    from hydra.utils import instantiate

    cfg = compose_config([override, "dataset.limit=20", "retriever.k=50", "rerank.k=5"], tmp_path)
    assert cfg.dataset.limit == 20 and cfg.retriever.k == 50 and cfg.rerank.k == 5
    group = override.split("=")[0]
    if group != "llm":  # the engine is tested with the real model elsewhere
        assert instantiate(cfg[group] if group != "ordering" else cfg.ordering) is not None


def test_unknown_config_value_names_the_choice(tmp_path):
    with pytest.raises(ConfigCompositionException, match="retriever.*nonexistent|nonexistent.*retriever"):
        compose_config(["retriever=nonexistent"], tmp_path)


def test_missing_model_file_is_one_clear_error(tmp_path):
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    cfg = compose_config([f"llm.model_path={tmp_path}/nope.gguf"], tmp_path)
    with pytest.raises((FileNotFoundError, InstantiationException), match="llm.model_path: no model file"):
        instantiate(cfg.llm)


def test_ragtifier_experiment_composes_the_published_setting(tmp_path):
    from hydra import compose, initialize_config_dir

    from tests.conftest import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["experiment=ragtifier", "rerank.k=10"],
                      return_hydra_config=True)
    assert cfg.retriever._target_.endswith("PineconeRetriever") and cfg.retriever.k == 200
    assert cfg.rerank._target_.endswith("BGEReranker") and cfg.rerank.k == 10
    assert cfg.generator._target_.endswith("InstructRAGGenerator")
    assert cfg.llm.model == "tiiuae/Falcon3-10B-Instruct" and cfg.generator.temperature == 0.1
    assert "default_params" not in cfg.llm  # sampling settings belong to the generator and the judges
    assert cfg.judge.liverag.llm.model == "google/gemma-3-27b-it"  # judged apart from the generator
    assert cfg.judge.release_generator is True  # one GPU: the generator is released before the judge loads
    assert cfg.hydra.launcher._target_.endswith("SlurmLauncher")
