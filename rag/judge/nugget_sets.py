"""Nugget sets: the one ruler every nugget-based score of a run is measured with, and where two cells compare.

A `NuggetSet` holds one nugget list per topic (`TopicNuggets`), made once per run by the nugget source that the
`judge.nuggetizer` config node builds (AutoNuggetizer, `eval.nuggets`: from gold documents, the run's top ranked
passages, a sweep's UMBRELA pool, or a nuggetizer create file). `rag.judge.run.evaluate_records` hands that one
set to every judge with `uses_nuggets` (nuggets, ARGUE, Crucible, and any judge added later), so no judge builds
its own. Its identity is the hash of its topics' nugget lists; each answer's result records its topic's identity
(`nugget_set`), and each cell's metrics.json records the set per judge (`<judge prefix>nugget_set`:
`{identity, source, topics: {qid: identity}}`).

Two cells compare on a nugget-based metric only over the topics where their sets are the same:
`same_nugget_set_topics` is that rule for a pair of cells (what a paired test over topics should use),
`compare_nugget_sets` for a whole sweep, and `NuggetSetGate` the one place every consumer of a sweep asks whether
a metric may be ranked across its cells (and else which one line to print instead).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag.core.hashing import stable_hash
from rag.records import VALUES_KEY

if TYPE_CHECKING:
    from rag.llm.base import LLMEngine
    from rag.records import AnswerRecord

#: where a topic's nuggets came from: the dataset's gold documents, the run's own top ranked passages, a sweep's
#: UMBRELA-graded pool (`python -m eval.pool`), or a nuggetizer create file made elsewhere
SOURCES = ("gold_docs", "passages", "pooled", "nugget_file")
#: the key of a judge result (per answer) and the suffix of a run metric (per judge) that name the set
NUGGET_SET = "nugget_set"


def nugget_set_hash(nuggets: Sequence[Mapping[str, Any]]) -> str:
    """The identity of one topic's nugget list (each nugget's text and importance, in order): answers whose
    results carry the same hash were scored against the same yardstick."""
    return stable_hash([[str(n.get("text", "")), str(n.get("importance", ""))] for n in nuggets], length=16)


@dataclass
class TopicNuggets:
    """One topic's nuggets (castorini/nuggetizer's create record), where they came from, and how making them went."""

    qid: str
    query: str
    nuggets: list[dict[str, str]] = field(default_factory=list)
    source: str = "gold_docs"
    #: None when usable; else why the topic cannot be scored ("create", "empty", "no_passages", "not_in_nugget_file")
    failure: str | None = None
    create_failures: int = 0
    importance_failures: int = 0
    cached: bool = False

    @property
    def identity(self) -> str:
        return nugget_set_hash(self.nuggets)

    def record(self) -> dict[str, Any]:
        """castorini/nuggetizer's create output record (plus where the nuggets came from)."""
        return {"qid": self.qid, "query": self.query, "nuggets": self.nuggets, "source": self.source}


@dataclass
class NuggetSet:
    """One nugget list per topic: the ruler of every nugget-based judge of one run."""

    topics: dict[str, TopicNuggets] = field(default_factory=dict)

    @classmethod
    def of(cls, topics: Iterable[TopicNuggets]) -> NuggetSet:
        return cls({t.qid: t for t in topics})

    def get(self, qid: str) -> TopicNuggets | None:
        return self.topics.get(qid)

    def usable(self) -> list[TopicNuggets]:
        return [t for t in self.topics.values() if t.failure is None]

    @property
    def identity(self) -> str:
        """The hash of every usable topic's identity: equal sets score every topic with the same nuggets."""
        return identity_of({t.qid: t.identity for t in self.usable()})

    @property
    def source(self) -> str:
        return source_of(t.source for t in self.usable())


def identity_of(topics: Mapping[str, str]) -> str:
    """A whole set's identity from its topics' identities."""
    return stable_hash(sorted(topics.items()), length=16)


def source_of(sources: Iterable[str]) -> str:
    """One source, or "mixed" (some topics from gold documents, others from passages)."""
    found = sorted(set(sources))
    return found[0] if len(found) == 1 else "mixed" if found else ""


class NuggetSource(ABC):
    """What makes a run's nugget set (the `judge.nuggetizer` node's `_target_`, AutoNuggetizer by default)."""

    #: the engine config that makes the nuggets (`judge.nuggetizer.llm`, the judges' own by default)
    llm: Mapping[str, Any] | None = None

    @abstractmethod
    def nugget_set(self, records: Sequence[AnswerRecord], engine: LLMEngine | None, cache_dir: Path) -> NuggetSet:
        """One topic per record (records of one topic share it), made or read once."""


