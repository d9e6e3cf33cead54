"""Find the cells of a sweep folder: the ones Hydra started and the ones it should have started.

Started cells are folders with `.hydra/overrides.yaml`. Expected cells come from `multirun.yaml`: its task
overrides are expanded exactly as Hydra's basic sweeper does, so a cell whose job never started (cancelled,
node failure, submission error) still shows up, with the folder it would have had.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from rag.core.errors import DataError
from rag.folders import RunFolder

log = logging.getLogger(__name__)


def split_override(override: str) -> tuple[str, str]:
    """`key=value` (also `+key=`, `++key=`, `~key`) -> (key, value); the key as Hydra names it."""
    text = override.lstrip("+~")
    key, _, value = text.partition("=")
    return key.strip(), value.strip()


#: a secret as masking wrote it before issue 36 (`api_key: ***`): a YAML alias, so the file did not parse
_LEGACY_MASK = re.compile(r"(:[ \t]+)\*\*\*(?=[ \t]*(?:[,}\]#]|$))", re.M)


def read_yaml(path: str | Path) -> Any:
    """A run's or a sweep's YAML file (`.hydra/*.yaml`, `multirun.yaml`), as plain YAML on purpose: Hydra's files
    hold interpolations that only resolve inside a running job. A file masked by an older version
    (`api_key: ***`, which YAML reads as a broken alias) is read with the mask quoted."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        repaired = _LEGACY_MASK.sub(r"\1'***'", text)
        if repaired == text:
            raise
        return yaml.safe_load(repaired)



@dataclass
class Cell:
    """One sweep cell: its folder, its command-line overrides and what it has produced so far."""

    dir: Path
    overrides: list[str]
    num: int | None = None
    #: started: Hydra created `.hydra/` (the job ran at least up to the task function)
    started: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.dir.name

    @property
    def values(self) -> dict[str, str]:
        """Overridden key -> value, e.g. {"retriever": "bm25", "rerank.k": "3"}."""
        return dict(split_override(o) for o in self.overrides)

    @property
    def run(self) -> RunFolder:
        """The cell's run folder (answers, metrics, config)."""
        return RunFolder(self.dir)

    @property
    def complete(self) -> bool:
        return self.run.complete

    @cached_property
    def metrics(self) -> dict[str, Any] | None:
        if not self.run.complete:
            return None
        try:
            return self.run.metrics()
        except DataError:
            log.warning("unreadable %s", self.run.metrics_path)
            return None

    def journal_lines(self) -> int:
        """Answers journalled by an unfinished run (what a resume keeps)."""
        return self.run.journal_lines()

    @cached_property
    def hydra(self) -> dict[str, Any]:
        """The cell's `.hydra/hydra.yaml` (job id, num, mode), or {}."""
        path = self.dir / ".hydra" / "hydra.yaml"
        try:
            return (read_yaml(path) or {}).get("hydra", {}) if path.is_file() else {}
        except yaml.YAMLError:
            return {}

    @property
    def job_id(self) -> str | None:
        """Scheduler job id written by the submitit launcher (`<array>_<index>` on SLURM, a pid locally)."""
        value = self.hydra.get("job", {}).get("id")
        return None if value in (None, "???") else str(value)


@dataclass
class SweepFolder:
    """A sweep folder: the master config from `multirun.yaml` and its cells (each a `RunFolder`)."""

    dir: Path
    cells: list[Cell]
    master: dict[str, Any]

    @property
    def group(self) -> str:
        """The W&B group of the sweep's runs (the same function names it in `rag.main`)."""
        return sweep_group(self.dir)

    @property
    def swept_keys(self) -> list[str]:
        """Keys whose value differs between cells, in the order they were given on the command line."""
        keys: dict[str, set[str]] = {}
        for cell in self.cells:
            for key, value in cell.values.items():
                keys.setdefault(key, set()).add(value)
        n = len(self.cells)
        return [k for k, vals in keys.items()
                if len(vals) > 1 or sum(k in c.values for c in self.cells) < n]

    @property
    def fixed_overrides(self) -> dict[str, str]:
        """Overrides every cell shares (shown once, not as a column)."""
        swept = set(self.swept_keys)
        out: dict[str, str] = {}
        for cell in self.cells:
            for key, value in cell.values.items():
                if key not in swept:
                    out[key] = value
        return out

    def launcher_params(self) -> dict[str, Any]:
        """`hydra.launcher` of the sweep, resolved where possible (interpolations may need a running job)."""
        from omegaconf import OmegaConf

        path = self.dir / "multirun.yaml"
        if not path.is_file():
            return {}
        from hydra.core.utils import setup_globals

        setup_globals()  # registers Hydra's `now` / `hydra` resolvers
        cfg = OmegaConf.create(read_yaml(path))
        launcher = cfg.hydra.get("launcher", {})
        out: dict[str, Any] = {}
        for key in launcher:
            try:
                value = launcher[key]
                out[key] = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
            except Exception:  # noqa: BLE001 - e.g. ${hydra.sweep.dir} outside a job: leave it out
                continue
        return out


