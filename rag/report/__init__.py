"""From a sweep folder to the papers' tables and figures: `python -m rag.report SWEEP_DIR`.

The notebooks under notebooks/ call these same functions (compute, then `plot`), so every figure is drawn
by one piece of code. Figures are `matplotlib.figure.Figure` objects made without pyplot, so they need no
display and no global backend.
"""

from rag.report.agreement import agreement_matrices
from rag.report.build import Report, build_report, ensure_report, load_report, report_after_sweep
from rag.report.cost import strategy_costs
from rag.report.data import SweepData, load
from rag.report.latency import latency_curves
from rag.report.recall import recall_curves
from rag.report.table1 import table1_rows

__all__ = ["Report", "SweepData", "agreement_matrices", "build_report", "ensure_report", "latency_curves",
           "load", "load_report", "recall_curves", "report_after_sweep", "strategy_costs", "table1_rows"]
