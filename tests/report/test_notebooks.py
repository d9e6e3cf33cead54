"""Every notebook runs headless (nbclient, a real ipykernel) on the small real sweep and shows its figure;
the committed notebooks carry no outputs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: notebook -> the figures it must show inline
FIGURES = {"table1.ipynb": 1, "retrieval_at_k.ipynb": 1, "agreement.ipynb": 1, "explore_sweep.ipynb": 1,
           "latency_at_k.ipynb": 0}


def test_notebooks_are_committed_without_outputs():
    assert {p.name for p in NOTEBOOKS} == set(FIGURES)
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text())
        tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1, f"{path.name}: one cell tagged `parameters`"
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [] and cell["execution_count"] is None, path.name


def _inject(nb, **params) -> None:
    """Papermill's way: a cell right after the `parameters` cell that sets the given values."""
    import nbformat

    index = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    source = "\n".join(f"{k} = {v!r}" for k, v in params.items())
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]}))


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_on_a_real_sweep(path: Path, small_sweep, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    # the kernel imports this checkout's code and finds the sweep through RAG_OUTPUT_DIR (the default)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("RAG_OUTPUT_DIR", str(small_sweep.parents[2]))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(path, as_version=4)
    if path.stem != "explore_sweep":  # explore_sweep finds the sweep by itself
        _inject(nb, SWEEP_DIR=str(small_sweep), BOOTSTRAP=100)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert str(small_sweep) in text
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= FIGURES[path.name], f"{path.name}: expected an inline figure"
