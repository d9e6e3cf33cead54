"""Sweep folders: which cells a Hydra multirun has (or should have), their overrides and metrics.

A sweep folder is what `python -m rag.main -m ...` writes under `hydra.sweep.dir`: `multirun.yaml` (the master
config and the sweep's overrides), one folder per cell (`<num>_<override_dirname>/` with `.hydra/`,
`answers.jsonl`, `metrics.json`) and, for submitit launchers, `.submitit/<job id>/` with job logs and results.
"""
