"""Typed jobs of the evaluation commands: evaluate, replay, infer (see :mod:`.identify_jobs`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from . import jobs
from ..errors import ActuatorlabError
from ..evaluate import suite
from .identify_jobs import Result, check_range, robot_of_model


@dataclasses.dataclass(frozen=True)
class EvaluateJob:
    """Fields: model (RUN/model.json; RUN/arm_model.json or "nominal" with robot), data (logs to
    replay), dt [s] (replay period; null: the fitted one), report (HTML report file: overlays,
    errors, regimes, envelope coverage), standalone (with report: inline plotly.js, one
    self-contained file), robot (multi-joint logs of this robot; default: the model file's)."""

    model: str
    data: tuple[Path, ...]
    dt: float | None = None
    report: Path | None = None
    standalone: bool = False
    robot: str | None = None


@dataclasses.dataclass(frozen=True)
class EvaluateResult(Result):
    """``record``: the metrics summary; ``robot``: the robot of a whole-robot model (None: one joint)."""

    robot: str | None = None


def run_evaluate_job(job: EvaluateJob) -> EvaluateResult:
    """Replay the logs with the model, never refitting (:func:`~actuatorlab.app.jobs.run_evaluate`,
    or ``run_evaluate_arm`` for a whole-robot model)."""
    check_range("--dt", job.dt)
    robot = robot_of_model(job.model, job.robot)
    if robot is not None:
        if job.report is not None:
            raise ActuatorlabError("--report is not available with --robot (whole-robot models)")
        return EvaluateResult(jobs.run_evaluate_arm(robot, job.model, list(job.data)), robot)
    if job.report is None and job.standalone:
        raise ActuatorlabError("--standalone needs --report")
    return EvaluateResult(jobs.run_evaluate(job.model, list(job.data), dt=job.dt, report=job.report,
                                            standalone=job.standalone), None)


@dataclasses.dataclass(frozen=True)
class ReplayJob:
    """Fields: suite (the suite folder), model (null: the suite's own), create (create the suite from
    model's errors on logs), logs (with create), margin (with create: tolerance = margin x measured
    error, 1.2), dt [s] (replay period; null: the suite's; whole robot: the MuJoCo timestep), gains
    ({name: value}: simulate with this controller gain instead of the logged one), robot (with
    create: a whole-robot arm_model.json), horizon (with robot: window in control steps, 300),
    overwrite (with create: replace an existing suite)."""

    suite: Path
    model: str | None = None
    create: bool = False
    logs: tuple[Path, ...] = ()
    margin: float = 1.2
    dt: float | None = None
    gains: dict = dataclasses.field(default_factory=dict)
    robot: str | None = None
    horizon: int | None = None
    overwrite: bool = False


def run_replay_job(job: ReplayJob) -> Result:
    """Create the suite (``create``: ``record`` is its manifest) or replay it (``record``: the checks)."""
    check_range("--margin", job.margin)
    check_range("--dt", job.dt)
    check_range("--horizon", job.horizon)
    if job.create:
        if job.model is None or not job.logs:
            raise ActuatorlabError("replay --create needs SUITE MODEL LOGS...")
        return Result(suite.create_suite(job.suite, job.model, list(job.logs), margin=job.margin, dt=job.dt,
                                         robot=job.robot, horizon=job.horizon, overwrite=job.overwrite))
    if job.logs:
        raise ActuatorlabError("replay takes SUITE [MODEL] (to create a suite: replay --create SUITE MODEL LOGS...)")
    gains = {}
    for k, v in job.gains.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise ActuatorlabError(f"gains: {k!r} must be a number, e.g. {{\"kp\": 800}}, got {v!r}")
        gains[str(k)] = float(v)
    return Result(suite.run_suite(job.suite, job.model, dt=job.dt, gains=gains or None))


@dataclasses.dataclass(frozen=True)
class InferJob:
    """Fields: model (RUN/arm_model.json of a learned or residual whole-robot model), data
    (multi-joint logs), out (CSV file to write), robot (check the model was trained for it)."""

    model: Path
    data: tuple[Path, ...]
    out: Path
    robot: str | None = None


def run_infer_job(job: InferJob) -> Result:
    """Causal online inference (:func:`~actuatorlab.app.jobs.run_infer`); ``record``: frames, logs, out."""
    return Result(jobs.run_infer(job.model, list(job.data), job.out, robot=job.robot))
