"""Index builds as a stage of their own (`python -m rag.index`): streamed, sharded, resumable, merged.

A tool-level package: it builds what the retrieve stage's retrievers (`rag.retrieve.bm25`, `.dense`, `.sharded`)
load, and ingests into the services `rag.retrieve.opensearch` / `.pinecone` query. See rag/index/main.py.
"""
