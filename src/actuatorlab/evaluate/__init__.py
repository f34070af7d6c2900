"""Evaluation of replayed logs: metrics by operating regime and the offline HTML report.

The simulator fills one :class:`LogResult` per log; :func:`summarize` pools metrics over logs
(weighting samples) and :func:`write_report` writes a self-contained HTML report.
"""

from actuatorlab.evaluate.metrics import REGIMES as REGIMES
from actuatorlab.evaluate.metrics import LogResult as LogResult
from actuatorlab.evaluate.metrics import format_table as format_table
from actuatorlab.evaluate.metrics import log_metrics as log_metrics
from actuatorlab.evaluate.metrics import regime_masks as regime_masks
from actuatorlab.evaluate.metrics import summarize as summarize
from actuatorlab.evaluate.report import write_report as write_report

__all__ = [
    "REGIMES",
    "LogResult",
    "format_table",
    "log_metrics",
    "regime_masks",
    "summarize",
    "write_report",
]
