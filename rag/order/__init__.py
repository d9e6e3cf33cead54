"""Context ordering: where the best passage sits in the prompt."""
