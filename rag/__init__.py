"""RAG research toolkit: dataset -> retrieve -> rerank -> order -> generate -> evaluate, configured by Hydra."""

__version__ = "0.1.0"
