"""The judge stage: records -> per-answer evaluations and run metrics.

This folder holds the interface only (`base.Judge`, and `run.evaluate_records`, which the pipeline calls for
whatever the `judge` config group composed) and the nugget set every nugget-based judge receives, with the one
rule for comparing cells on a nugget-based metric (`nugget_sets`). The judges themselves live in the `eval` package and are reached
through their YAML's `_target_`, so `rag` never imports `eval`.
"""
