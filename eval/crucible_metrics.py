"""Crucible's five answer metrics for every strategy (Dietz, Li et al., 2026), on ARGUE's sentence flow.

Crucible's paper scored its runs with Auto-ARGUE (Walden et al., 2025, implementing ARGUE, Mayfield et al.
SIGIR 2024), so the five columns are defined on ARGUE's judgments (`eval.argue`): a sentence earns nugget credit
only when every passage it cites supports it (or, uncited, when it is a negative assertion a nugget confirms),
and any unsupported citation penalises it. With s_1..s_m the answer's sentences, N the question's nuggets and
C(s_i) the nuggets sentence s_i is credited with by that flow:

- Nugget Recall       = |U_i C(s_i)| / |N|                          (ARGUE nugget recall)
- Nugget Density      = |U_i C(s_i)| / m                            (credited nuggets per sentence)
- Sentence Novelty    = |{i : C(s_i) \\ U_{j<i} C(s_j) != {}}| / m   (sentences adding a nugget no earlier one did)
- Relevant Sentences  = |{i : C(s_i) != {}}| / m                    (sentences ARGUE rewards)
- Citation Support    = supporting citations / citations            (Auto-ARGUE's citation support)

Nugget Recall and Citation Support are Auto-ARGUE's own measures; Density, Novelty and Relevant Sentences are
the paper's names, written here over ARGUE's credited nuggets (the paper gives no formula). All five are 0 for an
empty answer (m = 0) and Citation Support is 0 for an answer that cites nothing (counted in
`crucible/uncited_answers`); a question without nuggets is skipped. An unreadable judgment penalises its sentence
(counted in `crucible/parse_failures`), so it can only lower a score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eval.argue import FlowJudge, JudgedAnswer, JudgedSentence, argue_scores, sentence_outcome

METRICS = ("nugget_recall", "nugget_density", "sentence_novelty", "relevant_sentences", "citation_support")


def crucible_scores(sentences: Sequence[JudgedSentence], n_nuggets: int) -> dict[str, float]:
    """The five metrics of one answer (module docstring); `n_nuggets` = |N| > 0."""
    argue = argue_scores(sentences, n_nuggets)  # checks n_nuggets
    m = len(sentences)
    if m == 0:
        return dict.fromkeys(METRICS, 0.0)
    covered: set[int] = set()
    novel = relevant = 0
    for s in sentences:
        credited = sentence_outcome(s).credited
        novel += bool(credited - covered)
        relevant += bool(credited)
        covered |= credited
    return {"nugget_recall": argue["nugget_recall"], "nugget_density": len(covered) / m,
            "sentence_novelty": novel / m, "relevant_sentences": relevant / m,
            "citation_support": argue["citation_support"]}


class CrucibleJudge(FlowJudge):
    """Crucible's five metrics as a judge (`judge=crucible`), for any strategy: per answer in
    `record.judges[<name>]` (declared as `crucible/<metric>` values, with every sentence's ARGUE path), run means
    `crucible/<metric>/<split>`; files `crucible/scores.jsonl` and `crucible/nuggets.jsonl` (castorini/nuggetizer's
    create shape, also the ranking trainer's weak labels)."""

    fields = METRICS

    def __init__(self, name: str = "crucible", llm: Mapping[str, Any] | None = None, **options: Any):
        super().__init__(name, llm, **options)

    def score(self, answer: JudgedAnswer) -> dict[str, float]:
        return crucible_scores(answer.sentences, len(answer.nuggets.nuggets))
