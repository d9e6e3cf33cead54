"""Rerankers: re-score a retriever's candidates and cut the list to `k` for generation."""
