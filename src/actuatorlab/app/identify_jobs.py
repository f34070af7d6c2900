"""Typed jobs of the identification commands: fit, compare, fit-fleet, excite.

Each command builds one frozen job (from its flags and ``--config FILE``, :mod:`actuatorlab.app.config`)
and calls one ``run_*_job`` that returns a frozen result with ``to_json()``. The work itself is
:mod:`actuatorlab.app.jobs` (reached through the module, so that a test can stand in for it).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

from . import fleet, jobs
from .train_work import compilation_cache
from ..errors import ActuatorlabError, UnknownNameError
from ..excite.design import ExciteConfig, excite
from ..identify.select import CALIBRATION, FamilyOptions
from ..models.actuator_model import check_robot, load


def robot_of_model(model_json: str | Path, robot: str | None) -> str | None:
    """The robot of a command's model file: a whole-robot model's (the file's when --robot is
    absent; an explicit --robot must agree with it), None for a one-joint model (after the same
    check: its robot is its bench, e.g. bench:revolute). The word "nominal" needs --robot."""
    if str(model_json) == "nominal":
        if robot is None:
            raise ActuatorlabError("nominal: the nominal parameters of a robot: give --robot ROBOT")
        return robot
    m = load(model_json)
    name = check_robot(m, robot)
    return None if m.one_joint else name


def check_range(option: str, value, *, low=0.0, low_ok: bool = False, high=None) -> None:
    """Refuse a numeric option outside its range before any work: one line naming the option.
    Default: ``value > 0`` (``low_ok``: ``>= low``; ``high``: ``<= high``); None passes."""
    if value is None:
        return
    bad = value < low if low_ok else value <= low
    if bad or (high is not None and value > high) or value != value:
        lo = f">= {low:g}" if low_ok else f"> {low:g}"
        raise ActuatorlabError(f"{option} must be {lo}" + ("" if high is None else f" and <= {high:g}")
                               + f", got {value:g}")


@dataclasses.dataclass(frozen=True)
class Result:
    """A job's result: ``record``, the JSON document of the run (what ``--json`` prints)."""

    record: Any

    def to_json(self) -> Any:
        return self.record


@dataclasses.dataclass(frozen=True)
class FitJob:
    """Fields: data (log files or folders; [] = the bundled XL330 example), out (run folder, "run"),
    model (one model, e.g. "m4+delay"; null = the nested family selected by leave-one-group-out),
    options (seed, budget quick|default|thorough, dt [s] control period, workers, extensions,
    group_by condition tags ["log"]: leave-one-log-out, calibration judged|free_swing|none), mapping (CSV
    column mapping), jackknife (null|log|group: refits after writing, parameter spread; with robot: refits without each
    group of group_by[0] or each log, a third of max_evals each, arm_model.json "uncertainty"),
    timestep_sensitivity (replay and refit at dt/2 and 2 dt), robot (multi-joint logs of this robot;
    null: the robot the logs name, none for one-joint logs), max_evals (with robot: CMA-ES evaluations per model, 300), per_joint (with robot: one parameter
    set per joint), method (with robot: cma | grad), init (with robot and model: an arm_model.json whose
    parameters start the fit, e.g. the fit by joint type before a fit per joint), masks (with robot, model and
    method grad: a folder of camera masks, docs/format.md section 6, whose silhouettes join the loss; a joint
    logged without position/<joint> is then seen by the cameras only), camera (the camera_calibration.json of
    calibrate-camera; null: the camera file's camera_from_base), image_weight (lambda [rad^2] of the image term,
    1e-2), refine_camera (with masks: fit each camera's pose with the actuator under the calibration's prior,
    identify.images; the refined poses in arm_model.json "fit" "camera_refinement"), image_loss (soft_iou, or
    edge: the pixel residual against the masks' edge profiles, the loss to refine cameras with), state_std (with
    masks: [rad] prior std of per-frame state corrections, each frame's drawn joint positions moved under a
    Gaussian prior, identify.images; 0: none; their summary in arm_model.json "fit" "state_corrections"),
    selection (with robot and no model: auto, the member the drive-rate logs measure in full where they do
    (g2+backlash+delay per joint, nothing searched), else the nested ladder judged on the validation logs'
    replay; replay: the ladder always)."""

    data: tuple[Path, ...] = ()
    out: Path = Path("run")
    model: str | None = None
    options: FamilyOptions = FamilyOptions()
    mapping: Path | None = None
    jackknife: str | None = None
    timestep_sensitivity: bool = False
    robot: str | None = None
    max_evals: int = 300
    per_joint: bool = False
    method: str = "cma"
    init: Path | None = None
    masks: Path | None = None
    camera: Path | None = None
    image_weight: float = 1e-2
    refine_camera: bool = False
    image_loss: str = "soft_iou"
    state_std: float = 0.0
    selection: str = "auto"


@dataclasses.dataclass(frozen=True)
class FitResult(Result):
    """``record``: the model file's dict (plus ``_summary``, the replay metrics); ``out``: run folder;
    ``robot``: the robot of a whole-robot fit (None: one joint, RUN/model.json)."""

    out: Path = Path("run")
    robot: str | None = None

    def to_json(self) -> Any:
        return {k: v for k, v in self.record.items() if not k.startswith("_")}


#: the whole-robot fit's selection rules (FitJob.selection)
SELECTIONS = ("auto", "replay")
#: [s] a fit writes the programs that took this long to compile into the persistent compilation
#: cache (:func:`~actuatorlab.app.train_work.compilation_cache`): the scorers, the polish's Jacobians
FIT_CACHE_MIN_COMPILE_S = 0.2


