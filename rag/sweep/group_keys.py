"""Keys of a swept config group, set on the command line of a multirun.

Hydra composes a multirun's master config with each swept group's *default* option before it expands the
sweep, so `-m generator=crucible,ginger generator.max_docs=3` stops with "Key 'max_docs' is not in struct"
whenever the default generator has no `max_docs`, although every cell would have it (Hydra's advice, `+`,
then fails in the cells that do). `++key=value` (set where present, add where absent) composes in both places;
an option that really lacks the key then fails in its own cell, where its constructor refuses the argument.
"""

from __future__ import annotations

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import OverrideType

MULTIRUN_FLAGS = ("-m", "--multirun")


def force_keys_of_swept_groups(argv: list[str]) -> tuple[list[str], list[str]]:
    """(argv with `group.key=v` made `++group.key=v` where `group` is swept, the rewritten overrides)."""
    if not any(arg in MULTIRUN_FLAGS for arg in argv):
        return argv, []
    positions = [i for i, arg in enumerate(argv) if "=" in arg and not arg.startswith("-")]
    try:
        parsed = OverridesParser.create().parse_overrides([argv[i] for i in positions])
    except Exception:  # noqa: BLE001 - Hydra reports its own parse errors, with the offending override
        return argv, []
    swept_groups = {o.key_or_group for o in parsed
                    if o.is_sweep_override() and "." not in o.key_or_group and o.type == OverrideType.CHANGE}
    rewritten: list[str] = []
    out = list(argv)
    for i, override in zip(positions, parsed):
        group = override.key_or_group.split(".", 1)[0]
        if override.type == OverrideType.CHANGE and "." in override.key_or_group and group in swept_groups:
            out[i] = "++" + argv[i]
            rewritten.append(argv[i])
    return out, rewritten
