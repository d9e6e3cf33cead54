"""How a documented command runs in a test: as written, after the swaps tests/docs/table.py declares.

`python -m <module> ...` commands run in a child forked from a server process that imported the heavy libraries
once (multiprocessing's forkserver, preloaded with torch, transformers, Hydra, ...): the child executes the module
exactly as `python -m` does (`runpy.run_module(..., run_name="__main__")`, its own argv, working folder and
environment, stdout and stderr to files), so a command costs its own work, not the seconds of importing torch
again. Every other command (`make demo`, `sbatch ...`, `git clone ...`) runs in `bash -c`. Commands whose row
says `isolated=True` run in a fresh `python` process instead (a launcher that must see a clean interpreter).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import runpy
import shlex
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

#: imported once by the fork server; children fork from it (none of these runs anything at import)
PRELOAD = ["numpy", "scipy", "torch", "transformers", "sentence_transformers", "hydra", "omegaconf", "bm25s",
           "faiss", "llama_cpp", "matplotlib", "matplotlib.pyplot", "pydantic", "openai", "submitit", "sklearn",
           "pyarrow", "pandas", "statsmodels.stats.multitest", "scipy.stats", "wandb"]

_CONTEXT: multiprocessing.context.BaseContext | None = None


def fork_context() -> multiprocessing.context.BaseContext:
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = multiprocessing.get_context("forkserver")
        _CONTEXT.set_forkserver_preload(PRELOAD)
    return _CONTEXT


@dataclass
class Result:
    """What a command did: exit status, its output, and how long it took."""

    command: str
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def tail(self, chars: int = 4000) -> str:
        return f"$ {self.command}\n[exit {self.returncode}, {self.seconds:.0f} s]\n--- stdout\n" \
               f"{self.stdout[-chars:]}\n--- stderr\n{self.stderr[-chars:]}"


def _run_module(module: str, args: list[str], cwd: str, env: dict[str, str], out: str, err: str) -> None:
    """The forked child: `python -m module args...` in `cwd` with exactly `env`; exits with the module's status."""
    code = 0
    try:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        for fd, path in ((1, out), (2, err)):
            handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(handle, fd)
            os.close(handle)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - the process's own stdout
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.path[0] = cwd  # what `python -m` puts first, then the PYTHONPATH a fresh interpreter would read
        sys.path[1:1] = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep)
                         if entry and entry not in sys.path]
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if not isinstance(exit_.code, (int, type(None))):
            print(exit_.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - what an uncaught exception does to `python -m`: a traceback, status 1
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    os._exit(code)


def run(command: str, cwd: Path, env: dict[str, str], log_dir: Path, timeout: float,
        isolated: bool = False) -> Result:
    """Run one (already swapped) command; its output is kept in `log_dir` for the failure message."""
    log_dir.mkdir(parents=True, exist_ok=True)
    out, err = log_dir / "stdout.txt", log_dir / "stderr.txt"
    words = shlex.split(command)
    start = time.monotonic()
    if len(words) >= 3 and words[0] == "python" and words[1] == "-m" and not isolated:
        process = fork_context().Process(target=_run_module, args=(words[2], words[3:], str(cwd), env, str(out),
                                                                   str(err)))
        process.start()
        process.join(timeout)
        if process.is_alive():
            process.kill()
            process.join()
            code = -9
        else:
            code = process.exitcode if process.exitcode is not None else -1
    else:
        if words and words[0] == "python":
            command = shlex.join([sys.executable, *words[1:]])
        with open(out, "w") as stdout, open(err, "w") as stderr:
            try:
                code = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, stdout=stdout, stderr=stderr,
                                      timeout=timeout).returncode
            except subprocess.TimeoutExpired:
                code = -9
    seconds = time.monotonic() - start
    read = lambda path: path.read_text(errors="replace") if path.exists() else ""  # noqa: E731
    result = Result(command, code, read(out), read(err), seconds)
    if code == -9:
        result.stderr += f"\n[killed after the row's timeout of {timeout:.0f} s]"
    return result
