"""Training a whole-robot learned actuator: warm start from an analytic teacher, then BPTT through MJX.

:func:`train_arm` is the MJX instance of the one training algorithm
(:func:`actuatorlab.learned.learn.learn`; the one-joint scan is the other,
:func:`actuatorlab.learned.joint_train.train_joint`). Its two phases (docs/learned_arm.md):

1. **Warm start** (:mod:`actuatorlab.learned.distill`): the network learns, teacher-forced on the
   training logs' measured frames and without the simulator, the effort of a fitted analytic model
   (the teacher: ``ArmTrainConfig.teacher``, else the residual's base, else the default analytic
   model fitted on the training logs first, :data:`TEACHER_FIT`). A replacing network learns the
   teacher's whole effort on its channels; a residual one the teacher's effort minus its base's
   (zero when the teacher is the base: the zeroed torque head already is the base model).
2. **Through the simulator**: the loss of :func:`~actuatorlab.learned.arm.arm_loss` on windows
   restarted from measured states, curriculum of window lengths, the gradient through the MJX
   rollout (:func:`actuatorlab.learned.trainer.train`: optimiser, EMA, checkpoints, exact resume).
   The warm-started model is validated at step 0 too, so the kept checkpoint is never worse on
   validation than the warm start.

With ``images`` (masks of calibrated cameras), the loss through the simulator gains the image
term at each window's mask frames, every commanded joint is a channel (one without an encoder is
learned from the cameras alone), and a joint without an encoder restarts its windows from the
teacher's continuous rollout (:mod:`actuatorlab.learned.arm_images`).

A failed run leaves RUN as it was: every input (teacher file, logs, resume) is checked and the
teacher fitted and distilled before the trainer writes anything.
"""

from __future__ import annotations

import dataclasses
import time as _time
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..errors import DataError, ModelError
from ..identify.arm_fit import fit_arm
from ..identify.images import ImageSupervision, image_term
from ..logs.format import Trajectory
from ..models.features import Normalizer, fit_normalizer, sliding_windows
from ..precision import physics
from ..robots.loader import Robot
from ..sim.arm import ArmConfig, make_mjx_rollout
from ..sim.arm_learned import TELEMETRY, LearnedArm, frames_of_log, trainable
from ..sim.arm_native import native_model
from .arm import (DEFAULT_FEATURES, ArmLog, LearnedWindows, _base_of, _effort_scale, _units, arm_log, arm_loss,
                  learned_windows, make_learned_arm, native_mae, save_arm_model)
from .arm_images import channel_mask, unmeasured_joints, validator, with_standins
from .distill import DistillConfig, teacher_effort
from .learn import Curriculum, Problem, check_resume_teacher, learn, stored_teacher
from .trainer import TrainConfig

__all__ = ["ArmTrainConfig", "DEFAULT_BUDGET", "FULL_BUDGET", "TEACHER_FIT", "train_arm", "resolve_teacher",
           "distill_targets"]

#: default budget (2 CPU cores, neural_actuator suite at --scale 0.1): 300 steps of 4 windows of 64 / 96 /
#: 128 control steps restarted from measured states (multiple shooting), padded to one compiled shape of
#: 128, validated every 25 steps; 1.3-2.1 s per step, about 10-13 min for the whole `train --robot` on 2
#: idle cores (extrapolated from loaded runs); replacing Transformer 0.50x / 0.65x and residual 0.57x /
#: 0.59x the analytic fit at 600 steps on synth seed 0 (bench/journal/learned_speed.md)
DEFAULT_BUDGET: dict[str, Any] = dict(steps=300, batch=4, curriculum=(64, 96, 128), stage_fraction=(0.5, 0.3, 0.2),
                                      lr=3e-4, eval_every=25, max_val_windows=8, one_shape=True, time_limit_s=None)
#: documented full budget (GPU or a long CPU run)
FULL_BUDGET: dict[str, Any] = dict(steps=6000, batch=32, curriculum=(128, 256, 320), stage_fraction=(0.5, 0.3, 0.2),
                                   lr=3e-4, eval_every=250, max_val_windows=64, one_shape=False, time_limit_s=None)
#: the fit of the default analytic teacher when none is given (:func:`~actuatorlab.identify.arm_fit.fit_arm`)
TEACHER_FIT: dict[str, Any] = dict(max_evals=40, max_windows=16, seed=0)
#: at most this many (window, target) pairs are distilled, evenly spread over the training frames
MAX_DISTILL_FRAMES = 20000


