"""Progress bars for long stages, with their rate: a live bar on a terminal, one line every 30 s in a log."""

from __future__ import annotations

import sys
from typing import Any


def progress_bar(total: int, desc: str, enabled: bool = True, unit: str = "doc", initial: int = 0) -> Any:
    """A tqdm bar over `total` items (`initial` already done). On a terminal a live bar; in a SLURM log or a piped
    console one line every 30 s (with the rate and the ETA) instead of thousands."""
    from tqdm import tqdm

    interactive = sys.stderr.isatty()
    return tqdm(total=total, initial=initial, desc=desc, unit=unit, disable=not enabled, dynamic_ncols=True,
                mininterval=0.5 if interactive else 30.0)
