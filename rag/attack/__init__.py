"""Attacks on the corpus, applied before indexing: PoisonedRAG's black-box poisoning and prompt injection
(conf/attack/). `rag.attack.base` plans the targets and keeps the attack file; `rag.attack.corpus` plants them."""
