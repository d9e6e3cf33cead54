"""benchmarks/demo_vs_raw.py, the demo against plain llama-cpp-python (docs/benchmarks.md, "The demo's kernel
defaults"), on a hand-made Simple run folder of two short prompts, with the real Gemma 3 270M on both sides."""

from __future__ import annotations

import json
import subprocess
import sys

from rag.core.io import atomic_write_jsonl
from tests.conftest import ROOT

PROMPT = ("Answer the question using the documents.\n\nDocument [1]: The Eiffel Tower is in Paris and was finished "
          "in 1889.\n\nQuestion: When was the Eiffel Tower finished?\nAnswer:")


def _simple_run(folder):
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"generator": {
        "_target_": "rag.generate.simple.SimpleGenerator", "prompt": "simple", "temperature": 0.1, "max_tokens": 16}}))
    atomic_write_jsonl(folder / "answers.jsonl", [{"id": str(i), "final_prompt": PROMPT.replace("Eiffel", name)}
                                                  for i, name in enumerate(("Eiffel", "Blackpool"))])
    return folder


def _bench(*args):
    return subprocess.run([sys.executable, "benchmarks/demo_vs_raw.py", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def test_both_sides_answer_the_run_s_prompts_and_the_engine_side_names_its_options(tmp_path):
    out = tmp_path / "report.json"
    proc = _bench(_simple_run(tmp_path / "run"), "--n", "2", "--out", out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["questions"] == 2 and report["options"] == {"flash_attn": True, "requantize": "q8_0"}
    for row in report["rows"]:
        for side in ("raw", "engine"):
            timing = row[side]
            assert timing["prompt_tokens"] > 30 and 0 < timing["completion_tokens"] <= 16 + 1
            assert timing["seconds"] >= timing["prompt_seconds"] > 0
    assert report["speedup"] > 0 and report["speedup_same_tokens"] > 0
    assert "per question: raw" in proc.stdout
    # the options can be set back: the engine side then runs what the raw side runs, on the shipped file
    proc = _bench(tmp_path / "run", "--n", "1", "--set", "flash_attn=false", "requantize=null", "--out", out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    plain = json.loads(out.read_text())
    assert plain["options"] == {} and plain["identical"] == 1  # same file, kernels and sampling: same answer


def test_a_folder_of_another_strategy_is_refused_naming_it(tmp_path):
    run = _simple_run(tmp_path / "run")
    (run / "config.json").write_text(json.dumps({"generator": {"_target_": "rag.generate.iterdrag.IterDRAG"}}))
    proc = _bench(run)
    assert proc.returncode != 0 and "a Simple run folder is needed" in proc.stderr
