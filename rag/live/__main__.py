"""`python -m rag.live questions=FILE deadline=2h [out=DIR] [live.<key>=...] [pipeline overrides]`.

`questions`, `deadline` and `out` (or any `live.<key>`) set conf/live/default.yaml; every other argument is an
override of the pipeline's config, as for `python -m rag.main` (e.g. `retriever=pinecone generator=instructrag`).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from hydra.errors import InstantiationException

from rag.core.errors import ConfigError, DataError, MissingDataError, ServiceError

CLEAR_ERRORS = (DataError, MissingDataError, ServiceError, ConfigError, FileNotFoundError)
LIVE_KEYS = {"questions": "questions", "deadline": "deadline", "out": "out_dir", "out_dir": "out_dir"}


def split_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(live overrides, pipeline overrides); Hydra's own settings are refused: this command is not a Hydra app
    and would ignore them (`hydra.run.dir=X` once wrote to `live.out_dir` anyway, resuming what was there)."""
    live, pipeline = [], []
    for arg in argv:
        key, _, value = arg.partition("=")
        if key.lstrip("+~").startswith("hydra.") or key.lstrip("+~") == "hydra" or arg in ("-m", "--multirun"):
            raise ConfigError(f"{arg}: python -m rag.live is not a Hydra app and does not use Hydra's settings; "
                              f"its folder is out=DIR (live.out_dir)")
        if key in LIVE_KEYS:
            live.append(f"{LIVE_KEYS[key]}={value}")
        elif key.startswith("live."):
            live.append(arg.removeprefix("live."))
        else:
            pipeline.append(arg)
    return live, pipeline


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from rag.live.day import LiveDay, load_live_config

    day = None
    try:
        try:
            live_overrides, pipeline_overrides = split_args(argv)
            day = LiveDay(load_live_config(live_overrides), pipeline_overrides)
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
          f"{'on time' if summary['on_time'] else 'LATE'} by {summary['margin_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