# -- what a judge records -------------------------------------------------------------------------------------
def metric_key(prefix: str) -> str:
    """`nuggets/nugget_set`, `argue/nugget_set`, `judge/<name>/nugget_set`: the run metric naming a judge's set."""
    return f"{prefix}{NUGGET_SET}"


def judge_entry(records: Sequence[AnswerRecord], judge: str) -> dict[str, Any] | None:
    """A judge's set as metrics.json records it: `{identity, source, topics: {qid: identity}}` over the answers
    it scored (read from their results); None when no result names a set."""
    topics: dict[str, str] = {}
    sources = []
    for record in records:
        result = record.judges.get(judge)
        if isinstance(result, Mapping) and isinstance(result.get(NUGGET_SET), str):
            topics[record.id] = result[NUGGET_SET]
            sources.append(str(result.get("source", "")))
    if not topics:
        return None
    return {"identity": identity_of(topics), "source": source_of(sources), "topics": dict(sorted(topics.items()))}


# -- comparing cells ------------------------------------------------------------------------------------------
def cell_nugget_sets(metrics: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """A cell's sets from its metrics.json: judge metric prefix -> topic -> identity."""
    out = {}
    for key, value in metrics.items():
        if key.endswith(NUGGET_SET) and isinstance(value, Mapping) and isinstance(value.get("topics"), Mapping):
            out[key[:-len(NUGGET_SET)]] = {str(t): str(i) for t, i in value["topics"].items()}
    return out


def record_nugget_sets(records: Iterable[AnswerRecord]) -> dict[str, dict[str, str]]:
    """The same, read from a cell's answers (cells judged before metrics.json named the sets): judge metric
    prefix (its declared `_values.prefix`, else `judge/<name>/`) -> topic -> identity."""
    out: dict[str, dict[str, str]] = {}
    for record in records:
        for name, result in record.judges.items():
            if isinstance(result, Mapping) and isinstance(result.get(NUGGET_SET), str):
                declared = result.get(VALUES_KEY)
                prefix = str(declared.get("prefix")) if isinstance(declared, Mapping) and declared.get("prefix") \
                    else f"judge/{name}/"
                out.setdefault(prefix, {})[record.id] = result[NUGGET_SET]
    return out


def nugget_set_for(metric: str, sets: Mapping[str, Mapping[str, str]]) -> Mapping[str, str] | None:
    """The set a metric was scored with (the longest judge prefix it starts with), None for other metrics."""
    prefixes = [p for p in sets if metric.startswith(p)]
    return sets[max(prefixes, key=len)] if prefixes else None


def same_nugget_set_topics(a: Mapping[str, str], b: Mapping[str, str]) -> list[str]:
    """The topics two cells scored against the same nugget set (topic -> identity each): the only topics on which
    they may be compared on a nugget-based metric (means, ranks, paired tests). Sorted."""
    return sorted(t for t in a.keys() & b.keys() if a[t] == b[t])


@dataclass
class NuggetSetComparison:
    """Whether a sweep's cells used one ruler for a metric: the topics where their sets differ, and the cells."""

    metric: str
    #: topic -> the cells that scored it, where more than one identity was used
    differing: dict[str, list[str]] = field(default_factory=dict)
    #: topic -> how many distinct sets scored it (the differing topics)
    n_sets: dict[str, int] = field(default_factory=dict)
    #: topics some cell recorded a set for
    n_topics: int = 0

    @property
    def comparable(self) -> bool:
        return not self.differing

    @property
    def cells(self) -> list[str]:
        return sorted({c for cells in self.differing.values() for c in cells})

    def notice(self, label: Mapping[str, str] | None = None, limit: int = 5) -> str:
        """One line: which cells and topics were scored against different nugget sets (`label`: cell -> how to
        name it)."""
        name = (lambda c: label.get(c, c)) if label else (lambda c: c)
        topics = sorted(self.differing)
        shown = ", ".join(topics[:limit]) + (f" and {len(topics) - limit} more" if len(topics) > limit else "")
        return (f"{self.metric}: not ranked; cells {', '.join(name(c) for c in self.cells)} scored topic(s) "
                f"{shown} against different nugget sets")


def compare_nugget_sets(metric: str, cells: Mapping[str, Mapping[str, str] | None]) -> NuggetSetComparison:
    """For one metric, cell -> its topic -> identity (None: no set recorded, unknown and not checked): the topics
    scored against more than one set, with the cells that scored them."""
    seen: dict[str, dict[str, list[str]]] = {}
    for cell, topics in cells.items():
        for topic, identity in (topics or {}).items():
            seen.setdefault(topic, {}).setdefault(identity, []).append(cell)
    differing = {t: sorted(c for cells_ in by_id.values() for c in cells_) for t, by_id in sorted(seen.items())
                 if len(by_id) > 1}
    return NuggetSetComparison(metric, differing, {t: len(seen[t]) for t in differing}, len(seen))


#: what makes one nugget set per topic for a sweep and re-scores its nugget-based judges (the gate's hint)
POOL_HINT = "python -m eval.pool sweep_dir={sweep} scores every cell against one set"


def cell_sets(metrics: Mapping[str, Any] | None, records: Callable[[], Iterable[AnswerRecord]]
              ) -> dict[str, dict[str, str]]:
    """A cell's sets (judge metric prefix -> topic -> identity): metrics.json's, else (cells judged before
    metrics.json named them) its answers' (`records` is read only then)."""
    return cell_nugget_sets(metrics or {}) or record_nugget_sets(records())


@dataclass
class NuggetSetGate:
    """The comparability gate of a sweep: may its cells be ranked on a metric, and if not, the one line why.

    Every consumer that ranks or marks cells asks this gate, so that the rule (a nugget-based metric is compared
    only where every cell scored each topic against the same nugget set) is applied once and alike: the summary's
    cells table, best.csv, summary.json and W&B's `best/` / `not_ranked/` scalars (`eval.summary`), the paired
    tests' marks and their "which differences are real" table (`eval.significance`), the report's tables, strategy
    comparison and leaderboard (`rag.report.data.SweepData.mark`), the AutoJudge leaderboards (`eval.autojudge`)
    and the agreement (`eval.agreement.check_nugget_sets`). A metric is nugget-based when a judge prefix of some
    cell starts it (`nugget_set_for`); every other metric is always rankable.
    """

    #: cell -> judge metric prefix (or evaluation name) -> topic -> set identity; None: nothing recorded
    cells: Mapping[str, Mapping[str, Mapping[str, str]] | None]
    #: cell -> how a notice names it (`#0` in summary.md); its name otherwise
    labels: Mapping[str, str] = field(default_factory=dict)
    #: appended to every notice in parentheses: what to run to make the metric rankable (`POOL_HINT`)
    hint: str = ""
    _seen: dict[str, NuggetSetComparison] = field(default_factory=dict, init=False, repr=False, compare=False)

    def comparison(self, metric: str) -> NuggetSetComparison:
        """The cells' sets for `metric` compared (`compare_nugget_sets`), computed once per metric."""
        if metric not in self._seen:
            self._seen[metric] = compare_nugget_sets(metric, {cell: nugget_set_for(metric, sets or {})
                                                              for cell, sets in self.cells.items()})
        return self._seen[metric]

    def rankable(self, metric: str) -> bool:
        """True unless some topic of `metric` was scored against different nugget sets in different cells."""
        return self.comparison(metric).comparable

    def notice(self, metric: str, labels: Mapping[str, str] | None = None) -> str | None:
        """The one line a not-rankable metric shows instead of any best, tie or ranking; None when rankable."""
        comparison = self.comparison(metric)
        if comparison.comparable:
            return None
        line = comparison.notice(self.labels if labels is None else labels)
        return f"{line} ({self.hint})" if self.hint else line

    def not_rankable(self, metrics: Iterable[str]) -> dict[str, NuggetSetComparison]:
        """Of `metrics`, those not rankable, in order, with their comparisons."""
        return {m: self.comparison(m) for m in metrics if not self.rankable(m)}

    def judges(self) -> dict[str, NuggetSetComparison]:
        """Per judge prefix whose cells differ on some topic, its comparison (named `<prefix>*`): the word for
        every metric of that judge at once."""
        prefixes = sorted({p for sets in self.cells.values() for p in (sets or {})})
        out = {}
        for prefix in prefixes:
            comparison = compare_nugget_sets(f"{prefix}*", {c: (s or {}).get(prefix) for c, s in self.cells.items()})
            if not comparison.comparable:
                out[prefix] = comparison
        return out

