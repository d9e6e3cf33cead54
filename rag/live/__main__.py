"""`python -m rag.live questions=FILE deadline=2h [out=DIR] [live.<key>=...] [pipeline overrides]`.

A Hydra app on conf/live.yaml: the pipeline's config (every group and key overridable as for `python -m rag.main`,
e.g. `retriever=pinecone generator=instructrag`) plus the live day's settings (`live.<key>`, conf/live/default.yaml).
Its folder is Hydra's run folder (`out=DIR`, the same as `hydra.run.dir=DIR`); rerun into it to resume.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from omegaconf import DictConfig

from rag.core.errors import ConfigError, DataError, MissingDataError, ServiceError
from rag.core.secrets import add_known_secrets, install_log_masking, mask_hydra_files, secrets_in_overrides
from rag.live.day import CONF_DIR, LiveDay, split_overrides

MULTIRUN_REFUSED = ("error: ConfigError: -m/--multirun: a live day is one run into one folder (out=DIR); sweep "
                    "with python -m rag.main -m")
CLEAR_ERRORS = (DataError, MissingDataError, ServiceError, ConfigError, FileNotFoundError)

install_log_masking()
add_known_secrets(secrets_in_overrides(sys.argv[1:]))


def live_day(cfg: DictConfig) -> int:
    """Run the day the composed config describes; 0, or 2 after one line naming what is wrong."""
    hc = HydraConfig.get()
    day = None
    try:
        try:
            out = Path(hc.runtime.output_dir)
            mask_hydra_files(out, hc.overrides.task)
            day = LiveDay(cfg.live, split_overrides(list(hc.overrides.task)), out)
            summary = day.run()
        except InstantiationException as err:
            raise (err.__cause__ if isinstance(err.__cause__, CLEAR_ERRORS) else err) from None
    except CLEAR_ERRORS as err:
        print(f"error: {type(err).__name__}: {err}", file=sys.stderr)
        return 2
    finally:
        if day is not None:
            day.close()
    print(f"submission: {summary['submission']} ({summary['questions']} answers, per rung {summary['per_rung']}, "
          f"{timing(summary)})")
    return 0


def timing(summary: dict) -> str:
    """`on time, 120 s before the deadline` or `LATE, 4 s after the deadline` (never `LATE by -4 s`)."""
    margin = float(summary["margin_s"])
    if summary["on_time"]:
        return f"on time, {margin:.0f} s before the deadline"
    return f"LATE, {abs(margin):.0f} s after the deadline"


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="live")
def main(cfg: DictConfig) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    status = live_day(cfg)
    if status:
        sys.exit(status)


if __name__ == "__main__":
    from rag.core.entry import guard_command_line

    guard_command_line("live")
    if any(arg in ("-m", "--multirun") for arg in sys.argv[1:]):  # before Hydra's sweeper checks any cell
        print(MULTIRUN_REFUSED, file=sys.stderr)
        sys.exit(2)
    main()
