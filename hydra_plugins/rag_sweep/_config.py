"""Structured config of `WatchedSlurmLauncher` (group `hydra/launcher`, name `rag_slurm`).

Kept in a module whose name starts with "_": Hydra's plugin scanner skips it (it executes modules outside
`sys.modules`, where a dataclass cannot be built); `launcher.py` imports it normally, which registers it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hydra.core.config_store import ConfigStore
from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf


@dataclass
class RagSlurmQueueConf(SlurmQueueConf):
    """submitit's SLURM launcher settings, plus how many cells one job may run (conf/hydra/launcher/slurm.yaml)."""

    _target_: str = "hydra_plugins.rag_sweep.launcher.WatchedSlurmLauncher"
    #: cells that share their LLM configs run one after another in one job, up to this many (1: a job per cell)
    cells_per_job: int = 1


ConfigStore.instance().store(group="hydra/launcher", name="rag_slurm", node=RagSlurmQueueConf(),
                             provider="rag_sweep")
