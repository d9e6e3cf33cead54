"""Experiment loggers: where a run's config, metrics and answers are reported (W&B, or nowhere)."""