@physics
@dataclasses.dataclass(frozen=True)
class ArmTrainConfig:
    """Settings of :func:`train_arm`.

    Fields:
        arch: network, transformer | mlp | gru | lstm (default transformer; ignored with ``init``).
        residual: an analytic RUN/arm_model.json the network corrects (default None: replacing).
        steps: optimizer steps [-] (default None: the budget's).
        seed: seed of the network and of the batches [-] (default 0).
        budget: :data:`DEFAULT_BUDGET` keys overriding the defaults.
        sizes: network sizes (default: the arch's).
        per_channel: per-channel features (default: ``train --robot``'s that the logs carry).
        history: frames of history [-] (default 8).
        teacher: the analytic model of the warm start, an arm_model.json / model.json path or a
            {"model", "params"} dict (default None: the residual's base, else the default analytic
            model fitted on the training logs, :data:`TEACHER_FIT`). A replacing network also keeps
            it for the joints that are not channels; when fine-tuning (``train_arm``'s ``init``) it
            is only that base (no fit, no warm start).
        distill: :class:`~actuatorlab.learned.distill.DistillConfig` of the warm start (default
            300 steps); None: a cold start from random weights (no teacher).
    """

    arch: str = "transformer"
    residual: Any = None
    steps: int | None = None
    seed: int = 0
    budget: dict | None = None
    sizes: dict | None = None
    per_channel: tuple[str, ...] | None = None
    history: int = 8
    teacher: Any = None
    distill: DistillConfig | None = DistillConfig()


def resolve_teacher(robot_name: str, teacher, residual, train_trajs: list[Trajectory]) -> tuple[Robot, dict, dict, str]:
    """(robot with the teacher's model, its parameter sets, its {"model", "params"} description, a
    one-line account of where it came from). ``teacher`` None: the residual's base when given,
    else the default analytic model fitted on ``train_trajs`` (:data:`TEACHER_FIT`). A file of
    another robot, another joint set or not an analytic arm model is a one-line ModelError naming it."""
    src = teacher if teacher is not None else residual
    if src is not None:
        robot, params, desc = _base_of(robot_name, src)
        what = f"teacher {src}" if isinstance(src, (str, Path)) else "teacher: the given analytic parameters"
        return robot, params, desc or {}, what
    t0 = _time.perf_counter()
    f = fit_arm(robot_name, train_trajs, **TEACHER_FIT)
    desc = {"model": f["model"], "params": f["params"]}
    robot, params, _ = _base_of(robot_name, desc)
    name = f["model"] or "of the robot's config"
    return robot, params, desc, (f"no teacher given: fitted the default analytic model ({name}) on the training "
                                 f"logs first ({f['evaluations']} CMA-ES evaluations, {_time.perf_counter() - t0:.0f} s, "
                                 f"train MAE {1e3 * f['train_mae']:.1f} mrad)")


def _fine_tuning_base(robot_name: str, init: LearnedArm, teacher) -> tuple[Robot, dict, dict | None]:
    """(robot with the base model, base parameter sets, description) that a replacing model
    fine-tuned from ``init`` keeps for the joints that are not channels: ``teacher`` (its analytic
    model, as :func:`resolve_teacher` reads it, without any fit) when given, else the robot's nominal
    model, which ``init``'s base must then be (a one-line ModelError otherwise: the description of
    another base is not in the network, and saving the nominal one would lose it)."""
    robot, base, desc = _base_of(robot_name, teacher)
    own = {k: np.asarray(v) for k, v in init.base.items()}
    if teacher is None and (own.keys() != base.keys() or any(
            own[k].shape != np.shape(v) or not np.allclose(own[k], v) for k, v in base.items())):
        raise ModelError("fine-tuning a replacing model whose base (the model of the joints that are not channels) "
                         "is not the robot's nominal one: give that base as ArmTrainConfig.teacher")
    return robot, base, desc


def _torque(m: LearnedArm, win):
    """The network's normalized effort (C,) on one raw window of frames (H+1, F)."""
    return m.heads(win).torque