def run_fit_job(job: FitJob, progress: Callable | None = None) -> FitResult:
    """Fit (:func:`actuatorlab.app.jobs.run_fit`: one joint, or a robot named by ``robot`` or by
    the logs) and write RUN/; compiled programs go through the persistent compilation cache."""
    check_range("options.dt", job.options.dt)
    check_range("max_evals", job.max_evals)
    check_range("image_weight", job.image_weight)
    check_range("state_std", job.state_std, low_ok=True)
    if job.selection not in SELECTIONS:
        raise UnknownNameError("selection", job.selection, SELECTIONS)
    if job.robot is not None and not job.data:
        raise ActuatorlabError("--robot needs DATA (multi-joint logs, e.g. from `actuatorlab synth`)")
    if job.robot is None and job.model is not None and job.options.calibration not in (CALIBRATION, "none"):
        raise ActuatorlabError("--calibration applies to the family fit (without --model)")
    with compilation_cache(FIT_CACHE_MIN_COMPILE_S):
        d = jobs.run_fit(list(job.data) or None, job.out, model=job.model, options=job.options, mapping=job.mapping,
                         progress=progress, jackknife=job.jackknife, timestep_sensitivity=job.timestep_sensitivity,
                         robot=jobs.RobotFitOptions(job.robot, job.max_evals, job.per_joint, method=job.method,
                                                    init=job.init, masks=job.masks, camera=job.camera,
                                                    image_weight=job.image_weight, refine_camera=job.refine_camera,
                                                    image_loss=job.image_loss, state_std=job.state_std,
                                                    selection=job.selection))
    robot = str(d.get("robot") or "")
    return FitResult(d, job.out, None if not robot or robot.startswith("bench:") else robot)


@dataclasses.dataclass(frozen=True)
class CompareJob:
    """Fields: data (training logs), holdout (held-out logs), models (null: the nested ladder),
    seed, budget (quick | default | thorough), dt [s] (null: the logs')."""

    data: tuple[Path, ...]
    holdout: tuple[Path, ...]
    models: tuple[str, ...] | None = None
    seed: int = 0
    budget: str = "default"
    dt: float | None = None


def run_compare_job(job: CompareJob, progress: Callable | None = None) -> Result:
    """Fit nested models on ``data`` and score them on ``holdout`` (:func:`~actuatorlab.app.jobs.run_compare`)."""
    check_range("--dt", job.dt)
    return Result(jobs.run_compare(list(job.data), list(job.holdout), models=list(job.models) if job.models else None,
                                   seed=job.seed, budget=job.budget, dt=job.dt, progress=progress))


@dataclasses.dataclass(frozen=True)
class FleetJob:
    """Fields: units (one folder or log file per unit), out (OUT/UNIT[/MODEL]/model.json), models
    ([] : nested selection; several: a sweep), backend (local | ray), budget, seed, dt [s],
    mapping, ray_address (a running Ray cluster), num_cpus."""

    units: tuple[Path, ...]
    out: Path
    models: tuple[str, ...] = ()
    backend: str = "local"
    budget: str = "default"
    seed: int = 0
    dt: float | None = None
    mapping: Path | None = None
    ray_address: str | None = None
    num_cpus: int | None = None


def run_fleet_job(job: FleetJob, progress: Callable | None = None) -> Result:
    """One fit per unit (:func:`actuatorlab.app.fleet.fit_fleet`); ``record``: one row per task."""
    check_range("--dt", job.dt)
    return Result(fleet.fit_fleet(fleet.units_from_folders(job.units), job.out, models=list(job.models or [None]),
                                  backend=job.backend, budget=job.budget, seed=job.seed, dt=job.dt,
                                  mapping=job.mapping, ray_address=job.ray_address, num_cpus=job.num_cpus,
                                  progress=progress))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExciteJob(ExciteConfig):
    """Fields: out (folder for the command files and excitation.json), model_file (fitted
    RUN/model.json; RUN/arm_model.json with robot), model (when no model_file: default m1; with
    robot the config's), params ({name: value} overriding), joint (actuator name when no
    model_file, "xl330"), kp (firmware gains to design over, e.g. [400, 800]), mass (bench loads
    [kg]), q_range ([min, max] [rad], default [-1.5, 1.5]), margin [rad] (0.1), v_max [rad/s] (3),
    duty (0.8), effort_max [N.m], budget_s [s] (10), segment_s [s] (2; 3 with robot), dt [s] command
    period (0.01, one joint), write_all (every candidate), robot (a whole robot), joints (to excite,
    default all), joint_ranges ({joint: [min, max]} [rad | m]), effort_share (0.8), lerobot (also
    NAME.lerobot.csv)."""

    out: Path


@dataclasses.dataclass(frozen=True)
class ExciteResult(Result):
    """``record``: the design report; ``robot``: the robot of a whole-robot design (None: one joint)."""

    robot: str | None = None


def run_excite_job(job: ExciteJob) -> ExciteResult:
    """Design an excitation for one joint or a robot (:func:`~actuatorlab.excite.design.excite`)
    and write it to ``out``."""
    for option, value, kw in (("--budget", job.budget_s, {}), ("segment_s", job.segment_s, {}), ("--dt", job.dt, {}),
                              ("--v-max", job.v_max, {}), ("--margin", job.margin, {"low_ok": True}),
                              ("--duty", job.duty, {"high": 1.0}), ("--effort-max", job.effort_max, {}),
                              ("--effort-share", job.effort_share, {})):
        check_range(option, value, **kw)
    robot = robot_of_model(job.model_file, job.robot) if job.model_file is not None else job.robot
    cfg = dataclasses.replace(job, params={str(k): float(v) for k, v in job.params.items()}, robot=robot)
    return ExciteResult(excite(job.out, cfg), robot)
