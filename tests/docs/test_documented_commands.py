"""Every command in README.md, docs/*.md, eval/README.md and the usage comments of conf/experiment/*.yaml runs
as written, at the scale it states, swapping only what tests/docs/table.py declares; and is checked for what the
doc promises. A command without a row fails, so does a row whose command left the docs.

Rows that need a model run it for real (`small`: Gemma 3 270M on llama.cpp) or, at full dataset scale, against
tests/instant_endpoint.py (`instant`: orchestration only). Rows that need vLLM run in `.venv-vllm`
(tests/vllm/test_documented_commands_vllm.py, same table); rows that need SLURM are marked `slurm`.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import sys

import pytest

from tests.conftest import DATA_DIR
from tests.docs.commands import documented_commands
from tests.docs.store import session_store
from tests.docs.table import ROWS, Ci, Help, NotHere, Run

DOCUMENTED = documented_commands()
TEXTS = sorted({c.text for c in DOCUMENTED})


def where(text: str) -> str:
    return ", ".join(c.where for c in DOCUMENTED if c.text == text)


def test_every_documented_command_has_a_row_and_every_row_a_command():
    missing = [f"{where(t)}: {t}" for t in TEXTS if t not in ROWS]
    stale = [t for t in ROWS if t not in TEXTS]
    assert not missing, "documented commands without a row in tests/docs/table.py:\n" + "\n".join(missing)
    assert not stale, "rows of tests/docs/table.py whose command is in no doc any more:\n" + "\n".join(stale)


def test_the_collector_reads_blocks_spans_and_experiment_comments():
    texts = {c.text for c in DOCUMENTED}
    assert "make demo" in texts and "make test" in texts  # README's two commands, in a fenced block
    assert any(t.startswith("python -m rag.main -m experiment=ragtifier retriever=pinecone rerank.k=5,10 "
                            "generator=simple,instructrag") for t in texts)  # the experiment's usage comment
    # a $VAR set earlier in the block is expanded; an inline span that runs over a line break is one command
    assert not any("$COMMON" in t for t in texts)
    assert any(t.startswith("python -m rag.index -m hydra/launcher=slurm hydra.launcher.gpus_per_node=0")
               for t in texts)


@pytest.fixture(scope="session")
def store(tmp_path_factory, shared_cache):
    with session_store(tmp_path_factory.mktemp("docs"), shared_cache) as made:
        yield made


def _params(venv: str) -> list:
    out = []
    for text in TEXTS:
        row = ROWS.get(text)
        if not isinstance(row, Run) or row.venv != venv:
            continue
        marks = [getattr(pytest.mark, m) for m in row.marks]
        out.append(pytest.param(text, marks=marks, id=re.sub(r"\s+", " ", text)[:90]))
    return out


@pytest.mark.parametrize("doc", _params("main"))
def test_documented_command(doc, store):
    row = ROWS[doc]
    ran = store.run(doc, row)
    assert ran.result.returncode == row.status, f"{where(doc)}\n{ran.result.tail()}"
    for check in row.checks:
        check(ran)


@pytest.mark.parametrize("doc", [t for t in TEXTS if isinstance(ROWS.get(t), Help)])
def test_a_module_named_in_prose_answers_help(doc, tmp_path):
    import subprocess

    module = ROWS[doc].module or doc.split()[2]
    proc = subprocess.run([sys.executable, "-m", module, "--help", *ROWS[doc].args.split()], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "RAG_OUTPUT_DIR": str(tmp_path)})
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr[-2000:]


def test_rows_that_run_nothing_say_why_and_stay_few():
    quiet = {t: r for t, r in ROWS.items() if isinstance(r, (Ci, NotHere))}
    assert all(len(r.why) > 30 for r in quiet.values()), [t for t, r in quiet.items() if len(r.why) <= 30]
    assert sum(isinstance(r, NotHere) for r in ROWS.values()) <= 12


def test_fixture_files_are_real(store):
    """The inputs rows read are made from the shared data, not invented: the question file is the live day's."""
    live = store.folder("question_file")
    ids = [json.loads(line)["id"] for line in live.read_text().splitlines()]
    with open(DATA_DIR / "liverag_dm" / "LiveRAG_LCD_Session1_Question_file.jsonl") as handle:
        first = [json.loads(next(handle))["id"] for _ in ids]
    assert ids == first
    with gzip.open(store.folder("corpus_small"), "rt") as handle:
        assert all(json.loads(line)["text"] for line in handle)