def distill_targets(model: LearnedArm, robot: Robot, logs: list[ArmLog], teacher: tuple[Robot, dict],
                    base: tuple[Robot, dict] | None, cfg: DistillConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The warm start's data (module docstring): (windows (N, H+1, F), targets (N, C), weights
    (N, C)): the effort of ``teacher`` (robot, parameter sets) minus, for a residual, the effort of
    ``base`` at the measured frames of ``logs`` (and ``cfg.copies`` noisy copies), in the network's
    units, for :func:`~actuatorlab.learned.distill.distill` with :func:`_torque`. Every commanded
    channel is a target; a joint without an encoder is teacher-forced at its stand-in states
    (:func:`~actuatorlab.learned.arm_images.with_standins`: its log's q_meas / dq_meas)."""
    idx = [robot.index(j) for j in model.layout.channels]
    s = np.asarray(model.effort_scale)
    E = np.asarray(model.effort_limit)
    xs, ys, ws = [], [], []
    rng = np.random.default_rng(cfg.seed)
    mt = native_model(teacher[0], teacher[1])
    mb = native_model(base[0], base[1]) if model.residual and base is not None else None
    for lg, c in ((lg, c) for lg in logs for c in range(1 + max(int(cfg.copies), 0))):
        b = lg.base
        q, dq = b.q_meas, b.dq_meas
        if c:  # a noisy copy: the teacher's effort at states near the measured ones
            q = q + cfg.noise * np.nanstd(q, axis=0) * rng.standard_normal(q.shape)
            dq = dq + cfg.noise * np.nanstd(dq, axis=0) * rng.standard_normal(dq.shape)
        tau = teacher_effort(teacher[0], teacher[1], q, dq, b.inputs, temperature=b.temperature, model=mt)
        if mb is not None and base is not None:
            tau = tau - teacher_effort(base[0], base[1], q, dq, b.inputs, temperature=b.temperature, model=mb)
        fr = frames_of_log(model, b.inputs.q_target, q, dq, b.inputs.v_supply, b.inputs.enable, lg.telemetry)
        xs.append(np.asarray(sliding_windows(fr, model.layout.history)))
        ys.append(np.clip(tau[:, idx] / s, -E / s, E / s))
        on = b.scored if b.commanded is None else b.commanded
        ws.append(np.broadcast_to(on[idx].astype(float), (fr.shape[0], len(idx))))
    x, y, w = np.concatenate(xs), np.concatenate(ys), np.concatenate(ws)
    sel = np.unique(np.linspace(0, len(x) - 1, min(len(x), MAX_DISTILL_FRAMES)).astype(int))
    return x[sel], y[sel], w[sel]


def _new_model(robot: Robot, base: dict, tr: list[ArmLog], channels, feats, options: ArmTrainConfig) -> LearnedArm:
    """A fresh network with the normalizer of the training logs' measured frames and the effort scales."""
    F = len(channels) * len(feats)
    tmp = make_learned_arm(robot, "mlp", channels=channels, per_channel=feats, normalizer=Normalizer(
        np.zeros(F), np.ones(F)), effort_scale=1.0, base=base, history=options.history, width=4, depth=1, d=4,
        head_width=4)
    frames = np.concatenate([frames_of_log(tmp, lg.base.inputs.q_target, lg.base.q_meas, lg.base.dq_meas,
                                           lg.base.inputs.v_supply, lg.base.inputs.enable, lg.telemetry)
                             for lg in tr])
    residual = options.residual is not None
    scale = _effort_scale(robot, base, tr, channels, residual)
    return make_learned_arm(robot, options.arch, channels=channels, per_channel=feats,
                            normalizer=fit_normalizer(frames), effort_scale=scale, base=base, residual=residual,
                            history=options.history, key=jax.random.PRNGKey(options.seed), **(options.sizes or {}))


def _schedule(bud: dict, robot, tr, va, model, cfg, images: ImageSupervision | None = None
              ) -> tuple[Curriculum, list[LearnedWindows], LearnedWindows]:
    """(curriculum, training windows of each stage, validation windows), with their mask frames
    when ``images`` is given."""
    cur = Curriculum(tuple(int(L) for L in bud["curriculum"]), tuple(float(f) for f in bud["stage_fraction"]))
    pad = max(cur.lengths) if bud.get("one_shape") else None
    stages = [learned_windows(robot, tr, L, model, cfg, pad_to=pad, images=images) for L in cur.lengths]
    vw = learned_windows(robot, va, cur.lengths[-1], model, cfg, images=images)
    vw = vw.take(np.unique(np.linspace(0, vw.n - 1, min(vw.n, int(bud["max_val_windows"]))).astype(int)))
    return cur, stages, vw


def train_arm(robot_name: str, train_trajs: list[Trajectory], val_trajs: list[Trajectory],
              options: ArmTrainConfig = ArmTrainConfig(), *, out: str | Path, init: LearnedArm | None = None,
              resume: bool = False, progress: bool = True, images: ImageSupervision | None = None,
              on_validate=None) -> dict[str, Any]:
    """Train a learned (``residual`` None) or residual whole-robot model: warm start from the
    teacher, then through MJX (module docstring); write RUN/arm_model.json + RUN/arm_model.eqx (the
    best checkpoint by validation MAE).

    ``options``: :class:`ArmTrainConfig` (its ``steps`` overrides the budget's). ``init``: start
    from this model's network (fine-tuning / online adaptation; its layout and normalizer are
    kept, no warm start); its analytic base becomes ``options.residual`` for a residual model and
    ``options.teacher`` for a replacing one (:func:`_fine_tuning_base`), the base that is saved.
    ``images``: masks of calibrated cameras of the training (and validation) logs
    (:func:`~actuatorlab.identify.images.load_image_supervision`): the image term joins the loss,
    every commanded joint is a channel, joints without an encoder restart from the teacher's
    continuous rollout (else the base's), and the checkpoint is chosen by position MSE + image term
    on the validation logs (:mod:`actuatorlab.learned.arm_images`). The budget's ``time_limit_s``
    (None: none) stops the BPTT phase after the step during which it ran out (the schedule stays
    the one of its steps; ``training.stopped`` says so); ``on_validate``: called after each
    validation (:func:`~actuatorlab.learned.trainer.train`).
    Returns the arm_model.json dict."""

    t_all = _time.perf_counter()
    bud = {**DEFAULT_BUDGET, **(options.budget or {})}
    if options.steps is not None:
        bud["steps"] = int(options.steps)
    if not train_trajs or not val_trajs:
        raise DataError(None, f"train --robot needs training and validation logs (got {len(train_trajs)} and "
                              f"{len(val_trajs)})")
    out = Path(out)
    residual = options.residual
    if init is not None and init.residual != (residual is not None):
        raise ModelError("fine-tuning keeps the model kind: give --residual exactly when the model is residual")
    robot, base, base_desc = _base_of(robot_name, residual)
    warm = init is None and options.distill is not None
    given = options.teacher
    if given is None and residual is None:  # a resumed run keeps its own teacher (no second fit)
        given = stored_teacher(out, resume)
    teacher = resolve_teacher(robot_name, given, residual, train_trajs) if warm else None
    check_resume_teacher(out, resume, None if teacher is None else teacher[2])
    if teacher is not None and residual is None:  # a replacing model keeps the teacher off its channels
        robot, base, base_desc = teacher[0], teacher[1], teacher[2]
    if init is not None and residual is None:
        robot, base, base_desc = _fine_tuning_base(robot_name, init, options.teacher)
    cfg = ArmConfig.from_robot(robot)
    if init is not None and init.force_prior is not None:
        raise ModelError(f"train --robot: the initial model's force head corrects a {init.force_prior.method!r} "
                         "force prior, which the rollout loss does not compute; fine-tune its heads with train-heads")
    channels, feats = _layout(robot, train_trajs[0], init, options, images)
    tr, va, standin = _logs(robot, base, teacher, train_trajs, val_trajs, channels, feats)
    if init is not None:
        model = eqx.tree_at(lambda m: m.base, init, {k: jnp.asarray(v, jnp.float64) for k, v in base.items()})
    else:
        model = _new_model(robot, base, tr, channels, feats, options)
    warm_info: dict[str, Any] = {"teacher": None if teacher is None else teacher[3]}
    distill_data = None
    if teacher is not None and options.distill is not None:
        if model.residual and teacher[2] == (base_desc or {}):
            warm_info.update(steps=0, note="the teacher is the residual's base: the zeroed torque head reproduces it")
        else:
            def distill_data(m):
                return distill_targets(m, robot, tr, (teacher[0], teacher[1]), (robot, base) if m.residual else None,
                                       options.distill)
    cur, stages, vw = _schedule(bud, robot, tr, va, model, cfg, images)
    B, seed = int(bud["batch"]), int(options.seed)
    units = _units(robot)
    roll = jax.vmap(make_mjx_rollout(robot, cfg).with_heads, in_axes=(None, 0, 0, None))

    def batch(stage: int, step: int) -> LearnedWindows:
        w = stages[stage]
        rng = np.random.default_rng([seed, int(step)])
        return w.take(rng.choice(w.n, size=B, replace=w.n < B))

    img_term = None if images is None else image_term(images)

    def loss_fn(m, w):
        return arm_loss(m, w, roll, units, img_term=img_term)

    val_fn = validator(robot, vw, cfg, images)

    tcfg = _train_config(bud, seed, validate_start=teacher is not None)
    meta = {"robot": robot_name, "arch": model.arch, "residual": base_desc, "curriculum": list(cur.lengths),
            "batch": B, "train": [t.name for t in train_trajs], "val": [t.name for t in val_trajs],
            "teacher": None if teacher is None else teacher[2], **_image_meta(images, standin)}
    val0 = native_mae(robot, model, vw, cfg) if init is not None else None
    problem = Problem(loss=loss_fn, batch=batch, validate=val_fn, trainable=trainable(model),
                      distill_data=distill_data, torque=_torque, distill=options.distill, warm=warm_info)
    res = learn(out, model, problem, tcfg, cur, resume=resume, progress=progress, meta=meta, on_validate=on_validate)
    lengths, ends = cur.lengths, cur.ends(tcfg.steps)
    return save_arm_model(out, robot_name, res.best, base_desc, extra={
        "training": {"steps": res.steps, "best_step": res.best_step, "best_val_mae": res.best_val,
                     "s_per_1k_steps": res.s_per_1k_steps, "compile_s": res.compile_s,
                     "wall_s": _time.perf_counter() - t_all, "curriculum": list(lengths), "batch": B,
                     "stage_ends": ends.tolist(), "lr": bud["lr"], "stopped": res.stopped,
                     "init_val_mae": None if val0 is None else val0["position_mae"], "warm_start": res.warm_start,
                     "val_criterion": "position_mae" if images is None else "position_mse+image_term",
                     **_image_meta(images, standin)},
        "data": {"train": [t.source_file or t.name for t in train_trajs],
                 "val": [t.source_file or t.name for t in val_trajs]}})


def _train_config(bud: dict, seed: int, validate_start: bool) -> TrainConfig:
    """The trainer's settings of a budget: warm-up over its first 10 %, a checkpoint at every
    validation, EMA decay 0.99; ``validate_start``: the warm-started network is validated at step 0."""
    steps = int(bud["steps"])
    return TrainConfig(steps=steps, lr=float(bud["lr"]), warmup=max(1, steps // 10), eval_every=int(bud["eval_every"]),
                       checkpoint_every=int(bud["eval_every"]), seed=seed, ema_decay=0.99, eval_at_start=validate_start,
                       time_limit_s=None if bud.get("time_limit_s") is None else float(bud["time_limit_s"]))


def _layout(robot: Robot, first: Trajectory, init: LearnedArm | None, options: ArmTrainConfig,
            images: ImageSupervision | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(channels, per-channel features): ``init``'s, else the joints the first training log scores
    (every commanded one with ``images``, :func:`~actuatorlab.learned.arm_images.channel_mask`) and
    ``options.per_channel`` or the default features that log carries for every channel."""
    if init is not None:
        return init.layout.channels, init.layout.per_channel
    channels = tuple(j for j, s in zip(robot.joint_names, channel_mask(robot, first, images)) if s)
    return channels, tuple(options.per_channel or [f for f in DEFAULT_FEATURES if f not in TELEMETRY or all(
        first.has(f"{TELEMETRY[f]}/{j}") for j in channels)])


def _logs(robot: Robot, base: dict, teacher, train_trajs, val_trajs, channels, feats
          ) -> tuple[list[ArmLog], list[ArmLog], list[str]]:
    """(training logs, validation logs, the joints some log does not measure): a joint without an
    encoder has the stand-in states of the teacher's continuous rollout (else of the base model's),
    :func:`~actuatorlab.learned.arm_images.with_standins`."""
    tr = [arm_log(robot, t, channels, feats) for t in train_trajs]
    va = [arm_log(robot, t, channels, feats) for t in val_trajs]
    un = unmeasured_joints(robot, tr + va)
    if un:
        src = (teacher[0], teacher[1]) if teacher is not None else (robot, base)
        tr, va = with_standins(tr, src), with_standins(va, src)
    return tr, va, un


def _image_meta(images: ImageSupervision | None, unmeasured: list[str]) -> dict[str, Any]:
    """What the run records of its image supervision (nothing without it and without unmeasured joints)."""
    d: dict[str, Any] = {"unmeasured": unmeasured} if unmeasured else {}
    if images is not None:
        d["images"] = {"cameras": [c.name for c in images.cameras], "weight": images.options.weight,
                       "logs": sorted(images.frames)}
    return d
