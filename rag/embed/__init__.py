"""Text embedding shared by dense retrieval, the dense reranker, Pinecone queries and TrustRAG's filter."""

from rag.embed.embedder import Embedder

__all__ = ["Embedder"]
