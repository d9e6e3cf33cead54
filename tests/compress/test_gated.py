"""Provence and LLMLingua-2 without their weights: the one-line refusal naming the setting, and, with the stand-in
of tests/compress/stand_ins.py in place of the loaded model, the exact inputs handed to the model and the mapping of
its output back onto the passages (ids kept, emptied passages dropped, ratio)."""

from __future__ import annotations

import subprocess
import sys

import huggingface_hub.constants
import pytest
from hydra.utils import instantiate

from rag.compress.base import Compressor
from rag.compress.llmlingua2 import LLMLingua2
from rag.compress.provence import Provence
from rag.core.errors import MissingDataError
from rag.core.text import split_sentences
from rag.records import ScoredPassage
from tests.compress.helpers import ROOT, context_for
from tests.compress.stand_ins import LLMLinguaStandIn, ProvenceStandIn
from tests.conftest import DATA_DIR, compose_config

GATED = {"provence": ("naver/provence-reranker-debertav3-v1", Provence),
         "llmlingua2": ("microsoft/llmlingua-2-xlm-roberta-large-meetingbank", LLMLingua2)}


@pytest.fixture
def empty_hub_cache(tmp_path, monkeypatch):
    """A Hugging Face cache without the models (whatever this machine's own cache holds)."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))


@pytest.mark.parametrize("option", sorted(GATED))
def test_a_missing_copy_is_one_line_naming_the_setting(option, empty_hub_cache, tmp_path, monkeypatch):
    model, cls = GATED[option]
    monkeypatch.delenv("PROVENCE_PATH", raising=False)
    monkeypatch.delenv("LLMLINGUA2_PATH", raising=False)
    cfg = compose_config([f"compress={option}"], tmp_path)
    with pytest.raises(Exception) as err:  # Hydra wraps the constructor's error
        instantiate(cfg.compress)
    cause = err.value if isinstance(err.value, MissingDataError) else err.value.__cause__
    assert isinstance(cause, MissingDataError)
    assert str(cause) .startswith(f"compress.model={model}: no local copy") and "compress.model_path" in str(cause)
    with pytest.raises(MissingDataError, match=r"^compress\.model_path=/nowhere: no such folder"):
        cls(model_path="/nowhere")


def test_the_run_stops_before_any_index_in_one_line(tmp_path):
    """`python -m rag.main compress=provence` without the weights: exit 2, one error line, no traceback."""
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "WANDB_MODE": "offline"}
    done = subprocess.run([sys.executable, "-m", "rag.main", "dataset=hotpotqa", "dataset.limit=1", "compress=provence",
                           "logger=none", f"paths.data_dir={DATA_DIR}", f"paths.cache_dir={tmp_path / 'cache'}",
                           f"hydra.run.dir={tmp_path / 'run'}"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in output
    lines = [line for line in output.splitlines() if "compress.model=naver/provence-reranker-debertav3-v1" in line]
    assert len(lines) == 1 and "no local copy" in lines[0]
    assert not (tmp_path / "cache" / "indexes").exists() and not (tmp_path / "run" / "answers.jsonl").exists()


def _with_stand_in(compressor: Compressor, stand_in: object) -> Compressor:
    compressor._model = stand_in  # the loaded model's place: the stand-in, declared once in stand_ins.py
    return compressor


def test_provence_inputs_and_mapping(hotpot_data, tmp_path):
    (q0, c0), (q1, c1) = context_for(0, distractors=1), context_for(2, distractors=1)
    dropped = c1[1]
    c1[1] = ScoredPassage(dropped.passage.__class__(dropped.passage.passage_id, dropped.passage.doc_id,
                                                     ProvenceStandIn.DROP, dropped.passage.title), 1.0, 2)
    stand_in = ProvenceStandIn()
    compressor = _with_stand_in(Provence(model_path=str(tmp_path), threshold=0.3, with_title=True), stand_in)
    out = compressor.compress([q0, q1], [c0, c1])
    [call] = stand_in.calls  # one batched call: questions, and each one's passage texts in prompt order
    assert call["question"] == [q0.question, q1.question]
    assert call["context"] == [[p.passage.text for p in c0], [p.passage.text for p in c1]]
    assert call["title"] == [[p.passage.title for p in c0], [p.passage.title for p in c1]]
    assert (call["threshold"], call["reorder"], call["always_select_title"]) == (0.3, False, False)
    assert [[p.passage.text for p in o.passages] for o in out] == \
        [[split_sentences(p.passage.text)[0] for p in c] for c in (c0, [c1[0], *c1[2:]])]
    assert [p.passage.doc_id for p in out[1].passages] == [c1[0].passage.doc_id, *(p.passage.doc_id for p in c1[2:])]
    assert all(p.rank == src.rank for p, src in zip(out[0].passages, c0))
    words = sum(len(p.passage.text.split()) for p in out[0].passages)
    assert (out[0].words_after, out[0].ratio) == (words, round(words / out[0].words_before, 4))
    assert out[1].details["kept_passages"] == len(c1) - 1 and len(out[1].details["reranking_scores"]) == len(c1)
    titles_off = _with_stand_in(Provence(model_path=str(tmp_path)), ProvenceStandIn())
    assert titles_off.inputs([q0], [c0])["title"] is None


def test_llmlingua2_request_and_mapping(hotpot_data, tmp_path):
    question, ctx = context_for(0, distractors=1)
    stand_in = LLMLinguaStandIn()
    compressor = _with_stand_in(LLMLingua2(model_path=str(tmp_path), rate=0.5, force_tokens=["\n", "?"]), stand_in)
    [out] = compressor.compress([question], [ctx])
    [call] = stand_in.calls
    assert call == {"context": [p.passage.text for p in ctx], "rate": 0.5, "force_tokens": ["\n", "?"],
                    "drop_consecutive": True, "use_context_level_filter": False}
    assert [p.passage.text for p in out.passages] == [" ".join(p.passage.text.split()[::2]) for p in ctx]
    assert [(p.passage.passage_id, p.passage.doc_id) for p in out.passages] == \
        [(p.passage.passage_id, p.passage.doc_id) for p in ctx]
    assert 0.45 < out.ratio < 0.55 and out.details["compressed_tokens"] == out.words_after
    with pytest.raises(ValueError, match="returned 1 compressed passages for 2"):
        LLMLingua2.mapped(ctx[:2], {"compressed_prompt_list": ["x"]})
