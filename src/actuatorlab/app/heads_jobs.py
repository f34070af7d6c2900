"""Typed jobs of the commands on a learned model's heads: estimate-force, condition, report-heads
(see :mod:`.identify_jobs`). The work is :mod:`actuatorlab.app.estimate_jobs`; these jobs only carry
its options (:class:`~actuatorlab.app.estimate_jobs.ConditionOptions` as it is)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from . import estimate_jobs
from .estimate_jobs import ConditionOptions
from .identify_jobs import Result, check_range


@dataclasses.dataclass(frozen=True)
class EstimateForceJob:
    """Fields: model (RUN/arm_model.json of a learned model, or "-" for none), data (labelled
    multi-joint logs or folders), robot, calibrate (training logs or folder: the classical baselines
    are fitted on their free-motion logs), methods (null: all), ee_body (end-effector body; null:
    the robot's), report (self-contained HTML report), out (CSV of the per-frame estimates)."""

    model: str
    data: tuple[Path, ...]
    robot: str
    calibrate: tuple[Path, ...] = ()
    methods: tuple[str, ...] | None = None
    ee_body: str | None = None
    report: Path | None = None
    out: Path | None = None


def run_estimate_force_job(job: EstimateForceJob) -> Result:
    """Sensorless end-effector force (:func:`~actuatorlab.app.estimate_jobs.run_estimate_force`)."""
    return Result(estimate_jobs.run_estimate_force(job.model, list(job.data), robot=job.robot,
                                                   calibrate=list(job.calibrate),
                                                   methods=list(job.methods) if job.methods else None,
                                                   ee_body=job.ee_body, report=job.report, out=job.out))


@dataclasses.dataclass(frozen=True)
class ConditionJob:
    """Fields: model (RUN/arm_model.json of a learned or residual whole-robot model), data (logs to
    evaluate), robot, options (ConditionOptions: train = training logs for the baselines, verdict_s
    [s] (5), seed, report (HTML), frames_csv (per-frame scores), fit_head (first train the condition
    head on train and write the model to this folder), head_steps, calibrate (validation logs: choose
    the score smoothing and thresholds on them), use_calibration (false: ignore the model file's
    calibration), min_recall (with calibrate), alarm_hold_s [s] (the per-frame alarm's on-delay))."""

    model: Path
    data: tuple[Path, ...]
    robot: str
    options: ConditionOptions = ConditionOptions()


def run_condition_job(job: ConditionJob) -> Result:
    """Motor-condition detection (:func:`~actuatorlab.app.estimate_jobs.run_condition_files`)."""
    check_range("--verdict-s", job.options.verdict_s)
    check_range("--min-recall", job.options.min_recall, low_ok=True, high=1.0)
    opts = dataclasses.replace(job.options, train=tuple(job.options.train or ()),
                               calibrate=tuple(job.options.calibrate or ()))
    return Result(estimate_jobs.run_condition_files(job.model, list(job.data), job.robot, opts))


@dataclasses.dataclass(frozen=True)
class HeadsReportJob:
    """Fields: model (RUN/arm_model.json of a learned whole-robot model), data (labelled logs to
    evaluate), robot, train (training logs: calibrate / fit the baselines), out (the HTML report,
    "heads_report.html"), verdict_s [s] (condition verdict from the last N seconds, 5), seed."""

    model: Path
    data: tuple[Path, ...]
    robot: str
    train: tuple[Path, ...]
    out: Path = Path("heads_report.html")
    verdict_s: float = 5.0
    seed: int = 0


def run_heads_report_job(job: HeadsReportJob) -> Result:
    """Force and condition on one page (:func:`~actuatorlab.app.estimate_jobs.run_heads_report`)."""
    check_range("--verdict-s", job.verdict_s)
    return Result(estimate_jobs.run_heads_report(job.model, list(job.data), robot=job.robot, train=list(job.train),
                                                 out=job.out, verdict_s=job.verdict_s, seed=job.seed))
