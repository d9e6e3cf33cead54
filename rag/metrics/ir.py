"""Retrieval measures through ir-measures (trec_eval's definitions, via pytrec_eval), per stage and per split.

`RetrievalMeasures` (`conf/metrics/retrieval_measures.yaml`) scores each answer's stored retrieved list (the
retriever's top k) and reranked list (after the reranker and the cut to rerank.k) against the question's judgments
(`AnswerRecord.relevance`: its qrels, else its gold documents at grade 1) with every measure of `measures`, named as
ir-measures names them (`nDCG@10`, `RR@10`, `R@100`, `AP`, `Judged@10`, `P(rel=2)@10`...). The run metrics are
the means over judged questions, `ir/<stage>/<measure>/<split>`: ir-measures' aggregate, i.e. what trec_eval
reports on the run files every run writes (`RunFolder.write_rankings`), which hold the same lists
(`rag.records.stage_ranking`: at the judgments' level, document ids at the rank of their best passage or passage
ids; scores strictly decreasing in the pipeline's order). A judged question whose list is empty scores 0
(trec_eval's `-c`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rag.core.errors import ConfigError
from rag.metrics.base import RecordMetric, RunShape
from rag.metrics.registry import BUILTIN, MetricSpec
from rag.records import AnswerRecord, stage_ranking

STAGES = ("retrieval", "rerank")
#: the default list (conf/metrics/retrieval_measures.yaml says the same)
DEFAULT_MEASURES = ("nDCG@10", "RR@10", "R@20", "R@100", "AP", "Judged@10")
#: the registry's entries for these run metrics (rag/metrics/registry.py)
SPEC_PATTERNS = ("ir/{stage}/{measure}/{split}", "ir/{stage}/{count}/{split}", "ir/{stage}/{other}/{split}")


def parse_measures(names: Sequence[str], setting: str = "metrics.retrieval_measures.measures") -> list[Any]:
    """ir-measures' measure objects; a name it cannot read is one ConfigError naming the setting."""
    import ir_measures

    parsed = []
    for name in names:
        try:
            parsed.append(ir_measures.parse_measure(str(name)))
        except (ValueError, NameError, TypeError, SyntaxError) as err:
            raise ConfigError(f"{setting}: {name!r} is not an ir-measures measure ({err})") from None
    return parsed


def measure_values(measures: Sequence[Any], judged: Mapping[str, int], ranking: Sequence[tuple[str, float]]
                   ) -> dict[str, float]:
    """Each measure's value for one question (ir-measures, pytrec_eval underneath); 0 for an empty list."""
    import ir_measures

    if not ranking:
        return {str(m): 0.0 for m in measures}
    values = {str(m): 0.0 for m in measures}
    for metric in ir_measures.iter_calc(list(measures), {"q": dict(judged)}, {"q": dict(ranking)}):
        values[str(metric.measure)] = float(metric.value)
    return values


class RetrievalMeasures(RecordMetric):
    """trec_eval measures of the retrieved and reranked lists: per answer `ir/<stage>/<measure>`, run means
    `ir/<stage>/<measure>/<split>` over the questions that have judgments. Read from the stored record (its lists
    and judgments), so every run scores all its answers again, resumed ones too."""

    key_prefix = "ir/"

    def __init__(self, name: str = "retrieval_measures", measures: Sequence[str] = DEFAULT_MEASURES,
                 stages: Sequence[str] = STAGES):
        super().__init__(name)
        unknown = [s for s in stages if s not in STAGES]
        if unknown:
            raise ConfigError(f"metrics.{name}.stages: {unknown} (known: {', '.join(STAGES)})")
        self.measures = parse_measures(measures, f"metrics.{name}.measures")
        self.names = list(dict.fromkeys(str(m) for m in self.measures))
        self.stages = list(stages)

    def score_record(self, record: AnswerRecord, qrels_level: str) -> dict[str, float]:
        judged = record.relevance()
        if not judged:
            return {}
        lists = {"retrieval": record.retrieved, "rerank": record.reranked}
        out: dict[str, float] = {}
        for stage in self.stages:
            ranking = stage_ranking(lists[stage], qrels_level)
            out.update({f"ir/{stage}/{m}": v for m, v in measure_values(self.measures, judged, ranking).items()})
        return out

    def run_metrics(self, shape: RunShape) -> dict[str, str]:
        return {f"ir/{stage}/{m}": f"ir/{stage}/{m}" for stage in self.stages for m in self.names}

    def metric_specs(self) -> list[MetricSpec]:
        """The registry's own entries (a sweep summary in a fresh process ranks them without this class)."""
        return [s for s in BUILTIN if s.pattern in SPEC_PATTERNS]
