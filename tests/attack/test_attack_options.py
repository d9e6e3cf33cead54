"""Issue 51: an attack crossed with the run's other options. A planting attack against an index it cannot reach
(a hosted retriever, alone or as a composite's source; a prebuilt sharded index) is refused in one line before any
work; an attacked run measures its attack with the default metrics; `experiment=poisoning` sweeps both local
retrievers."""

from __future__ import annotations

import json

import pytest
from hydra import compose, initialize_config_dir

from rag.attack.poisonedrag import PoisonedRAG
from rag.core.errors import ConfigError
from rag.fingerprint import fingerprinted_config
from rag.main import run
from rag.pipeline import Pipeline
from rag.preflight import _resolved, check_cells, check_config
from rag.preflight.attack import add_attack_metrics, unreached_index
from rag.retrieve.base import RemoteRetriever
from tests.cluster.helpers import rag_env, rag_main
from tests.conftest import CONF_DIR, DATA_DIR, compose_config
from tests.instant_endpoint import InstantEndpoint

#: the hosted retrievers' variables, so that the attack is the only problem
KEYS = {"PINECONE_API_KEY": "set-in-this-test", "PINECONE_HOST": "https://pinecone.invalid",
        "OPENSEARCH_HOST": "opensearch.invalid"}
ATTACK_METRICS = ["asr", "asr_poisonedrag", "attack_accuracy", "poisoned"]
FIX = "use a local retriever (retriever=bm25|dense|hybrid) or attack=none"


def _refusal(attack: str, setting: str, searched: str = "a hosted index") -> str:
    return (f"attack={attack} plants passages in the local corpus, but {setting} searches {searched} it cannot "
            f"reach: {FIX}")


UNREACHED = {
    "pinecone": (["retriever=pinecone"], "retriever=pinecone"),
    "opensearch": (["retriever=opensearch"], "retriever=opensearch"),
    "fusion": (["retriever=fusion", "retriever@retriever.sources.dense=pinecone"],
               "retriever=fusion (retriever.sources.dense=pinecone)"),
    "hybrid": (["retriever=hybrid", "retriever@retriever.second=opensearch"],
               "retriever=hybrid (retriever.second=opensearch)"),
}


@pytest.mark.parametrize("case", sorted(UNREACHED))
@pytest.mark.parametrize("attack", ["poisonedrag", "prompt_injection"])
def test_a_planting_attack_against_an_index_it_cannot_reach_is_one_problem(case, attack, tmp_path):
    overrides, setting = UNREACHED[case]
    cfg = compose_config(["dataset=hotpotqa", f"attack={attack}", *overrides], tmp_path)
    assert check_config(cfg, environ=KEYS) == [_refusal(attack, setting)]
    # planting nothing reaches nothing and claims nothing: it may run
    assert check_config(compose_config(["dataset=hotpotqa", f"attack={attack}", "attack.n_passages=0", *overrides],
                                       tmp_path), environ=KEYS) == []


def test_a_local_retriever_and_a_prebuilt_sharded_index(tmp_path):
    for retriever in ("bm25", "dense", "hybrid", "fusion"):
        cfg = compose_config(["dataset=hotpotqa", "attack=poisonedrag", f"retriever={retriever}"], tmp_path)
        assert unreached_index(_resolved(cfg)) is None, retriever
    sharded = compose_config(["dataset=hotpotqa", "attack=poisonedrag", "retriever=sharded"], tmp_path)
    assert unreached_index(_resolved(sharded)) == _refusal(
        "poisonedrag", "retriever=sharded", "an index built beforehand by python -m rag.index")


class NewHostedIndex(RemoteRetriever):
    """A hosted retriever added later: refused by its base class, with no name of it anywhere in the check."""

    kind = "newhosted"

    @property
    def key(self) -> str:
        return "newhosted"

    def connect(self) -> None:
        raise AssertionError("never connected")

    def search(self, queries, k):
        raise AssertionError("never searched")


def test_a_new_hosted_retriever_is_covered_by_its_class():
    attack = {"_target_": f"{PoisonedRAG.__module__}.PoisonedRAG", "n_passages": 1}
    hosted = {"_target_": f"{__name__}.NewHostedIndex", "k": 5}
    assert unreached_index({"attack": attack, "retriever": hosted}) == _refusal("poisonedrag", "retriever=newhosted")
    fused = {"_target_": "rag.retrieve.fusion.FusionRetriever",
             "sources": {"sparse": {"_target_": "rag.retrieve.bm25.BM25Retriever"}, "mine": hosted}}
    assert unreached_index({"attack": attack, "retriever": fused}) == _refusal(
        "poisonedrag", "retriever=fusion (retriever.sources.mine=newhosted)")
    assert unreached_index({"attack": None, "retriever": hosted}) is None


def test_the_pipeline_refuses_it_too_before_anything_is_built(tmp_path):
    """Should a caller skip the preflight: the same line, raised before the corpus, an index or an engine."""
    cfg = compose_config(["dataset=hotpotqa", "attack=poisonedrag", "retriever=pinecone"], tmp_path)
    with pytest.raises(ConfigError) as err:
        Pipeline(cfg)
    assert str(err.value) == _refusal("poisonedrag", "retriever=pinecone")
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("case", ["pinecone", "opensearch", "fusion"])
def test_rag_main_refuses_in_one_line_with_nothing_built(case, hotpot_data, tmp_path):
    overrides, setting = UNREACHED[case]
    with InstantEndpoint() as endpoint:
        env = rag_env(tmp_path, OPENAI_BASE_URL=endpoint.url, OPENAI_MODEL=endpoint.model,
                      OPENAI_API_KEY="instant-endpoint-accepts-any-key", **KEYS)
        proc = rag_main(["attack=poisonedrag", *overrides, "dataset=hotpotqa", "dataset.limit=2",
                         "llm=openai_compatible", "logger=none", f"hydra.run.dir={tmp_path / 'run'}"], env,
                        timeout=300)
        generated = [r for r in endpoint.requests if "completions" in r["path"]]
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert "Traceback" not in out
    [line] = [ln for ln in out.splitlines() if "attack=poisonedrag" in ln]
    assert line.endswith(_refusal("poisonedrag", setting)), line
    assert not generated  # no model was asked (no target answer, no text)
    assert not (tmp_path / "cache").exists()  # no index, no attack file, no cached retrieval
    assert not (tmp_path / "run" / "answers.jsonl").exists()


