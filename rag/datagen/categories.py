"""Question and user categorizations (DataMorgana, Filice et al. 2025) and the per-pair category draw.

A categorization is a list of categories with probabilities that sum to 1; each pair draws one category from
every categorization, independently. The draw of pair `i` depends only on (seed, i), so a fixed seed gives the
same categories on a rerun, after a resume, and whatever the engine produces for other pairs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rag.core.errors import ConfigError

#: probabilities of one categorization must sum to 1 within this tolerance
PROBABILITY_TOLERANCE = 1e-6
#: name of the categorization whose category becomes the TSV's `question_multi-doc` column (LiveRAG's name)
MULTI_DOC_CATEGORIZATION = "multi-doc"


@dataclass(frozen=True)
class Category:
    name: str
    description: str
    probability: float
    #: the pair is built from two related documents instead of one
    is_multi_doc: bool = False


@dataclass(frozen=True)
class Categorization:
    name: str
    #: "question" or "user": the column prefix in the TSV and the prompt section the description goes to
    kind: str
    categories: tuple[Category, ...]

    @property
    def column(self) -> str:
        return f"{self.kind}_{self.name}"

    @property
    def probabilities(self) -> np.ndarray:
        return np.array([c.probability for c in self.categories], dtype=float)


def _categorization(spec: Any, kind: str, where: str) -> Categorization:
    if not isinstance(spec, Mapping) or not spec.get("name") or not spec.get("categories"):
        raise ConfigError(f"{where}: each categorization needs a `name` and a non-empty `categories` list")
    name = str(spec["name"])
    where = f"{where} {name!r}"
    categories = []
    for j, cat in enumerate(spec["categories"]):
        if not isinstance(cat, Mapping) or not cat.get("name") or not str(cat.get("description") or "").strip():
            raise ConfigError(f"{where}: category {j} needs a `name` and a `description`")
        try:
            probability = float(cat.get("probability"))
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: category {cat['name']!r} has no numeric `probability`") from None
        if probability < 0:
            raise ConfigError(f"{where}: category {cat['name']!r} has a negative probability ({probability})")
        categories.append(Category(name=str(cat["name"]), description=" ".join(str(cat["description"]).split()),
                                   probability=probability, is_multi_doc=bool(cat.get("is_multi_doc", False))))
    names = [c.name for c in categories]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: duplicate category names {sorted({n for n in names if names.count(n) > 1})}")
    total = sum(c.probability for c in categories)
    if abs(total - 1.0) > PROBABILITY_TOLERANCE:
        raise ConfigError(f"{where}: probabilities sum to {total:.6g}, not 1 (within {PROBABILITY_TOLERANCE:g}): "
                          + ", ".join(f"{c.name}={c.probability:g}" for c in categories))
    return Categorization(name=name, kind=kind, categories=tuple(categories))


class CategorySet:
    """All question and user categorizations of a run, validated, with a reproducible per-pair draw."""

    def __init__(self, question_categorizations: Sequence[Any] = (), user_categorizations: Sequence[Any] = (),
                 name: str = "categories", **_ignored: Any):
        self.name = name
        self.question = [_categorization(s, "question", f"categories={name}: question_categorizations")
                         for s in (question_categorizations or [])]
        self.user = [_categorization(s, "user", f"categories={name}: user_categorizations")
                     for s in (user_categorizations or [])]
        if not self.question and not self.user:
            raise ConfigError(f"categories={name}: no question_categorizations or user_categorizations given")
        columns = [c.column for c in self.all]
        if len(set(columns)) != len(columns):
            raise ConfigError(f"categories={name}: categorization names repeat within question or user ones")
        # multi-doc categories in more than one categorization would make "how many documents" ambiguous
        multi = [c.name for c in self.all if any(x.is_multi_doc for x in c.categories)]
        if len(multi) > 1:
            raise ConfigError(f"categories={name}: is_multi_doc categories appear in several categorizations "
                              f"({', '.join(multi)}); put them in one")

    @property
    def all(self) -> list[Categorization]:
        return self.question + self.user

    @property
    def multi_doc_probability(self) -> float:
        return sum(c.probability for cz in self.all for c in cz.categories if c.is_multi_doc)

    def draw(self, seed: int, index: int) -> dict[str, Category]:
        """One category per categorization (keyed by TSV column) for pair `index`."""
        rng = np.random.default_rng([int(seed), int(index)])
        out: dict[str, Category] = {}
        for cz in self.all:
            out[cz.column] = cz.categories[int(rng.choice(len(cz.categories), p=cz.probabilities))]
        return out

    def columns(self) -> list[str]:
        """TSV category columns: question ones, then `question_multi-doc` (always present), then user ones."""
        question = [c.column for c in self.question]
        multi = f"question_{MULTI_DOC_CATEGORIZATION}"
        if multi not in question:
            question.append(multi)
        return question + [c.column for c in self.user]

    def to_dict(self) -> dict[str, Any]:
        def one(cz: Categorization) -> dict[str, Any]:
            return {"name": cz.name, "categories": [{"name": c.name, "description": c.description,
                                                     "probability": c.probability, "is_multi_doc": c.is_multi_doc}
                                                    for c in cz.categories]}
        return {"name": self.name, "question_categorizations": [one(c) for c in self.question],
                "user_categorizations": [one(c) for c in self.user]}
