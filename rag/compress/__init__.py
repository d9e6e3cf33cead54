"""Context compression: the stage between ordering and generation (`compress=none | recomp_extractive | provence |
llmlingua2`), shrinking each question's passages before the generator reads them (rag/compress/base.py)."""