def test_the_attack_adds_its_metrics_to_any_list(tmp_path):
    cfg = compose_config(["dataset=hotpotqa", "attack=poisonedrag"], tmp_path)
    assert add_attack_metrics(cfg) == ATTACK_METRICS
    assert add_attack_metrics(cfg) == []  # idempotent
    assert [k for k in cfg.metrics if k != "recall_at"] == ["f1", "em", "recall", "retrieval_measures", *ATTACK_METRICS]
    listed = compose_config(["dataset=hotpotqa", "attack=prompt_injection", "metrics=[f1,asr]"], tmp_path)
    assert add_attack_metrics(listed) == ["asr_poisonedrag", "attack_accuracy", "poisoned"]
    clean = compose_config(["dataset=hotpotqa"], tmp_path)
    assert add_attack_metrics(clean) == [] and "asr" not in clean.metrics
    # the added metrics are fingerprinted as metrics; the attack's list itself is not
    flat = fingerprinted_config(cfg)
    assert flat["metrics.asr._target_"] == "rag.metrics.attack.AttackSuccess" and "attack.metrics" not in flat


def test_an_attacked_run_measures_its_attack_with_the_default_metrics(hotpot_data, tmp_path, monkeypatch):
    """`attack=poisonedrag` alone, 2 HotpotQA questions, attacker and generator the instant endpoint."""
    monkeypatch.setenv("OPENAI_API_KEY", "instant-endpoint-accepts-any-key")
    with InstantEndpoint() as endpoint:
        cfg = compose_config(["dataset=hotpotqa", "dataset.limit=2", "attack=poisonedrag", "attack.n_passages=2",
                              "logger=none", "retriever.k=5", "rerank.k=5", "llm=openai_compatible",
                              f"llm.base_url={endpoint.url}", f"llm.model={endpoint.model}"], tmp_path)
        metrics = run(cfg, tmp_path / "run")
    written = json.loads((tmp_path / "run" / "metrics.json").read_text())
    for name in ("attack/asr/all", "attack/asr_poisonedrag/all", "attack/attack_accuracy/all",
                 "attack/poisoned_recall/retrieved/all", "attack/poisoned_precision/prompt/all"):
        assert name in written and name in metrics, name
    assert 0.0 <= written["attack/asr/all"] <= 1.0
    assert "answer/f1/all" in written  # the run's own defaults stay


def _poisoning_cells() -> list:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        master = compose(config_name="config", overrides=["experiment=poisoning"], return_hydra_config=True)
        params = {k: str(v).split(",") for k, v in master.hydra.sweeper.params.items()}
        cells = []
        for generator in params["generator"]:
            for n in params["attack.n_passages"]:
                for retriever in params["retriever"]:
                    cells.append(compose(config_name="config", overrides=[
                        f"paths.data_dir={DATA_DIR}", "experiment=poisoning", f"generator={generator}",
                        f"attack.n_passages={n}", f"retriever={retriever}"]))
    return cells


def test_the_poisoning_sweep_crosses_both_local_retrievers_and_measures_every_cell(hotpot_data):
    cells = _poisoning_cells()
    assert len(cells) == 32
    assert {c.retriever._target_.rsplit(".", 1)[-1] for c in cells} == {"BM25Retriever", "DenseRetriever"}
    assert all(c.retriever.k == 5 and c.rerank.k == 5 and c.dataset.limit == 30 for c in cells)
    for cell in cells:
        assert add_attack_metrics(cell) == ATTACK_METRICS  # no longer listed by the experiment itself
    assert check_cells(cells, environ={}) == []


@pytest.mark.parametrize("dataset", ["liverag_live", "trec", "beir", "ir_datasets"])
def test_an_attack_on_questions_without_gold_answers_is_refused(dataset, tmp_path):
    """No gold answer, no incorrect target answer, nothing planted: the run would report an attack that planted
    nothing (found by tests/combinations). Refused in one line by the question loader's class."""
    from omegaconf import OmegaConf

    from rag.preflight.attack import answerless_targets
    from tests.conftest import compose_config

    extra = {"beir": ["dataset.path=/x"], "trec": ["dataset.path=/x"], "ir_datasets": ["dataset.id=x/y"]}
    cfg = compose_config([f"dataset={dataset}", "attack=poisonedrag", *extra.get(dataset, [])], tmp_path)
    data = OmegaConf.to_container(cfg, resolve=True)
    problem = answerless_targets(data)
    assert problem and f"dataset={dataset}" in problem and "attack=poisonedrag" in problem
    data["attack"]["n_passages"] = 0
    assert answerless_targets(data) is None  # plants nothing: runs
    data["attack"]["n_passages"], data["attack"]["attack_file"] = 5, "targets.json"
    assert answerless_targets(data) is None  # the file brings its targets
    qa = compose_config(["dataset=hotpotqa", "attack=poisonedrag"], tmp_path)
    assert answerless_targets(OmegaConf.to_container(qa, resolve=True)) is None
