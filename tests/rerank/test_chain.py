"""Chained rerankers: order of application, cuts between steps, key, hooks and statistics, Hydra composition."""

from __future__ import annotations

from typing import Any

import pytest
from hydra.utils import instantiate

from rag.records import Passage, ScoredPassage, with_ranks
from rag.rerank.base import NoRerank, Reranker
from rag.rerank.bge import BGEReranker
from rag.rerank.chain import MAX_KEY_CHARS, ChainReranker
from rag.rerank.diversity import DiversityReranker
from tests.conftest import compose_config
from tests.generate.helpers import ScriptedEngine


class Recording(Reranker):
    """Reverses each list (or moves `first` to the top) and records what it was given."""

    kind = "recording"

    def __init__(self, name: str, k: int | None = None, first: str | None = None, log: list | None = None,
                 llm: Any = None):
        super().__init__(k)
        self.name, self.first, self.log, self.llm = name, first, log if log is not None else [], llm
        self.stats: dict[str, Any] = {}
        self.prepared: list[Any] = []
        self.closed = False
        self.model_loads = 1

    @property
    def key(self) -> str:
        return f"rec-{self.name}"

    def score(self, queries, candidates):
        raise AssertionError("the chain calls rerank")

    def rerank(self, queries, candidates):
        self.log.append((self.name, [[p.passage.passage_id for p in c] for c in candidates]))
        self.stats["calls"] = self.stats.get("calls", 0) + 1
        out = []
        for cands in candidates:
            order = list(reversed(cands)) if self.first is None else \
                sorted(cands, key=lambda p: p.passage.passage_id != self.first)
            out.append(with_ranks([ScoredPassage(p.passage, float(len(order) - n)) for n, p in enumerate(order)]))
        return out

    def prepare(self, cache_dir, retriever=None):
        self.prepared.append(cache_dir)

    def close(self):
        self.closed = True


def cands(*ids: str) -> list[ScoredPassage]:
    return [ScoredPassage(Passage(i, f"doc-{i}", f"text {i}"), 10.0 - n, n + 1) for n, i in enumerate(ids)]


def ids(ranked: list[ScoredPassage]) -> list[str]:
    return [p.passage.passage_id for p in ranked]


def test_steps_apply_in_order_each_cut_feeding_the_next_and_k_cuts_the_end():
    log: list = []
    chain = ChainReranker({"one": Recording("one", k=3, log=log), "two": Recording("two", first="c", log=log)}, k=2)
    (ranked,) = chain.rerank(["Q?"], [cands("a", "b", "c", "d", "e")])
    assert log == [("one", [["a", "b", "c", "d", "e"]]), ("two", [["e", "d", "c"]])]
    assert ids(ranked) == ["c", "e", "d"]  # the last step's list, uncut by the chain
    assert ids(chain.cut(ranked)) == ["c", "e"]
    swapped = ChainReranker({"two": Recording("two", first="c"), "one": Recording("one", k=3)})
    assert ids(swapped.rerank(["Q?"], [cands("a", "b", "c", "d", "e")])[0]) == ["e", "d", "b"]  # c a b d e reversed


def test_score_counts_down_the_chain_list_and_cut_passages_get_minus_infinity():
    chain = ChainReranker({"one": Recording("one", k=2)})
    assert chain.score(["Q?"], [cands("a", "b", "c")]) == [[float("-inf"), 1.0, 2.0]]


def test_key_joins_step_keys_in_order_with_their_k_and_is_hashed_when_long():
    one, two = Recording("one", k=3), Recording("two")
    assert ChainReranker({"x": one, "y": two}).key == "chain--rec-one-k3--rec-two-kall"
    assert ChainReranker({"y": two, "x": one}).key == "chain--rec-two-kall--rec-one-k3"
    assert ChainReranker({"x": one, "y": two}, k=1).key == ChainReranker({"x": one, "y": two}, k=4).key
    assert ChainReranker({"x": Recording("one", k=4), "y": two}).key != ChainReranker({"x": one, "y": two}).key
    long = {f"s{i}": Recording("a-rather-long-step-name", k=i + 1) for i in range(4)}
    key = ChainReranker(long).key
    assert len(key) <= MAX_KEY_CHARS and key.startswith("chain-") and key.endswith("s0-s1-s2-s3")
    other = ChainReranker({**long, "s3": Recording("a-rather-long-step-name", k=9)}).key
    assert other != key and len(other) == len(key)


def test_prepare_close_and_stats_reach_every_step():
    one, two = Recording("one", k=3), Recording("two")
    chain = ChainReranker({"one": one, "two": two})
    chain.prepare("/cache")
    assert one.prepared == two.prepared == ["/cache"]
    chain.rerank(["Q?"], [cands("a", "b")])
    chain.rerank(["Q?"], [cands("a", "b")])
    assert chain.stats == {"one.calls": 2, "two.calls": 2}
    chain.stats = {}  # what the pipeline does once it has summed them
    assert one.stats == two.stats == {} and chain.stats == {}
    with pytest.raises(ValueError):
        chain.stats = {"x": 1}
    assert chain.model_loads == 2
    chain.close()
    assert one.closed and two.closed


def test_identity_steps_are_skipped_and_an_empty_chain_is_refused():
    chain = ChainReranker({"none": NoRerank(k=2), "one": Recording("one")})
    assert ids(chain.rerank(["Q?"], [cands("a", "b", "c")])[0]) == ["b", "a"]
    assert not chain.is_identity and ChainReranker({"none": NoRerank()}).is_identity
    with pytest.raises(ValueError, match="rerank.steps is empty"):
        ChainReranker({})


def test_config_steps_with_an_llm_key_get_the_chain_engine_and_the_others_none():
    engine = object()
    chain = ChainReranker({"cut": {"_target_": "rag.rerank.base.NoRerank", "k": 3},  # takes no `llm`
                           "rec": {"_target_": "tests.rerank.test_chain.Recording", "name": "r",
                                   "llm": {"_target_": "builtins.dict"}}}, llm=engine)
    assert isinstance(chain.steps["cut"], NoRerank) and chain.steps["cut"].k == 3
    assert chain.steps["rec"].llm is engine  # never its own engine built from the node
    with pytest.raises(TypeError, match="rerank.steps.bad built a dict"):
        ChainReranker({"bad": {"_target_": "builtins.dict"}})


def test_bge_diversity_composes_and_instantiates_with_the_pipeline_engine():
    cfg = compose_config(["rerank=bge_diversity"])
    assert list(cfg.rerank.steps) == ["bge", "diversity"]
    assert cfg.rerank.llm == cfg.llm and cfg.rerank.steps.diversity.llm == cfg.llm
    engine = ScriptedEngine(lambda prompt, request: "NONE")
    chain = instantiate(cfg.rerank, llm=engine)  # as the pipeline does for a node with an `llm` key
    assert isinstance(chain, ChainReranker) and chain.k == 5
    bge, diversity = chain.steps["bge"], chain.steps["diversity"]
    assert isinstance(bge, BGEReranker) and isinstance(diversity, DiversityReranker)
    assert (bge.k, diversity.k, diversity.pool) == (20, None, 20)
    assert diversity.engine is engine
    assert chain.key.startswith("chain-") and len(chain.key) <= MAX_KEY_CHARS
