"""Typed jobs of the training commands: train, train-heads, adapt (see :mod:`.identify_jobs`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from . import jobs
from ..errors import ActuatorlabError, UnknownNameError
from ..learned import heads
from ..learned.adapt import AdaptConfig, adapt, check_adapt_out
from ..learned.arm import load_arm_model
from ..learned.arm_train import DEFAULT_BUDGET, FULL_BUDGET, ArmTrainConfig
from ..learned.heads import HeadsConfig
from ..logs import load_logs
from .identify_jobs import Result, check_range, robot_of_model
from .train_work import compilation_cache


def check_resume(out: Path, resume: bool) -> None:
    """``--resume`` continues a run: a folder without one (no config.json) is an error, not a fresh run."""
    if resume and not ((Path(out) / "config.json").is_file() or (Path(out) / "gate").is_dir()):
        raise ActuatorlabError(f"{out}: nothing to resume (--resume needs a run folder with a config.json; "
                               "leave out --resume to start a new run)")


@dataclasses.dataclass(frozen=True)
class TrainJob:
    """Fields: data (logs to train on), out (run folder, "run"), robot (multi-joint logs of this
    robot: whole-robot training through MJX, RUN/arm_model.json), resume (continue
    RUN/checkpoint.ckpt exactly), arch (transformer | mlp | gru | lstm | actuator_net |
    actuator_lstm; ``residual:ARCH``: learn a correction of ``init``), init (a fitted analytic
    RUN/model.json or RUN/arm_model.json: the teacher of the warm start, one joint or a robot,
    and the base of a residual), steps (optimizer steps; null: the default budget), seed, validation (one
    joint: time = last 25 % of every log | logs = whole logs held back), masks (with robot: a folder of
    camera masks, docs/format.md section 6, whose silhouettes join the loss through MJX; a joint
    logged without position/<joint> is then learned from the cameras only, docs/visual.md), camera (with
    masks: the camera_calibration.json of calibrate-camera), image_weight (lambda [rad^2] of the image
    term, 1e-2), gate (one-joint residual: groups = the correction scaled by the gate that earns its
    place on leave-one-group-out refits | none = kept whole; :mod:`actuatorlab.learned.gate`), budget
    (with robot: default | full, :data:`~actuatorlab.learned.arm_train.DEFAULT_BUDGET` /
    ``FULL_BUDGET``), time_limit (with robot: [s] of training through the simulator, compilation
    included, after which the run stops, validates and saves its best checkpoint; null: none)."""

    data: tuple[Path, ...]
    out: Path = Path("run")
    robot: str | None = None
    resume: bool = False
    arch: str = "transformer"
    init: Path | None = None
    steps: int | None = None
    seed: int = 0
    validation: str = "time"
    masks: Path | None = None
    camera: Path | None = None
    image_weight: float = 1e-2
    gate: str = "groups"
    budget: str = "default"
    time_limit: float | None = None


@dataclasses.dataclass(frozen=True)
class TrainResult(Result):
    """``record``: the model file's dict; ``robot``: the robot of a whole-robot model (None: one joint)."""

    robot: str | None = None


def split_arch(arch: str) -> tuple[str, bool]:
    """(network, residual) of an ``--arch`` value: ``residual:ARCH`` or ``ARCH``."""
    kind, sep, name = arch.partition(":")
    if not sep:
        return arch, False
    if kind != "residual" or not name:
        raise ActuatorlabError(f"--arch {arch!r}: give ARCH or residual:ARCH (e.g. residual:transformer)")
    return name, True


def check_train(job: TrainJob) -> None:
    """Refuse bad numbers, a residual without its base and a run that is not there to resume,
    before any work."""
    check_range("--steps", job.steps)
    check_range("--image-weight", job.image_weight)
    check_range("--time-limit", job.time_limit)
    if job.budget not in ("default", "full"):
        raise UnknownNameError("training budget", job.budget, ("default", "full"))
    if (job.masks is None) != (job.camera is None):
        raise ActuatorlabError("--masks and --camera go together: the masks folder and the camera_calibration.json "
                               "of its cameras (actuatorlab calibrate-camera)")
    if job.masks is not None and job.robot is None and job.init is None:
        raise ActuatorlabError(f"--masks {job.masks}: camera masks supervise a whole-robot model; give --robot")
    if job.gate not in jobs.GATE_MODES:
        raise UnknownNameError("correction gate", job.gate, jobs.GATE_MODES)
    _, residual = split_arch(job.arch)
    if residual and job.init is None:
        raise ActuatorlabError(f"--arch {job.arch}: a residual corrects a fitted analytic model; give it with --init")
    check_resume(job.out, job.resume)