def expected_overrides(master: dict[str, Any]) -> list[list[str]] | None:
    """Per-job override lists in job-number order, expanded as Hydra's basic sweeper does; None if unknown."""
    hydra_cfg = master.get("hydra", {})
    sweeper = str(hydra_cfg.get("sweeper", {}).get("_target_", ""))
    task = hydra_cfg.get("overrides", {}).get("task")
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if task is None or (sweeper and not _expands_as_basic(sweeper, BasicSweeper)):
        return None  # other sweepers (Optuna, ...) choose cells as they go

    # as BasicSweeper.sweep: the sweeper's own params (an experiment's `hydra.sweeper.params`) first, then the
    # command line's; a key given in both keeps its first position and takes the command line's values
    params = [f"{key}={value}" for key, value in (hydra_cfg.get("sweeper", {}).get("params") or {}).items()]
    parsed = OverridesParser.create().parse_overrides([*params, *task])
    batches = BasicSweeper.split_arguments(parsed, None)
    return [list(job) for batch in batches for job in batch]


def _expands_as_basic(target: str, basic: type) -> bool:
    """Hydra's basic sweeper or a subclass of it (this project's preflight-checking `CheckedSweeper`)."""
    if target.endswith("BasicSweeper"):
        return True
    from hydra.utils import get_class

    try:
        return issubclass(get_class(target), basic)
    except Exception:  # noqa: BLE001 - a sweeper that cannot be imported here: its cells are unknown
        return False


def override_dirname(overrides: list[str], master: dict[str, Any]) -> str:
    """`${hydra.job.override_dirname}` for these overrides under the sweep's settings."""
    conf = master.get("hydra", {}).get("job", {}).get("config", {}).get("override_dirname", {})
    exclude = set(conf.get("exclude_keys") or [])
    kv_sep, item_sep = conf.get("kv_sep", "="), conf.get("item_sep", ",")
    lines = sorted(o for o in overrides if split_override(o)[0] not in exclude)
    return item_sep.join(lines).replace("=", kv_sep)


def _subdir(num: int, overrides: list[str], master: dict[str, Any]) -> str:
    from rag.core.hashing import cap_name
    from rag.core.secrets import folder_safe, mask_text

    pattern = str(master.get("hydra", {}).get("sweep", {}).get("subdir", "${hydra.job.num}"))
    dirname = override_dirname(overrides, master)
    masked = cap_name(folder_safe(mask_text(dirname)))  # as the `rag.mask` resolver names it
    name = pattern.replace("${hydra.job.num}", str(num)).replace(
        "${rag.mask:${hydra.job.override_dirname}}", masked).replace(
        "${hydra.job.override_dirname}", dirname)
    return name if "${" not in name else f"{num}_{masked}"


def load_sweep(sweep_dir: str | Path) -> SweepFolder:
    """Started cells plus expected-but-missing ones, ordered by job number."""
    sweep_dir = Path(sweep_dir).expanduser().resolve()
    if not sweep_dir.is_dir():
        raise FileNotFoundError(f"no sweep folder at {sweep_dir}")
    master_path = sweep_dir / "multirun.yaml"
    master = (read_yaml(master_path) or {}) if master_path.is_file() else {}

    started: list[Cell] = []
    for child in sorted(p for p in sweep_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
        overrides_file = child / ".hydra" / "overrides.yaml"
        if not overrides_file.is_file():
            continue
        cell = Cell(dir=child, overrides=[str(o) for o in (read_yaml(overrides_file) or [])], started=True)
        num = cell.hydra.get("job", {}).get("num")  # absent ("???") once a cell was rerun outside the sweep
        if not (isinstance(num, int) or str(num).isdigit()):
            prefix = child.name.split("_", 1)[0]
            num = int(prefix) if prefix.isdigit() else None
        cell.num = int(num) if num is not None else None
        started.append(cell)

    cells = list(started)
    try:
        expected = expected_overrides(master) if master else None
    except Exception as err:  # noqa: BLE001 - a sweep spec we cannot expand: report started cells only
        log.warning("cannot expand the sweep overrides of %s: %s", master_path, err)
        expected = None
    if expected:
        have = {frozenset(c.overrides) for c in started}
        for num, overrides in enumerate(expected):
            if frozenset(overrides) not in have:
                cells.append(Cell(dir=sweep_dir / _subdir(num, overrides, master), overrides=overrides, num=num))
    cells.sort(key=lambda c: (c.num is None, c.num if c.num is not None else 0, c.name))
    return SweepFolder(dir=sweep_dir, cells=cells, master=master)


def sweep_group(sweep_dir: str | Path) -> str:
    """W&B group of a sweep: its folder with the parent (`<date>_<time>` for the default layout), so sweeps
    started at the same time of day on different days never share a group."""
    path = Path(sweep_dir)
    return f"{path.parent.name}_{path.name}" if path.parent.name else path.name
