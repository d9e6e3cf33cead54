"""A sweep whose overrides would name a cell folder longer than the file system allows (255 bytes) runs: the
name is capped with a hash of the whole (`rag.core.hashing.cap_name`), and the sweep tools find the same folders
from `multirun.yaml` (a capped name that they computed differently would show the cells as missing)."""

from __future__ import annotations

import json

from rag.core.hashing import MAX_NAME_BYTES
from tests.cluster.helpers import rag_env, rag_main, run_module, sweep_dirs


def test_cell_folder_names_are_capped_and_found_again(hotpot_data, tmp_path):
    note = "n" * 260
    args = ["-m", "dataset=hotpotqa", "dataset.limit=1", "generator=none", "logger=none", "retriever.k=4,5",
            f"+generation.note={note}"]
    proc = rag_main(args, rag_env(tmp_path), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [sweep] = sweep_dirs(tmp_path / "outputs")
    cells = sorted(p for p in sweep.iterdir() if (p / ".hydra").is_dir())
    assert len(cells) == 2
    assert all(len(c.name.encode()) <= MAX_NAME_BYTES + 4 and "~" in c.name for c in cells), [c.name for c in cells]
    assert cells[0].name != cells[1].name
    status = run_module("jobs.status", [str(sweep), "--json", "--check"], rag_env(tmp_path))
    assert status.returncode == 0, status.stdout + status.stderr
    assert [json.loads(line)["state"] for line in status.stdout.splitlines()] == ["complete", "complete"]
