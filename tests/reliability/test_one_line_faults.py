"""Issue 36: one line per fault, naming the file and line or the setting's full dotted path.

Each case the issue found (a traceback, or a line that misled) is run here as a user meets it: the real entry
point in a subprocess where the fault is in its command line or its handling, the component itself where the
fault is in its message. HTTP 400 "after 5 attempt(s)" and the judges' endpoint naming `llm.base_url` are in
tests/reliability/test_endpoint_faults.py (with the fault-injecting local server).
"""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path

import pytest

from rag.core.errors import DataError, MissingDataError, ServiceError
from tests.cluster.helpers import CHEAP, rag_env, rag_main, run_module
from tests.conftest import CONF_DIR


def _lines(proc) -> list[str]:
    """Non-empty output lines that are not INFO/WARNING log lines."""
    return [ln for ln in (proc.stdout + proc.stderr).splitlines()
            if ln.strip() and "][INFO]" not in ln and "][WARNING]" not in ln]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- every ??? setting -----------------------------------------------------------------------------------------
#: (entry point, its arguments) -> the `???` settings it leaves unset, each named on its own line
MANDATORY = {
    ("eval.main", ()): ["run_dir"],
    ("eval.pool", ()): ["sweep_dir"],
    ("rag.index", ()): ["corpus"],
    ("rag.llm.check_model", ()): ["llm"],
    ("rag.main", ("llm=served", "logger=none")): ["llm.name"],
    ("eval.meta", ("labels=qrels",)): ["labels.qrels", "labels.queries", "labels.passages"],
    ("eval.meta", ("labels=qrels", "labels.qrels=q.txt", "labels.passages=p.jsonl")): ["labels.queries"],
    ("eval.meta", ("labels=trec_nuggets",)): ["labels.path"],
    ("rag.main", ("dataset=beir", "logger=none")): ["dataset.path"],
    ("rag.main", ("dataset=trec", "logger=none")): ["dataset.path"],
    ("rag.main", ("dataset=ir_datasets", "logger=none")): ["dataset.id"],
}


def _mandatory_in_conf() -> set[str]:
    """Every `???` in conf/: `key` of an entry point's config, `group.key` of a group option, `group` of a
    defaults entry."""
    found = set()
    for path in CONF_DIR.rglob("*.yaml"):
        for line in path.read_text(encoding="utf-8").splitlines():
            match = re.match(r"^\s*(-\s*)?([\w@]+)\s*:\s*\?\?\?", line)
            if not match:
                continue
            group = path.parent.relative_to(CONF_DIR).as_posix()
            key = match.group(2)
            found.add(key if group == "." or match.group(1) else f"{group}.{key}")
    return found


def test_every_mandatory_setting_of_every_entry_point_is_tested_here():
    named = {setting for settings in MANDATORY.values() for setting in settings}
    assert _mandatory_in_conf() <= named, _mandatory_in_conf() - named


@pytest.mark.parametrize("case", list(MANDATORY), ids=lambda c: " ".join((c[0], *c[1])))
def test_a_mandatory_setting_left_unset_is_one_line_naming_it(case, tmp_path):
    module, args = case
    proc = run_module(module, list(args), rag_env(tmp_path), timeout=300)
    lines = _lines(proc)
    assert proc.returncode == 2 and len(lines) == len(MANDATORY[case]), lines
    for line, setting in zip(lines, MANDATORY[case]):
        assert line.startswith(f"ConfigError: {setting}: required"), line
    assert not (tmp_path / "outputs").exists()


# -- data files ----------------------------------------------------------------------------------------------------
def test_duplicate_question_ids_of_a_live_day_name_the_file_and_line(tmp_path):
    questions = tmp_path / "questions.jsonl"
    questions.write_text('{"id": 1, "question": "a?"}\n{"id": 2, "question": "b?"}\n{"id": 1, "question": "c?"}\n')
    proc = run_module("rag.live", [f"questions={questions}", f"out={tmp_path / 'out'}"], rag_env(tmp_path))
    lines = _lines(proc)
    assert proc.returncode == 2 and len(lines) == 1, lines
    assert lines[0] == f"error: DataError: {questions}:3: duplicate question id 1 (first at line 1)"


def test_a_null_qid_in_a_nugget_assessment_file_is_an_error_naming_the_line(tmp_path):
    from eval.meta_nuggets import NuggetAssignmentLabels

    path = tmp_path / "assessed.jsonl"
    row = {"qid": "t1", "query": "q", "run_id": "r", "answer_text": "a",
           "nuggets": [{"text": "n", "importance": "vital", "assignment": "support"}]}
    path.write_text(json.dumps(row) + "\n" + json.dumps({**row, "qid": None, "run_id": "r2"}) + "\n")
    with pytest.raises(DataError, match=rf"^{re.escape(str(path))}:2: qid is null or empty$"):
        NuggetAssignmentLabels(path).answers()


# -- services --------------------------------------------------------------------------------------------------
def test_opensearch_failures_are_one_line_without_library_tracebacks(tmp_path):
    port = _closed_port()
    proc = run_module("rag.index", ["backend=opensearch", "corpus=liverag_dm/fineweb_docs.jsonl.gz",
                                    f"backend.service.host=http://127.0.0.1:{port}", "backend.service.access=none",
                                    "backend.max_retries=0"], rag_env(tmp_path))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in out, out[-3000:]
    errors = [ln for ln in out.splitlines() if "Error" in ln]
    assert errors == [f"OpenSearchServiceError: backend=opensearch: checking index 'fineweb10bt-512-0w-e5-base-v2': "
                      f"retriever=opensearch: cannot reach http://127.0.0.1:{port} after 1 attempt (ConnectionError)"]


