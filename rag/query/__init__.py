"""The query stage: what a question is searched with (HyDE, rewrites, decompositions), before retrieval."""
