"""Benchmark generation, DataMorgana style: QA pairs from any corpus with any engine (`python -m rag.datagen`)."""