def run_train_job(job: TrainJob) -> TrainResult:
    """Train a learned actuator or a residual, warm-started from ``init`` (else a default fit)
    (:func:`~actuatorlab.app.jobs.run_train`, or ``run_train_arm`` for a robot)."""
    check_train(job)
    arch, residual = split_arch(job.arch)
    robot = robot_of_model(job.init, job.robot) if job.init is not None else job.robot
    if robot is None and (job.budget != "default" or job.time_limit is not None):
        raise ActuatorlabError("--budget and --time-limit set whole-robot training: give --robot"
                               + (f" ({job.init} is a one-joint model)" if job.init is not None else "")
                               + " (one joint: --steps)")
    if robot is None and job.masks is not None:
        raise ActuatorlabError(f"--masks {job.masks}: camera masks supervise a whole-robot model, and {job.init} "
                               "is a one-joint model; give a RUN/arm_model.json of `fit --robot`")
    if robot is not None:
        images = None if job.masks is None else jobs.TrainImages(job.masks, job.camera, job.image_weight)
        budget = dict(FULL_BUDGET if job.budget == "full" else DEFAULT_BUDGET, time_limit_s=job.time_limit)
        return TrainResult(jobs.run_train_arm(robot, list(job.data), job.out,
                                              ArmTrainConfig(arch=arch, residual=job.init if residual else None,
                                                             teacher=job.init, steps=job.steps, seed=job.seed),
                                              budget=budget, resume=job.resume, images=images), robot)
    return TrainResult(jobs.run_train(list(job.data), job.out,
                                      jobs.JointTrainOptions(arch=arch, residual=job.init if residual else None,
                                                             teacher=job.init, steps=job.steps, seed=job.seed,
                                                             validation=job.validation, gate=job.gate),
                                      resume=job.resume), None)


@dataclasses.dataclass(frozen=True)
class TrainHeadsJob:
    """Fields: data (labelled multi-joint logs or a synth folder with train/ val/), robot, out (run
    folder, "run_heads"), init (RUN/arm_model.json to start from: only its heads are trained),
    resume, heads (HeadsConfig: arch, sizes, trunk, steps, batch, lr, eval_every, noise,
    weight_decay, seed, augment_yaw, augment_mirror, residual_input; docs/force.md)."""

    data: tuple[Path, ...]
    robot: str
    out: Path = Path("run_heads")
    init: Path | None = None
    resume: bool = False
    heads: HeadsConfig = HeadsConfig()


def check_train_heads(job: TrainHeadsJob) -> None:
    """Refuse bad numbers and a run that is not there to resume, before any work."""
    check_range("--steps", job.heads.steps)
    check_range("--eval-every", job.heads.eval_every)
    check_resume(job.out, job.resume)


def run_train_heads_job(job: TrainHeadsJob) -> Result:
    """Train the force, contact-gate and condition heads (:func:`actuatorlab.learned.heads.train_heads`)."""
    check_train_heads(job)
    tr, va = jobs.split_arm_data(list(job.data))
    m = load_arm_model(job.init, job.robot)[1] if job.init is not None else None
    return Result(heads.train_heads(job.robot, tr, va, job.heads, out=job.out, init=m, resume=job.resume))


@dataclasses.dataclass(frozen=True)
class AdaptJob:
    """Fields: run (a run folder of ``train`` or ``train --robot``, or its model.json / arm_model.json:
    the learned or residual model to adapt; only read), data (logs of the new unit, or of the same
    servo at another gain or load: files or folders; a dataset folder written by ``synth`` gives its
    train/ logs), out (new run folder, must not exist), adapt (AdaptConfig: steps, lr, seed,
    max_trajectories, n_val, refit_evals, refit_windows; docs/learned_arm.md, "Adaptation to another
    unit")."""

    run: Path
    data: tuple[Path, ...]
    out: Path
    adapt: AdaptConfig = AdaptConfig()


def run_adapt_job(job: AdaptJob) -> Result:
    """Adapt a trained whole-robot or one-joint model to another unit or condition
    (:func:`actuatorlab.learned.adapt.adapt`); OUT equal to RUN or existing is refused before any
    logs are read."""
    check_adapt_out(Path(job.run), Path(job.out))
    check_range("adapt.steps", job.adapt.steps, low_ok=True)
    paths = [p / "train" if (p / "train").is_dir() and (p / "dataset.json").is_file() else p for p in map(Path, job.data)]
    trajs = load_logs(paths)
    with compilation_cache():
        return Result(adapt(job.run, trajs, job.adapt, out=job.out))
