"""Stable document ids for corpora whose files have none (MuSiQue paragraphs share titles)."""

from __future__ import annotations

import hashlib


def paragraph_doc_id(title: str, text: str) -> str:
    digest = hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()[:12]
    return f"{title}#{digest}"
