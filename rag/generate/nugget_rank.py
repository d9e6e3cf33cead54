"""Crucible's nugget ranking: quality features, a scikit-learn classifier, fusion with popularity.

The Crucible paper ranks bank nuggets with a support-vector classifier over 19 quality features plus
readability and complexity, fused with popularity. Our features (`FEATURES`, in this order):

- `answer_words`, `question_words`: lengths; very short or very long answers tend to be vague or compound;
- `wh_what` ... `wh_other`, `polar`: the question type (what/who/when/where/why/how/which/other, yes-no);
- `answer_has_number`, `answer_capitalised`: share of answer tokens that are numbers or capitalised, a proxy
  for specificity (names, dates, quantities);
- `request_overlap`: Jaccard overlap of content words between the request and the nugget;
- `answer_in_question`: share of answer content words already in its question (tautological nuggets);
- `popularity`, `popularity_share`: documents that produced the nugget, absolute and over documents read;
- `flesch_reading_ease`, `difficult_words`, `syllables_per_word`, `lexicon_count`: readability and complexity
  (textstat) of "question answer".

Supervised: `NuggetRanker(model_path=...)` loads a joblib pipeline (StandardScaler + classifier) trained by
`python -m rag.generate.crucible_train` on AutoNuggetizer vital/okay weak labels; quality = P(vital).
Unsupervised fallback (no model configured), quality in [0, 1]:
    0.5 * request_overlap_norm + 0.25 * specific + 0.25 * well_sized
with request_overlap_norm = overlap / max overlap in the bank (0 when all are 0), specific = 1 when the answer
has a number or a capitalised word, well_sized = 1 when the answer has 1-15 words.
Fused score = fusion_weight * quality + (1 - fusion_weight) * popularity / max popularity in the bank.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag.core.errors import ConfigError, MissingDataError
from rag.core.hashing import stable_hash
from rag.generate.nugget_bank import Nugget

log = logging.getLogger(__name__)

WH = ("what", "who", "when", "where", "why", "how", "which")
POLAR = ("is", "are", "was", "were", "do", "does", "did", "can", "could", "has", "have", "had", "will", "should")
FEATURES = ("answer_words", "question_words", *(f"wh_{w}" for w in WH), "wh_other", "polar",
            "answer_has_number", "answer_capitalised", "request_overlap", "answer_in_question", "popularity",
            "popularity_share", "flesch_reading_ease", "difficult_words", "syllables_per_word", "lexicon_count")
_STOP = frozenset(["a", "an", "the", "of", "in", "on", "at", "to", "for", "and", "or", "is", "are", "was", "were", "be", "by", "with", "from", "as", "that", "this", "it", "its", "what", "who", "when", "where", "why", "how", "which", "do", "does", "did", "can", "you", "your", "about", "into", "than", "then"])


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9][A-Za-z0-9'-]*", text or "")


def _content(text: str) -> set[str]:
    return {w.lower() for w in _words(text) if w.lower() not in _STOP}


def features(nugget: Nugget, request: str, n_docs: int) -> dict[str, float]:
    """The documented quality features of one nugget (see the module docstring)."""
    import textstat

    q_words, a_words = _words(nugget.question), _words(nugget.answer)
    first = q_words[0].lower() if q_words else ""
    wh = {f"wh_{w}": float(any(t.lower() == w for t in q_words[:3])) for w in WH}
    wh["wh_other"] = float(not any(wh.values()))
    request_c, nugget_c = _content(request), _content(nugget.text)
    answer_c, question_c = _content(nugget.answer), _content(nugget.question)
    text = nugget.text or "."
    n_words = max(1, len(_words(text)))
    return {
        "answer_words": float(len(a_words)), "question_words": float(len(q_words)), **wh,
        "polar": float(first in POLAR),
        "answer_has_number": sum(any(c.isdigit() for c in w) for w in a_words) / max(1, len(a_words)),
        "answer_capitalised": sum(w[:1].isupper() for w in a_words) / max(1, len(a_words)),
        "request_overlap": len(request_c & nugget_c) / max(1, len(request_c | nugget_c)),
        "answer_in_question": len(answer_c & question_c) / max(1, len(answer_c)),
        "popularity": float(nugget.popularity), "popularity_share": nugget.popularity / max(1, n_docs),
        "flesch_reading_ease": float(textstat.flesch_reading_ease(text)),
        "difficult_words": float(textstat.difficult_words(text)),
        "syllables_per_word": textstat.syllable_count(text) / n_words,
        "lexicon_count": float(textstat.lexicon_count(text)),
    }


def feature_matrix(rows: Sequence[dict[str, float]]) -> np.ndarray:
    return np.array([[row[name] for name in FEATURES] for row in rows], dtype=np.float64).reshape(-1, len(FEATURES))


def unsupervised_quality(rows: Sequence[dict[str, float]]) -> list[float]:
    """The documented fallback quality in [0, 1] (module docstring)."""
    top = max((r["request_overlap"] for r in rows), default=0.0)
    out = []
    for r in rows:
        overlap = r["request_overlap"] / top if top > 0 else 0.0
        specific = float(r["answer_has_number"] > 0 or r["answer_capitalised"] > 0)
        well_sized = float(1 <= r["answer_words"] <= 15)
        out.append(0.5 * overlap + 0.25 * specific + 0.25 * well_sized)
    return out


def make_classifier(kind: str = "logistic", seed: int = 0) -> Any:
    """A scaler + classifier pipeline: `logistic` (LogisticRegression) or `gradient_boosting`."""
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if kind == "logistic":
        clf = LogisticRegression(max_iter=1000, class_weight="balanced", random_state=seed)
    elif kind == "gradient_boosting":
        clf = GradientBoostingClassifier(random_state=seed)
    else:
        raise ConfigError(f"crucible ranker classifier must be logistic or gradient_boosting, got {kind!r}")
    return make_pipeline(StandardScaler(), clf)


def train_ranker(rows: Sequence[dict[str, float]], labels: Sequence[int], cache_dir: str | Path,
                 kind: str = "logistic", seed: int = 0) -> tuple[Any, Path, bool]:
    """Fit (or load) the classifier for these training rows. Returns (model, file, loaded_from_cache).

    The file is `<cache_dir>/crucible_rank/<hash>.joblib`, the hash over the feature rows, labels, feature
    names, classifier kind and seed, so the same training data never trains twice."""
    import joblib

    if len(rows) != len(labels):
        raise ValueError(f"{len(rows)} feature rows but {len(labels)} labels")
    if len(set(labels)) < 2:
        raise ValueError(f"training data needs both classes (vital and not); got {len(labels)} examples of "
                         f"class(es) {sorted(set(labels))}")
    key = stable_hash({"rows": [[round(r[f], 6) for f in FEATURES] for r in rows], "labels": list(labels),
                       "features": FEATURES, "kind": kind, "seed": seed})
    path = Path(cache_dir) / "crucible_rank" / f"{key}.joblib"
    if path.is_file():
        return joblib.load(path), path, True
    model = make_classifier(kind, seed).fit(feature_matrix(rows), np.asarray(labels))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    joblib.dump(model, tmp)
    tmp.replace(path)
    return model, path, False


class NuggetRanker:
    """Scores bank nuggets: classifier (or fallback) quality fused with popularity."""

    def __init__(self, model_path: str | None = None, fusion_weight: float = 0.5):
        if not 0 <= fusion_weight <= 1:
            raise ConfigError(f"generator.ranker.fusion_weight must be in [0, 1], got {fusion_weight}")
        self.model_path, self.fusion_weight = model_path, fusion_weight
        self._model = None
        if model_path and not Path(model_path).expanduser().is_file():
            raise MissingDataError(f"generator.ranker.model_path: no model file at {model_path} "
                                   f"(train one with `python -m rag.generate.crucible_train RUNS... --evaluated "
                                   f"EVALUATED... --out FILE`)")

    @property
    def mode(self) -> str:
        return "classifier" if self.model_path else "unsupervised"

    @property
    def model(self) -> Any:
        if self._model is None and self.model_path:
            import joblib

            self._model = joblib.load(Path(self.model_path).expanduser())
        return self._model

    def rank(self, bank: list[Nugget], request: str, n_docs: int) -> list[Nugget]:
        """The bank in fused-score order (highest first); sets `quality` and `score` on each nugget."""
        if not bank:
            return []
        rows = [features(n, request, n_docs) for n in bank]
        if self.model is not None:
            quality = [float(p) for p in self.model.predict_proba(feature_matrix(rows))[:, 1]]
        else:
            quality = unsupervised_quality(rows)
        top_pop = max(n.popularity for n in bank)
        for n, q in zip(bank, quality):
            n.quality = round(q, 6)
            n.score = round(self.fusion_weight * q + (1 - self.fusion_weight) * n.popularity / top_pop, 6)
        order = sorted(range(len(bank)), key=lambda i: (-(bank[i].score or 0.0), i))
        return [bank[i] for i in order]
