"""The project's Hydra plugins (Hydra only instantiates sweepers and launchers found under `hydra_plugins`):
`sweeper.CheckedSweeper` (preflight of every cell before any launch) and `launcher.WatchedSlurmLauncher`
(a SLURM sweep that ends when a cell is cancelled or vanishes). Selected in conf/config.yaml and
conf/hydra/launcher/slurm.yaml. Beside them, a Hydra callback: `served.ServedModelCallback` stops the served models a
sweep uses when it ends (conf/hydra/callbacks/served_model.yaml, added by conf/llm/served.yaml)."""
