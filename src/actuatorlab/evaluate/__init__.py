"""Evaluation of replayed logs: metrics by operating regime and the operating envelope.

The simulator fills one :class:`LogResult` per log; :func:`summarize` pools metrics over logs
(weighting samples); :func:`actuatorlab.report.fit.write_report` writes the offline HTML report. The operating envelope
of a model's training data (one joint, or per joint of a whole robot) is recorded and checked by
:mod:`actuatorlab.evaluate.envelope` and summarized by :mod:`actuatorlab.evaluate.envelope_summary`;
a whole robot's logs are judged per joint by the same regimes (:func:`~actuatorlab.evaluate.replay.robot_regimes`).
"""

from actuatorlab.evaluate.envelope import check_trajectories as check_trajectories
from actuatorlab.evaluate.envelope import compute_envelope as compute_envelope
from actuatorlab.evaluate.metrics import REGIMES as REGIMES
from actuatorlab.evaluate.metrics import LogResult as LogResult
from actuatorlab.evaluate.metrics import format_table as format_table
from actuatorlab.evaluate.metrics import log_metrics as log_metrics
from actuatorlab.evaluate.metrics import regime_masks as regime_masks
from actuatorlab.evaluate.metrics import summarize as summarize

__all__ = [
    "REGIMES",
    "check_trajectories",
    "compute_envelope",
    "LogResult",
    "format_table",
    "log_metrics",
    "regime_masks",
    "summarize",
]
