"""Metrics computed by the pipeline itself (no LLM): answer overlap and gold-document recall."""
