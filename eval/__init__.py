"""Evaluation of RAG answers: LLM judges (LiveRAG, CRAG-style, pairwise), AutoNuggetizer and agreement.

The judges here implement `rag.judge.base.Judge` and are reached by the pipeline through their YAML's `_target_`
(`rag.judge.run.evaluate_records` builds whatever the `judge` config group composed). Entry points:
`python -m eval.judge` (re-judge finished runs), `python -m eval.agreement` (Kendall tau-b / tau_ap_a / tau_ap_b tables)
and `python -m eval.pool` (one nugget set per topic for a finished sweep, every cell re-scored against it).
"""
