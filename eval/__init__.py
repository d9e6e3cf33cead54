"""Evaluation of RAG answers: LLM judges (LiveRAG, CRAG-style, pairwise), AutoNuggetizer and agreement.

Entry points: `eval.hook.evaluate_records` (called by the pipeline through the `judge` config group),
`python -m eval.judge` (re-judge finished runs) and `python -m eval.agreement` (Kendall tau-b / tau_ap_a / tau_ap_b tables).
"""
