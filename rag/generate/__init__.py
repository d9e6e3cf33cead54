"""Generation strategies: from a question and its ordered passages to an answer (and its intermediate steps)."""
