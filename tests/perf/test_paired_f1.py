"""benchmarks/paired_f1.py, the model comparison's significance check, on hand-made run folders."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rag.core.io import atomic_write_jsonl
from tests.conftest import ROOT


def _run(folder, f1s: dict[str, tuple[str, float]]):
    folder.mkdir()
    atomic_write_jsonl(folder / "answers.jsonl", [{"id": q, "hop": hop, "scores": {"f1": f1}} for q, (hop, f1) in f1s.items()])
    return folder


def _paired(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "benchmarks/paired_f1.py", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_paired_difference_counts_and_interval(tmp_path):
    a = _run(tmp_path / "a", {"1": ("single", 0.5), "2": ("multi", 0.4), "3": ("multi", 0.2), "4": ("single", 0.3),
                              "only_a": ("single", 1.0)})
    b = _run(tmp_path / "b", {"1": ("single", 0.1), "2": ("multi", 0.4), "3": ("multi", 0.3), "4": ("single", 0.1)})
    out = tmp_path / "paired.json"
    proc = _paired(a, b, "--names", "big", "small", "--n-boot", "2000", "--json", out)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    # the question only A answered is not compared
    assert (result["questions_a"], result["questions_b"], result["shared"]) == (5, 4, 4)
    everything = result["all"]
    # differences 0.4, 0, -0.1, 0.2: mean 0.125
    assert everything["n"] == 4 and everything["difference"] == pytest.approx(0.125)
    assert everything["f1_a"] == pytest.approx(0.35) and everything["f1_b"] == pytest.approx(0.225)
    assert everything["wins_ties_losses"] == [2, 1, 1]
    # the sweep summary's paired randomization test, exact over the 3 differing questions: of the 8 sign flips of
    # (0.4, -0.1, 0.2), 4 have |sum| >= 0.5 (0.7, 0.5 and their mirrors)
    assert everything["p_randomization"] == pytest.approx(0.5) and everything["test"] == "exact (3 differing questions)"
    assert everything["effect_size_dz"] == pytest.approx(0.125 / 0.2217355782608345, abs=1e-4)
    low, high = everything["ci95"]
    assert -0.1 <= low < 0.125 < high <= 0.4  # a percentile interval lies within the observed differences
    assert result["single"]["difference"] == pytest.approx(0.3) and result["single"]["wins_ties_losses"] == [2, 0, 0]
    assert result["multi"]["wins_ties_losses"] == [0, 1, 1]
    assert "| all (4) | 0.350 | 0.225 | +0.125" in proc.stdout and "big wins / ties / losses" in proc.stdout


def test_a_record_without_f1_names_file_and_line(tmp_path):
    a = _run(tmp_path / "a", {"1": ("single", 0.5)})
    b = tmp_path / "b"
    b.mkdir()
    atomic_write_jsonl(b / "answers.jsonl", [{"id": "1", "hop": "single", "scores": {"f1": 0.2}}, {"id": "2", "scores": {}}])
    proc = _paired(a, b)
    assert proc.returncode != 0
    assert f"{b / 'answers.jsonl'}:2: record '2' has no scores.f1" in proc.stderr


def test_slices_join_by_question_export_round_trips_and_overlaps_are_refused(tmp_path):
    """A benchmark run in two slices (`dataset.offset`) compares like one run; the exported per-question files
    stand in for the run folders; a question in two slices of one side is refused."""
    whole_a = {"1": ("single", 0.5), "2": ("multi", 0.4), "3": ("multi", 0.2), "4": ("single", 0.3)}
    whole_b = {"1": ("single", 0.1), "2": ("multi", 0.4), "3": ("multi", 0.3), "4": ("single", 0.1)}
    one = _paired(_run(tmp_path / "a", whole_a), _run(tmp_path / "b", whole_b), "--n-boot", "500",
                  "--json", tmp_path / "one.json")
    assert one.returncode == 0, one.stderr
    halves = {f"{side}{half}": _run(tmp_path / f"{side}{half}", {q: v for q, v in whole.items() if (q in "12") == (half == 1)})
              for side, whole in (("a", whole_a), ("b", whole_b)) for half in (1, 2)}
    two = _paired("--a", halves["a1"], halves["a2"], "--b", halves["b1"], halves["b2"], "--n-boot", "500",
                  "--names", "big", "small", "--json", tmp_path / "two.json", "--export", tmp_path / "per_question")
    assert two.returncode == 0, two.stderr
    first, second = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "two"))
    assert second["all"] == first["all"] and second["multi"] == first["multi"]
    exported = _paired("--a", tmp_path / "per_question" / "big.jsonl", "--b", tmp_path / "per_question" / "small.jsonl",
                       "--n-boot", "500", "--json", tmp_path / "three.json")
    assert exported.returncode == 0, exported.stderr
    assert json.loads((tmp_path / "three.json").read_text())["all"] == first["all"]
    overlap = _paired("--a", halves["a1"], tmp_path / "a", "--b", tmp_path / "b")
    assert overlap.returncode != 0 and "also come from an earlier source of the same side" in overlap.stderr
