"""The new config choices compose from the real configs, and a crucible run with an engine that has no
log-probabilities stops at start-up with one line naming the engine."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate

from rag.core.errors import ConfigError
from rag.judge.run import build_judges
from rag.llm.factory import to_plain
from tests.conftest import compose_config


@pytest.mark.parametrize("name", ["crucible", "crucible_verified", "ginger"])
def test_generators_compose_and_instantiate(name, tmp_path):
    cfg = compose_config([f"generator={name}"], tmp_path)
    gen = instantiate(cfg.generator)
    assert gen.name == name
    if name.startswith("crucible"):
        assert gen.verify is (name == "crucible_verified") and gen.k == 1 and gen.bank.size == 20
        assert gen.ranker.mode == "unsupervised"


def test_judge_crucible_composes_with_the_run_llm(tmp_path):
    cfg = compose_config(["judge=crucible"], tmp_path)
    judge = to_plain(cfg.judge)
    assert judge["crucible"]["llm"] == to_plain(cfg.llm)
    assert [j.name for j in build_judges(cfg.judge)] == ["crucible"]
    both = compose_config(["judge=[liverag,crucible]"], tmp_path)
    assert sorted(j.name for j in build_judges(both.judge)) == ["crucible", "liverag"]


def test_engine_without_logprobs_fails_at_start_up(tmp_path, monkeypatch):
    from rag.pipeline import Pipeline

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    cfg = compose_config(["generator=crucible", "llm=claude_haiku", "dataset.limit=1"], tmp_path)
    with pytest.raises(ConfigError) as err:
        Pipeline(cfg)
    assert "AnthropicEngine" in str(err.value) and "log-probabilities" in str(err.value)
