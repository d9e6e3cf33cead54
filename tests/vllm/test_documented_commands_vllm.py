"""The documented commands that need vLLM (tests/docs/table.py rows with `venv="vllm"`), run in `.venv-vllm` by
`make test-vllm`: the served judge's quickstart of docs/cluster.md section 6 on CI's real SLURM, and the import
check of its section 1. Same table, same store and checks as tests/docs/test_documented_commands.py.

The served model is SmolLM2-135M-Instruct on vLLM's CPU build (the `llm=gemma3_27b` a GPU cluster serves, swapped:
tests/docs/table.py VLLM_SWAPS), under the name the docs give it, so the sweep's `judge.llm.name=gemma3_27b`
finds it as it would on a cluster.
"""

from __future__ import annotations

import pytest

from tests.cluster.helpers import slurm_unavailable_reason
from tests.docs.store import session_store
from tests.docs.table import ROWS, VLLM_ORDER, Run

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def store(tmp_path_factory, shared_cache):
    with session_store(tmp_path_factory.mktemp("docs-vllm"), shared_cache) as made:
        yield made
        stop = "python -m rag.llm.serve serve.name=gemma3_27b serve.action=stop"
        made.run(stop + " ", Run(venv="vllm"))  # whatever the rows did, no server is left behind


@pytest.mark.parametrize("doc", VLLM_ORDER)
def test_documented_vllm_command(doc, store):
    row = ROWS[doc]
    assert isinstance(row, Run) and row.venv == "vllm"
    if "slurm" in row.marks:
        reason = slurm_unavailable_reason()
        assert reason is None, f"SLURM is needed here and does not answer: {reason}"
    ran = store.run(doc, row)
    assert ran.result.returncode == row.status, ran.result.tail()
    for check in row.checks:
        check(ran)
