"""Hydra's basic sweeper, plus a preflight over every cell before any cell is launched.

`conf/hydra/sweeper/checked.yaml` makes this the default sweeper. It expands the sweep exactly as the basic
sweeper does (its own `split_arguments`, with `hydra.sweeper.params`), composes each cell with Hydra's config
loader (as every launcher will), and checks them with `rag.preflight`: one line per problem, exit status 2,
nothing launched or submitted, whichever launcher (basic, local, SLURM) is configured. It also masks secrets
passed as overrides in `multirun.yaml` right after Hydra writes it.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser

log = logging.getLogger(__name__)


class CheckedSweeper(BasicSweeper):
    def cells(self, arguments: list[str]) -> list[list[str]]:
        """Every cell's overrides in job order, as `BasicSweeper.sweep` will launch them."""
        params = self._parse_config()
        params.extend(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        batches = self.split_arguments(parser.parse_overrides(params), None)
        return [list(job) for batch in batches for job in batch]

    def preflight(self, arguments: list[str]) -> list[str]:
        from rag.preflight import check_cells

        loader = self.hydra_context.config_loader
        cfgs = [loader.load_sweep_config(master_config=self.config, sweep_overrides=cell)
                for cell in self.cells(arguments)]
        return [problem.line(len(cfgs)) for problem in check_cells(cfgs)]

    def sweep(self, arguments: list[str]) -> Any:
        from rag.core.secrets import mask_text

        problems = self.preflight(list(arguments))
        if problems:
            for line in problems:
                print(mask_text(line), file=sys.stderr)
            print(f"Preflight found {len(problems)} problem(s); no cell was launched", file=sys.stderr, flush=True)
            sys.exit(2)
        return super().sweep(arguments)

    def validate_batch_is_legal(self, batch: Any) -> None:
        """Called after `multirun.yaml` is written and before the launch: mask the secrets in it first."""
        from rag.core.secrets import add_known_secrets, mask_file, secrets_in_overrides

        known = secrets_in_overrides(self.config.hydra.overrides.task)
        add_known_secrets(known)
        try:
            mask_file(Path(str(self.config.hydra.sweep.dir)) / "multirun.yaml", known)
        except OSError as err:
            log.warning("cannot mask secrets in multirun.yaml: %s", err)
        super().validate_batch_is_legal(batch)
