"""Hydra callback: hold the served models a sweep's cells use, and stop them when the sweep ends.

A served model (`python -m rag.llm.serve`, cells with `llm=served`) runs as a job of its own; without this it would
hold its GPUs after the sweep until someone stops it. Chosen by `conf/hydra/callbacks/served.yaml` (which
conf/llm/served.yaml selects). At the start of a multirun it finds every served engine config in the sweep's
config, checks each server answers (one line each and exit status 2, before any cell is launched, when not), and
claims it with an owner lease (`<name>.owner.json`) renewed from a thread. The servers are stopped at the end of
the multirun (Hydra's `on_multirun_end`; after failed cells the SLURM launcher calls it too), at the process's
exit (a basic-launcher sweep whose cells failed: Hydra skips `on_multirun_end` then), and on SIGTERM / SIGHUP
(Ctrl-C ends the process, hence its exit). A sweep killed outright stops renewing its lease, and the server stops
itself once the lease is `lease_s` old.
"""

from __future__ import annotations

import atexit
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)

#: what this process holds, shared by every instance (Hydra builds the callbacks again for the SLURM launcher's
#: failure path, and pickles them into jobs: state never lives on the instance)
_HELD: dict[str, Any] = {"files": [], "sweep_dir": "", "stop": None, "thread": None, "finished": False,
                         "signals": {}, "stop_timeout_s": 60.0}
_LOCK = threading.RLock()  # re-entrant: a signal handler may run while it is held


def served_endpoints(config: DictConfig) -> dict[Path, str]:
    """The endpoint file of every served engine config in a sweep's config (`llm`, `judge.llm`, a judge's own, a
    reranker's), each once, with the setting that names it (for messages)."""
    from rag.llm.served import SERVED_TARGET

    task = OmegaConf.masked_copy(config, [k for k in config if k != "hydra"]) if "hydra" in config else config
    raw = OmegaConf.to_container(task, resolve=False)
    found: dict[Path, str] = {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            if node.get("_target_") == SERVED_TARGET:
                value = OmegaConf.select(config, f"{path}.endpoint_file", throw_on_missing=True)
                found.setdefault(Path(str(value)).expanduser().resolve(), f"{path}.endpoint_file")
            for key, value in node.items():
                walk(value, f"{path}.{key}" if path else str(key))

    walk(raw, "")
    return found


def served_endpoint_files(config: DictConfig) -> list[Path]:
    return list(served_endpoints(config))


class ServedModelCallback(Callback):
    def __init__(self, stop_at_end: bool = True, lease_s: float = 120.0, renew_s: float = 10.0,
                 stop_timeout_s: float = 60.0) -> None:
        # only settings here: the callback is pickled into every submitit job
        self.stop_at_end, self.lease_s, self.renew_s = stop_at_end, float(lease_s), float(renew_s)
        self.stop_timeout_s = float(stop_timeout_s)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from rag.core.errors import ConfigError, ServiceError
        from rag.llm.served import owner_gone, read_endpoint, read_owner, write_owner

        try:
            settings = served_endpoints(config)
        except Exception as err:  # noqa: BLE001 - an endpoint path that does not resolve (llm.name=???)
            print(f"served models: {str(err).splitlines()[0]}; no cell was launched", file=sys.stderr, flush=True)
            sys.exit(2)
        files = list(settings)
        if not files:
            return
        sweep_dir = str(Path(str(config.hydra.sweep.dir)).resolve())
        problems = []
        for file in files:
            try:
                endpoint = read_endpoint(file, settings[file])
            except (ServiceError, ConfigError) as err:
                problems.append(str(err))
                continue
            reason = endpoint.liveness()
            if reason:
                problems.append(f"{endpoint.describe()} does not serve: {reason}; start it with "
                                f"`{endpoint.command}`")
                continue
            owner = read_owner(file)
            if self.stop_at_end and owner and not owner_gone(owner) and owner.get("sweep_dir") != sweep_dir:
                problems.append(f"{endpoint.describe()} is held by sweep {owner.get('sweep_dir')}, which stops it "
                                f"when it ends; serve another copy (serve.name=...) for this sweep, or run this one "
                                f"with hydra.callbacks.served_model.stop_at_end=false")
        if problems:
            for line in problems:
                print(f"served models: {line}", file=sys.stderr)
            print(f"{len(problems)} served model(s) not usable; no cell was launched", file=sys.stderr, flush=True)
            sys.exit(2)
        if not self.stop_at_end:
            log.info("served model(s) %s: left running after this sweep (stop_at_end=false)",
                     ", ".join(map(str, files)))
            return
        with _LOCK:
            _HELD.update(files=files, sweep_dir=sweep_dir, finished=False, stop=threading.Event(),
                         stop_timeout_s=self.stop_timeout_s)
        for file in files:
            write_owner(file, sweep_dir, self.lease_s)
        thread = threading.Thread(target=_renew, args=(files, sweep_dir, self.lease_s, self.renew_s, _HELD["stop"]),
                                  name="served-model-lease", daemon=True)
        thread.start()
        _HELD["thread"] = thread
        _install_signal_handlers()
        atexit.register(finish, "the sweep process exited")
        log.info("served model(s) held for this sweep, stopped at its end: %s", ", ".join(map(str, files)))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        finish("the sweep ended")


def _renew(files: list[Path], sweep_dir: str, lease_s: float, renew_s: float, stop: threading.Event) -> None:
    from rag.llm.served import write_owner

    while not stop.wait(renew_s):
        for file in files:
            try:
                write_owner(file, sweep_dir, lease_s)
            except OSError as err:  # a full or unmounted disk: the lease runs out, and the server stops
                log.warning("cannot renew the lease of %s: %s", file, err)


def finish(reason: str) -> None:
    """Stop every server this process holds, once (later calls do nothing); never raises."""
    from rag.llm.served import owner_file, stop_server

    with _LOCK:
        if _HELD["finished"] or not _HELD["files"]:
            return
        _HELD["finished"] = True
        files, sweep_dir = list(_HELD["files"]), _HELD["sweep_dir"]
    if _HELD["stop"] is not None:
        _HELD["stop"].set()
    for file in files:
        try:
            log.info("%s", stop_server(file, f"{reason}: sweep {sweep_dir}", wait_s=_HELD["stop_timeout_s"]))
        except Exception:  # noqa: BLE001 - the sweep's outcome must not be hidden by a failed stop
            log.exception("could not stop the served model of %s", file)
        owner_file(file).unlink(missing_ok=True)


def _install_signal_handlers() -> None:
    """SIGTERM and SIGHUP stop the servers first, then do what they did before (by default: end the process)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if sig in _HELD["signals"]:
            continue
        _HELD["signals"][sig] = signal.getsignal(sig)
        signal.signal(sig, _on_signal)


def _on_signal(signum: int, frame: Any) -> None:
    finish(f"the sweep received {signal.Signals(signum).name}")
    previous = _HELD["signals"].get(signum, signal.SIG_DFL)
    signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        signal.raise_signal(signum)
