"""Retrievers: the first stage, from questions to ranked candidate passages."""
