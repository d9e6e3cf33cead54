"""Datasets: question loaders for each published format, and corpora chunked into passages."""
