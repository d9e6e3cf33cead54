"""Command-line overrides that name folders this project wrote.

Sweep cell folders are named by their overrides (`3_rerank.k=5,retriever=bm25`), and Hydra's override grammar
reads `=` and `,` in a value as syntax (`mismatched input '='`). A folder-valued override (`run_dir=...`) whose
value Hydra cannot parse is quoted before Hydra sees it, so every command accepts the folders the sweep prints.
"""

from __future__ import annotations

from collections.abc import Sequence

#: overrides whose value is a folder or file path
FOLDER_KEYS = ("run_dir", "out_dir", "sweep_dir", "cache_dir", "hydra.run.dir", "hydra.sweep.dir")


def quote_override_value(value: str) -> str:
    """A value quoted for Hydra's override grammar (`'` inside escaped): any folder name is then one string."""
    return "'" + value.replace("'", "\\'") + "'"


def _parses(override: str) -> bool:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        OverridesParser.create().parse_override(override)
    except Exception:  # noqa: BLE001 - Hydra raises its own exception types for grammar errors
        return False
    return True


def quote_folder_overrides(args: Sequence[str], keys: Sequence[str] = FOLDER_KEYS) -> list[str]:
    """`run_dir=/x/3_rerank.k=5,retriever=bm25` -> `run_dir='/x/3_rerank.k=5,retriever=bm25'`; every other
    argument, and a value Hydra already parses (or that is quoted), is left as it is."""
    out = []
    for arg in args:
        key, eq, value = arg.partition("=")
        bare = key.lstrip("+~")
        if eq and bare in keys and value and value[0] not in "'\"" and not _parses(arg):
            arg = f"{key}={quote_override_value(value)}"
        out.append(arg)
    return out
