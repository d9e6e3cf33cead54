"""Live-day mode: `python -m rag.live questions=FILE deadline=2h` (see rag/live/day.py)."""
