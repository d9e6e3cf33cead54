"""Exporters from our answers.jsonl to shared task formats."""
