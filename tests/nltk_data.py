"""A tiny NLTK data folder, for code that imports autojudge_base (no network here, and no PyPI package ships it).

autojudge_base imports `document/text_chunker.py`, whose class `NltkInitializer` runs at import:
`nltk.data.find('tokenizers/punkt')` (existence only), `nltk.data.find('corpora/stopwords')` and
`stopwords.words('english')`, and calls `nltk.download` (network) for whichever is missing. Nothing on the paths our
tests take uses them (only its near-duplicate `normalize_text_sequence` would), so a folder in NLTK's layout with a
few stopwords suffices; `tokenizers/punkt_tab/english` (four empty files: an untrained Punkt, what `word_tokenize`
loads) is there too, should a later version tokenize. Point NLTK_DATA at it.
"""

from __future__ import annotations

from pathlib import Path

STOPWORDS = ("a", "an", "and", "the", "of", "to", "in", "is")


def make_nltk_data(root: Path) -> Path:
    """The folder at `root` (made), in NLTK's layout; returned for NLTK_DATA."""
    (root / "corpora" / "stopwords").mkdir(parents=True, exist_ok=True)
    (root / "corpora" / "stopwords" / "english").write_text("\n".join(STOPWORDS) + "\n", encoding="utf-8")
    (root / "tokenizers" / "punkt").mkdir(parents=True, exist_ok=True)
    tab = root / "tokenizers" / "punkt_tab" / "english"
    tab.mkdir(parents=True, exist_ok=True)
    for name in ("collocations.tab", "sent_starters.txt", "abbrev_types.txt", "ortho_context.tab"):
        (tab / name).write_text("", encoding="utf-8")
    return root