def test_pinecone_without_a_local_e5_model_is_one_line_naming_the_setting(tmp_path, monkeypatch):
    """Downloads are off (HF_HUB_OFFLINE=1, as on compute nodes): a model that is nowhere on disk was a chained
    transformers OSError traceback."""
    from rag.embed import Embedder

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty Hugging Face cache
    embedder = Embedder(model="intfloat/e5-base-v2")
    embedder.setting = "backend.service.embedder"
    with pytest.raises(MissingDataError) as err:
        _ = embedder.model
    line = str(err.value)
    assert line.startswith("backend.service.embedder.model=intfloat/e5-base-v2: no local copy")
    assert "set backend.service.embedder.model_path" in line and "\n" not in line


def test_rag_index_names_the_pinecone_backends_embedder(tmp_path):
    env = rag_env(tmp_path, PINECONE_API_KEY="pc-test-not-a-key", HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1")
    env.pop("E5_BASE_V2_PATH", None)
    proc = run_module("rag.index", ["backend=pinecone", "corpus=liverag_dm/fineweb_docs.jsonl.gz"], env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in out, out[-3000:]
    [line] = [ln for ln in out.splitlines() if "Error" in ln]
    assert "MissingDataError: backend.service.embedder.model=intfloat/e5-base-v2: no local copy" in line


def test_a_judges_endpoint_is_named_by_the_judges_setting(tmp_path):
    from rag.judge.run import evaluate_records
    from tests.eval.evaltools import judge_root, synthetic_records

    url = f"http://127.0.0.1:{_closed_port()}/v1"
    root = judge_root("liverag", llm={"_target_": "rag.llm.openai_compat.OpenAICompatibleEngine", "model": "m",
                                      "base_url": url, "api_key_env": None, "max_retries": 0})
    with pytest.raises(ServiceError) as err:
        evaluate_records(root.judge, synthetic_records(1), tmp_path, tmp_path / "cache")
    assert str(err.value).startswith(f"judge.llm: the OpenAI-compatible endpoint {url} cannot be reached")
    assert str(err.value).endswith("correct judge.llm.base_url")


def test_a_sweep_whose_every_cell_failed_ends_in_one_line_without_a_traceback(hotpot_data, tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    sweep = tmp_path / "sweep"
    proc = rag_main(["-m", *CHEAP, "dataset.limit=1", "llm=llamacpp_server", f"llm.base_url={url}",
                     "retriever.k=4,5", "logger=none", f"hydra.sweep.dir={sweep}"],
                    rag_env(tmp_path, cache=Path(os.environ.get("RAG_TEST_CACHE_DIR") or tmp_path / "cache")))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in out, out[-3000:]
    lines = [ln for ln in out.splitlines() if "][ERROR]" in ln or ln.startswith("sweep:")]
    assert len(lines) == 3, lines  # one line per cell, then the sweep's
    assert all("ServiceError: llm: the OpenAI-compatible endpoint" in ln for ln in lines[:2])
    assert lines[2].startswith("sweep: 2 of 2 cell(s) failed (0, 1), each said why in one line above;")
    assert f"python -m jobs.resubmit {sweep}" in lines[2]
    assert (sweep / "summary.md").is_file()  # the sweep's callbacks ran: the summary lists the failed cells


# -- the live day's verdict -------------------------------------------------------------------------------------
def test_a_late_live_day_says_how_late_without_a_negative_margin():
    from rag.live.__main__ import timing

    assert timing({"on_time": False, "margin_s": -4.2}) == "LATE, 4 s after the deadline"
    assert timing({"on_time": True, "margin_s": 120.4}) == "on time, 120 s before the deadline"


@pytest.mark.slow
def test_datagen_with_no_pair_kept_exits_non_zero_and_suggests_no_run(data_dir, tmp_path):
    from tests.datagen.helpers import fineweb_sample

    corpus = fineweb_sample(tmp_path / "sample.jsonl.gz", 20)
    out = tmp_path / "generated"
    proc = run_module("rag.datagen", [f"corpus={corpus}", "n=1", "categories=liverag", "llm=gemma3_270m",
                                      f"out={out}", "generation.candidates_per_pair=1", "generation.max_attempts=1",
                                      "generation.max_slots_factor=1", "generation.batch_pairs=1",
                                      "generation.max_tokens=32", "filters.length.question_words=[500,600]"],
                      rag_env(tmp_path), timeout=1200)
    lines = [ln for ln in _lines(proc) if "ERROR" in ln or "Error" in ln]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, (proc.stdout + proc.stderr)[-3000:]
    assert len(lines) == 1 and "DataError: 0 of 1 pairs survived generation and the filters" in lines[0]
    assert "rag.main" not in proc.stdout + proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["obtained_pairs"] == 0



# -- issue 52 ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("module, args", [("rag.main", ["llm=null", "logger=none"]),
                                          ("eval.main", ["run_dir=run", "llm=null", "rerank=null"])])
def test_a_config_group_chosen_as_null_is_one_line_listing_its_options(module, args, tmp_path):
    """`llm=null` ended in Hydra's traceback ("Config group override must be a string or a list")."""
    proc = run_module(module, args, rag_env(tmp_path), timeout=120)
    lines = _lines(proc)
    assert proc.returncode == 2 and len(lines) == sum(a.endswith("=null") for a in args), lines
    assert lines[0].startswith("ConfigError: llm=null: llm is a config group and null is none of its options; "
                               "choose one: llm=<one of claude_haiku, ") and "Traceback" not in proc.stderr, lines
