"""Entry point: `python -m rag.main [overrides]`, or `-m` for a Hydra multirun (sweep).

Each run writes into its Hydra output folder: the composed config, `answers.jsonl` and `metrics.json`.

Before any work: a secret given by value on the command line or in the config is refused and every unset `???`
setting named, one line each (`rag.core.entry`), a multirun checks all its cells (`rag.preflight`, run by the
sweeper in `hydra_plugins/rag_sweep`; nothing is launched when one fails), and a run checks its own config and
refuses a folder that holds answers of another config (`rag.fingerprint`). Masking (`rag.core.secrets`) remains
for text the project does not control: log lines, exception messages.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from rag.core.errors import ONE_LINE_ERRORS, ConfigError
from rag.core.overrides import quote_folder_overrides
from rag.core.secrets import (
    add_known_secrets,
    install_log_masking,
    mask_hydra_files,
    mask_text,
    register_resolver,
    secrets_in_overrides,
)
from rag.fingerprint import check_run_dir
from rag.folders import RunFolder
from rag.metrics.console import CONSOLE_MODES, console_report
from rag.pipeline import Pipeline
from rag.preflight import check_config
from rag.preflight.attack import add_attack_metrics
from rag.preflight.substitutions import apply_substitutions
from rag.sweep.cells import sweep_group
from rag.sweep.group_keys import force_keys_of_swept_groups

log = logging.getLogger(__name__)

#: errors whose message already says what is wrong and where: printed as one line, exit status 2
CLEAR_ERRORS = ONE_LINE_ERRORS

# secrets given on the command line are masked in every log line and in `${rag.mask:...}` folder names
install_log_masking()
register_resolver()
add_known_secrets(secrets_in_overrides(sys.argv[1:]))


class PreflightError(ConfigError):
    """Problems found in a config before any work; one line each."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


def _one_line(err: BaseException) -> str:
    if isinstance(err, PermissionError):
        return (f"PermissionError: permission denied: {err.filename or err} (a shared cache or output folder "
                f"needs group write access: umask 002 and a group-writable folder)")
    return f"{type(err).__name__}: {err}"


def run(cfg: DictConfig, run_dir: Path, name: str | None = None, group: str | None = None,
        tags: list[str] | None = None) -> dict[str, Any]:
    """Run the pipeline for one composed config and log it (also used by tests and the sweep launcher)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never download a model silently
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    apply_substitutions(cfg)  # substitutions=embedded: laptop stand-ins for what cannot run here
    add_attack_metrics(cfg)  # an attacked run measures its attack (saved, fingerprinted and checked with the rest)
    problems = check_config(cfg)
    if (cfg.get("report_console") or "short") not in CONSOLE_MODES:  # before the work, not after it
        problems.append(f"report_console={cfg.get('report_console')}: one of {', '.join(CONSOLE_MODES)}")
    if problems:
        raise PreflightError(problems)
    check_run_dir(cfg, run_dir)  # before any index is built or model loaded
    pipeline = Pipeline(cfg)
    try:
        metrics = pipeline.run(run_dir)
        logger = instantiate(cfg.logger)
        logger.log_run(OmegaConf.to_container(cfg, resolve=True), metrics, RunFolder(run_dir).rows(),
                       run_dir, name=name or run_dir.name, group=group, tags=tags)
    finally:
        pipeline.close()
    return metrics


def _sweep_identity() -> tuple[str, str | None, list[str]]:
    """Run name, sweep group and tags (one per overridden value) from Hydra's runtime."""
    hc = HydraConfig.get()
    overrides = [mask_text(o) for o in hc.overrides.task if not o.startswith(("paths.", "hydra."))]
    name = mask_text(hc.job.override_dirname) or hc.job.name
    group = sweep_group(hc.sweep.dir) if hc.mode.name == "MULTIRUN" else None
    return name, group, overrides


def _mask_hydra_files(run_dir: Path) -> None:
    """Hydra wrote the overrides (secrets included) into `.hydra/*.yaml` and `multirun.yaml`: mask them."""
    hc = HydraConfig.get()
    multirun = [Path(hc.sweep.dir) / "multirun.yaml"] if hc.mode.name == "MULTIRUN" else []
    mask_hydra_files(run_dir, hc.overrides.task, multirun)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    _mask_hydra_files(run_dir)
    name, group, tags = _sweep_identity()
    try:
        try:
            metrics = run(cfg, run_dir, name=name, group=group, tags=tags)
        except InstantiationException as err:  # a component's constructor refused its config
            raise (err.__cause__ if isinstance(err.__cause__, CLEAR_ERRORS) else err) from None
    except CLEAR_ERRORS as err:
        # bad input or an unreachable service: one clear message, no stack trace (nothing half-written)
        for line in (err.problems if isinstance(err, PreflightError) else [_one_line(err)]):
            log.error("%s", line)
        if HydraConfig.get().mode.name == "MULTIRUN" or "SUBMITIT_EXECUTOR" in os.environ:
            raise  # launchers record a failed cell from the exception; SystemExit would leave no result
        sys.exit(2)
    # the closing block (report_console: short), or every metric first (full): rag.metrics.console
    rerank = cfg.get("rerank")
    prompt_k = (rerank.get("k") if isinstance(rerank, DictConfig) else None) or cfg.retriever.get("k")
    print("\n" + console_report(metrics, run_dir, prompt_k, cfg.get("report_console") or "short"), flush=True)
    objective = cfg.get("objective")
    return metrics.get(objective) if objective else None


def _argv_for_hydra(argv: list[str]) -> list[str]:
    """Keys of a swept group become `++key=` in a multirun (see `rag.sweep.group_keys`), said in one line each."""
    argv, rewritten = force_keys_of_swept_groups(argv)
    for override in rewritten:
        print(f"multirun: {override} is applied as ++{override} (Hydra composes the default option of a swept "
              f"group before the sweep)", file=sys.stderr)
    return argv


if __name__ == "__main__":
    from rag.core.entry import guard_command_line

    guard_command_line("config")  # secrets by value and unchosen ??? groups: one line each, before Hydra
    sys.argv[1:] = _argv_for_hydra(quote_folder_overrides(sys.argv[1:]))
    main()
