"""Whole-robot actuator fit by gradient descent through the MJX rollout, with a window curriculum.

The gradient alternative to :func:`actuatorlab.identify.arm_fit.fit_arm` (CMA-ES, native path):
same logs (multi-joint convention, control grid), same parameter box (:class:`~actuatorlab.
identify.arm_space.ArmSpace`: z in [0, 1]^(P G), log scale in [0.2 p0, 5 p0] for a positive nominal
p0, the "servo" bounds otherwise), same window objective and the same result layout.

Windows. Each log is cut into non-overlapping windows of L control steps that restart from the
*measured* state (:func:`actuatorlab.sim.arm_windows.make_windows`); a log shorter than L gives
one padded window. The curriculum (:data:`~actuatorlab.sim.arm_windows.CURRICULUM`, 128 -> 256
-> 320 steps) fits short windows first, whose gradients are well conditioned, and lengthens them
as the parameters converge.

Objective of one minibatch b of B windows (the mean squared position error of ``fit_arm``)::

    J_b(z) = sum_{w in b} c_w sum_k sum_j wgt[w, k, j] (q_sim[w, k, j](theta(z)) - q_meas[w, k, j])^2
             / max(sum_{w in b} c_w sum_k sum_j wgt[w, k, j], 1)                    [rad^2 | m^2]

wgt[w, k, j] = mask[w, k] scored[w, j] is ``fit_arm``'s weight (0 on padding past the end of a log
and on joints the log does not record); c_w = 0 on the copies that pad a minibatch to its fixed
size B (each stage compiles once, for shape (B, L)). q_sim is the batched MJX rollout
(:func:`actuatorlab.sim.arm.make_mjx_rollout`), which also writes the armature parameter into
MJX's ``dof_armature``, so its gradient flows through the mass matrix.

Optimiser. Adam (Kingma and Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015,
arXiv:1412.6980; optax) on z, projected back into the box after every step (z <- clip(z, 0, 1),
projected gradient descent), with one cosine learning-rate decay from ``lr`` to ``lr / 10`` over
all the steps of all stages (Loshchilov and Hutter, "SGDR", ICLR 2017, arXiv:1608.03983). The Adam
moments carry over from stage to stage: resetting them makes the first step of a stage move every
coordinate by about the learning rate, which on the test data undid a stage's progress (the MAE
ratio to nominal fell from 36 to 17 for 70 + 30 steps). Minibatches: per stage, a seeded
permutation of the windows is cut into batches of B (the last one padded with zero-weight
copies); when there are no more windows than B every step is a full-batch step. A step whose
loss or gradient is not finite is skipped and counted.

Result. The parameters at the start and at the end of each stage are scored with the native path
(:func:`actuatorlab.sim.arm_native.rollout_native`) on the last stage's windows with the same
objective; the best is returned, with its native position MAE (the ``train_mae`` of ``fit_arm``
with ``horizon`` = the last curriculum length, so the two numbers compare directly).

Gradient. Forward mode (one ``jax.jvp`` tangent per fitted value, batched by ``jax.vmap``) for
up to :data:`FORWARD_MAX` fitted values, reverse mode (``jax.value_and_grad``) above; see
:func:`window_objective`.

Compilation. One jitted value-and-gradient function per (robot, parameter names, timing, mode);
it is compiled once per (B, L) and kept for the process. Compile time is reported separately
(``compile_s``). JAX's persistent compilation cache is used when the environment sets
``JAX_COMPILATION_CACHE_DIR`` (JAX reads it itself; this module never sets it).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time as _time
from typing import Any, Callable, Iterable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..precision import on_fixed_blas_threads, physics, physics_fn
from ..errors import DataError, ModelError
from ..logs.format import Trajectory
from ..robots.bounds import set_bounds
from ..robots.loader import Robot
from ..sim.arm import ArmConfig, ArmInputs, initial_state, make_mjx_rollout
from ..sim.arm_native import native_model, rollout_native
from ..sim.arm_windows import CURRICULUM, Windows
from .arm_space import ArmSpace, fit_result, fit_setup
from .images import CameraTwists, FrameCorrections, ImageSupervision, image_term, refined_cameras, window_targets
from .search import BestSoFar
from .space import box_adam_step
from ..sim.arm_data import LogArrays, _check_name, log_arrays, per_joint_robot
from ..sim.arm_data import fit_windows

__all__ = ["DEFAULT_ITERS", "fit_arm_grad", "stage_windows", "window_objective", "minibatches"]

#: Adam steps per curriculum stage (one per minibatch) for the default :data:`CURRICULUM`
DEFAULT_ITERS: tuple[int, ...] = (60, 30, 20)
#: final learning rate, as a fraction of ``lr`` (cosine decay over all stages)
LR_FLOOR = 0.1


def stage_windows(robot: Robot, logs: list[LogArrays], length: int,
                  cfg: ArmConfig | None = None) -> tuple[Windows, np.ndarray]:
    """Windows of ``length`` control steps of every log (a shorter log gives one padded window),
    stacked, and ``fit_arm``'s weight wgt (W, L, n) = mask (W, L) x scored joints (W, n)."""

    w, sc = fit_windows(robot, logs, int(length), cfg or ArmConfig.from_robot(robot))
    return w, w.mask[..., None] * sc[:, None, :].astype(float)


#: forward mode (one tangent per fitted value) up to this many fitted values, reverse mode above
#: (measured on the OpenManipulator-X, B = 8, L = 16, 2 shared CPU cores: forward 0.105 s per
#: step for 3 values, 0.61 s for 16; reverse 0.14 .. 0.24 s whatever the count)
FORWARD_MAX = 6


@physics_fn
def window_objective(robot: Robot, names: tuple[str, ...], cfg: ArmConfig | None = None,
                     mode: str = "auto", sets: tuple[int, ...] | None = None,
                     images: ImageSupervision | None = None) -> tuple[ArmSpace, Callable]:
    """(space, value_and_grad) of the minibatch objective J (module docstring).

    ``value_and_grad(z, base, inputs, state0, q_meas, wgt, img=()) -> (J [rad^2 | m^2], dJ/dz (P G,))``
    is one ``jax.jit`` function: z (P G,) in [0, 1]; base: parameter sets name -> (n_sets,) (every
    parameter of ``robot.nominal_params()``) that give the values not fitted (traced, so another
    base does not recompile); inputs :class:`ArmInputs` and state0
    :class:`~actuatorlab.sim.arm.ArmState` with a leading window axis B; q_meas, wgt (B, L, n)
    (wgt already multiplied by the padding weight c_w); with ``images``, J gains the image term of
    :mod:`actuatorlab.identify.images` and ``img`` is the minibatch's
    :func:`~actuatorlab.identify.images.window_targets` (not cached: one compilation per fit). ``robot`` is the robot whose parameter
    sets are fitted (:func:`per_joint_robot` for one set per joint); ``space`` is
    ``ArmSpace.build(names, robot.nominal_params(), sets, bounds)`` (config bounds; ``sets``: indices of the fitted
    parameter sets, default all; the others stay nominal). Cached per arguments, so the jit cache
    (one executable per (B, L)) lives as long as the process.

    mode: "forward" — ``jax.jvp`` along each of the P G unit vectors of z, batched with
    ``jax.vmap`` (the rollout itself runs once, its tangents P G times; no intermediate states are
    stored); "reverse" — ``jax.value_and_grad`` (cost independent of P G, but the backward pass
    keeps every physics step's MJX state: memory ~ B L substeps); "auto" — forward up to
    :data:`FORWARD_MAX` fitted values. Both give the same numbers to round-off; on the 2-core CPU
    where this was written (OpenManipulator-X, B = 8, L = 16), forward mode traced and compiled
    in 105 s against 197 s and ran 2.3x faster for P G = 3, and 4.5x slower for P G = 16.
    """
    cfg = cfg or ArmConfig.from_robot(robot)
    names = tuple(names)
    sets = tuple(range(len(robot.groups))) if sets is None else tuple(int(g) for g in sets)
    cam = None if images is None else images.twists
    fc = None if images is None else images.corrections
    if mode == "auto":
        mode = _auto_mode(len(names) * len(sets), cam, fc)
    if mode not in ("forward", "reverse"):
        raise ModelError(f"window_objective: mode must be auto, forward or reverse, got {mode!r}")
    if images is not None:
        return _objective.__wrapped__(robot, names, cfg, mode, sets, image_term(images), cam, fc)
    return _objective(robot, names, cfg, mode, sets)


def _auto_mode(n_params: int, cam: CameraTwists | None, fc: FrameCorrections | None = None) -> str:
    """Forward-mode derivatives up to FORWARD_MAX fitted coordinates (the cameras' and the frames' corrections
    included), else reverse."""
    return "forward" if n_params + _nuisance_size(cam, fc) <= FORWARD_MAX else "reverse"


def _nuisance_size(cam: CameraTwists | None, fc: FrameCorrections | None) -> int:
    """Fitted coordinates after the parameters': the cameras' twists, then the frames' corrections."""
    return (cam.size if cam else 0) + (fc.size if fc else 0)


def _nuisance(z, n: int, cam: CameraTwists | None, fc: FrameCorrections | None, xp: Any = jnp):
    """(the cameras' twists or None, the frames' corrections or None) of coordinates z: after the n
    parameters' come the cameras' (joint camera refinement), then the frames' (state corrections)."""
    xi = None if cam is None else cam.twists(z[n:n + cam.size], xp=xp)
    o = n + (cam.size if cam else 0)
    return xi, None if fc is None else fc.corrections(z[o:o + fc.size])


@functools.lru_cache(maxsize=8)
def _objective(robot: Robot, names: tuple[str, ...], cfg: ArmConfig, mode: str, sets: tuple[int, ...],
               img_term: Callable | None = None, cam: CameraTwists | None = None,
               fc: FrameCorrections | None = None) -> tuple[ArmSpace, Callable]:
    space = ArmSpace.build(names, robot.nominal_params(), sets, set_bounds(robot.groups))
    roll = jax.vmap(make_mjx_rollout(robot, cfg), in_axes=(None, 0, 0, None))

    def objective(z, base, inputs, state0, q_meas, wgt, img=()):
        # z: the parameters' coordinates, then the cameras' (CameraTwists), then the frames' (FrameCorrections)
        p = dataclasses.replace(space, nominal=base).unpack(space.to_theta(z[:space.n], xp=jnp), xp=jnp)
        _, out = roll(p, inputs, state0, None)
        e = out.q - q_meas
        J = jnp.sum(e * e * wgt) / jnp.maximum(jnp.sum(wgt), 1.0)
        if img_term is None:
            return J
        xi, dq = _nuisance(z, space.n, cam, fc)  # (None, None) without refinement or corrections
        return J + img_term(out.q, img, xi, dq) + (0.0 if cam is None else cam.prior(xi))

    if mode == "reverse":
        return space, jax.jit(jax.value_and_grad(objective))

    def forward(z, base, inputs, state0, q_meas, wgt, img=()):
        def along(t):
            return jax.jvp(lambda zz: objective(zz, base, inputs, state0, q_meas, wgt, img), (z,), (t,))

        # the primal does not depend on the tangent, so vmap runs it once
        val, grad = jax.vmap(along)(jnp.eye(z.shape[0], dtype=z.dtype))
        return val[0], grad

    return space, jax.jit(forward)


def minibatches(n_windows: int, batch: int, steps: int, rng: np.random.Generator
                ) -> list[tuple[np.ndarray, np.ndarray]]:
    """``steps`` minibatches of exactly ``batch`` window indices with weights c (1 real, 0 pad).

    Epochs of a permutation drawn from ``rng``, cut into chunks of ``batch``; a short chunk is
    filled with copies of its first windows at weight 0. Every window is used once per epoch.
    """
    out: list = []
    while len(out) < steps:
        perm = rng.permutation(n_windows) if n_windows > batch else np.arange(n_windows)
        for i in range(0, n_windows, batch):
            idx = perm[i:i + batch]
            c = np.ones(batch)
            if len(idx) < batch:
                c[len(idx):] = 0.0
                idx = np.resize(idx, batch)
            out.append((idx, c))
            if len(out) == steps:
                break
    return out


def _take(w: Windows, wgt: np.ndarray, idx: np.ndarray, c: np.ndarray, img=None):
    x = ArmInputs(*[jnp.asarray(v[idx]) for v in w.inputs])
    s0 = type(w.state0)(*[jnp.asarray(v[idx]) for v in w.state0])
    out = (x, s0, jnp.asarray(w.q_meas[idx]), jnp.asarray(wgt[idx] * c[:, None, None]))
    if img is None:
        return out
    return out + (tuple((jnp.asarray(k[idx]), jnp.asarray(cw[idx] * c[:, None]), jnp.asarray(o[idx]), jnp.asarray(f[idx]))
                        for k, cw, o, f in img),)


def _start_sets(nominal: dict, labels: list[str], groups: dict[str, list[int]], init: dict) -> dict:
    """Parameter sets name -> (n_sets,) from one ``init`` dict (name -> value | (n_sets,) |
    {set or joint: value}); names not given are nominal."""
    start = {k: np.asarray(v, float).copy() for k, v in nominal.items()}
    for k, v in init.items():
        _check_name(k)
        if k not in start:
            raise ModelError(f"init: parameter {k!r} is not a parameter of this robot's model")
        val = start[k].copy()
        if isinstance(v, dict):
            for key, x in v.items():
                if key in labels:
                    val[labels.index(key)] = float(x)
                elif key in groups:  # a shared set's value for each of its joints (per-joint fit)
                    val[groups[key]] = float(x)
                else:
                    raise ModelError(f"init: parameter {k!r}: {key!r} is neither a parameter set nor a "
                                     f"joint here ({', '.join(labels)})")
        else:
            val = np.broadcast_to(np.asarray(v, float), val.shape).copy()
        start[k] = val
    return start


@physics
@on_fixed_blas_threads
def fit_arm_grad(robot_name: str | Robot, trajs: Iterable[Trajectory], *, model: str | None = None,
                 params: Iterable[str] | None = None, fixed: Iterable[str] = ("R",), per_joint: bool = False,
                 curriculum: Iterable[int] = CURRICULUM, iters: int | Iterable[int] = DEFAULT_ITERS,
                 lr: float = 0.05, batch: int = 16, seed: int = 0, init: dict | Iterable[dict] | None = None,
                 progress: Callable | None = None, mode: str = "auto",
                 images: ImageSupervision | None = None) -> dict[str, Any]:
    """Fit actuator parameters of a whole robot to multi-joint logs with Adam through MJX.

    Args:
        robot_name: a bundled robot name or a :class:`Robot`.
        trajs: logs in the multi-joint convention on the control grid.
        model: registry model of every parameter set (:func:`~actuatorlab.identify.arm_fit.
            robot_with_model`); default: the robot config's own.
        params: parameter names (:data:`~actuatorlab.models.params.PARAMS`) to fit; default: the
            free parameters of ``model`` minus ``fixed`` (:data:`DEFAULT_FIT_PARAMS` when no model
            is given). The others stay nominal.
        fixed: with ``model`` and no ``params``: free parameters kept nominal (as ``fit_arm``).
        per_joint: one value per joint instead of one per parameter set (actuator group). Sets of
            joints the logs never record stay nominal.
        curriculum: window lengths [control steps], one stage each, in order.
        iters: Adam steps per stage (one int for every stage, or one per stage).
        lr: initial learning rate [z units per step; z spans the box, 0 .. 1]; it decays to
            ``lr / 10`` over all steps.
        batch: windows per step B (fixed; a short minibatch is padded with zero-weight copies).
        seed: minibatch order (same seed, same result).
        init: starting point(s): a dict or a list of dicts, each name -> value | (n_sets,) values
            (``fit_arm``'s "param_sets") | {set or joint: value}, servo side. Each is scored with
            the native path and the fit starts from the best of them and the nominal values.
            Values outside the box are clipped to it when the descent starts; parameters not
            fitted keep the chosen start's values throughout.
        progress: called as progress("adam", steps done, steps total) after every step.
        mode: gradient by "forward" or "reverse" differentiation, or "auto"
            (:func:`window_objective`).
        images: masks of calibrated cameras (:func:`~actuatorlab.identify.images.load_image_supervision`):
            the objective gains the image term (:mod:`actuatorlab.identify.images`), every
            commanded joint's parameter sets are fitted (a joint without an encoder is seen by
            the cameras only), and the stages are scored with it too.

    Returns:
        ``fit_arm``'s keys — "model", "params", "nominal" ({name: {set or joint: value}} of the
        fitted sets, servo side), "param_sets" ({name: [value per parameter set]}, every
        parameter), "train_mae" [rad] (native path, windows of ``horizon`` steps), "train_mse"
        [rad^2] (the objective there),
        "train_mae_nominal", "evaluations" (Adam steps taken), "wall_s" (everything, compile
        included), "horizon" (last curriculum length), "n_windows" (windows of that length),
        "unit", "per_joint" — and "method": "adam", "mode" ("forward" | "reverse"), "compile_s"
        [s] (tracing + XLA compile of the stages' gradient functions; about 0 when already
        compiled in this process), "train_mae_init" (native MAE of the start), "skipped_steps"
        (non-finite steps skipped), "selected" (-1: the start was kept, else the stage whose end
        point was returned), "loss_history": one dict per stage {"length", "iters", "batch",
        "n_windows", "lr" (at the stage start), "loss" (J per step [rad^2]), "skipped", "native_mse" (end of stage,
        last stage's windows [rad^2]; with ``images`` J, the image term included), "compile_s", "wall_s"}.
        With ``images``: "image_term" (J_img of the result on the last stage's windows) and
        "image_soft_iou" (its mean soft IoU over the frames there; with the edge loss "image_edge_rms",
        the RMS pixel residual); with ``refine_camera``, "camera_refinement": per camera the refined
        pose, its twist and how far it moved (:func:`~actuatorlab.identify.images.refined_cameras`).
    """
    t0 = _time.perf_counter()
    robot, names = fit_setup(robot_name, model, params, fixed, "fit_arm_grad")
    lengths, steps = _stages(curriculum, iters, batch, lr, mode)
    B = int(batch)

    r = per_joint_robot(robot) if per_joint else robot
    labels = [g.joints[0] if per_joint else g.name for g in r.groups]
    groups = {g.name: [robot.joint_names.index(j) for j in g.joints] for g in robot.groups} if per_joint else {}
    cfg = ArmConfig.from_robot(r)
    logs = [log_arrays(robot, t) for t in trajs]
    if not logs:
        raise DataError(None, "no logs to fit")
    scored = np.any([lg.scored if images is None or lg.commanded is None else lg.commanded for lg in logs], axis=0)
    sets = tuple(g for g, grp in enumerate(r.groups) if any(scored[robot.index(j)] for j in grp.joints))
    space, vg = window_objective(r, names, cfg, mode, sets, images)
    cam = None if images is None else images.twists
    fc = None if images is None else images.corrections
    mode = mode if mode != "auto" else _auto_mode(space.n, cam, fc)
    nominal = r.nominal_params()

    judge = _Judge(r, cfg, logs, lengths[-1], images)
    native_score = judge.score

    inits = [init] if isinstance(init, dict) else list(init or [])
    starts = [space.nominal] + [_start_sets(nominal, labels, groups, d) for d in inits]
    nu0 = (None if cam is None else np.zeros((cam.n, 6)), None if fc is None else np.zeros((fc.frames, fc.joints)))
    i0, (mse0, mae0) = _choose_start(judge, starts, nu0)
    z0 = np.concatenate([space.z_of(starts[i0]), np.full(_nuisance_size(cam, fc), 0.5)])
    descent = _descend(vg, functools.partial(_point, space, cam, fc), native_score, r, cfg, lengths, steps, B, lr,
                       np.random.default_rng(seed), z0, starts[i0], BestSoFar(mse0, (-1, (starts[i0], *nu0))), progress,
                       judge)
    best, done, skipped, compile_total, history = descent
    p_best, xi_best, dq_best = best.x[1]
    mse, mae = native_score((p_best, xi_best, dq_best))
    _, mae_nom = native_score((nominal, *nu0))
    extra = _image_extras(judge, r, images, p_best, xi_best, dq_best)

    return fit_result(model, names, labels, sets, p_best, nominal, (mse, mae, mae_nom), per_joint,
                      evaluations=done, wall_s=float(_time.perf_counter() - t0), horizon=lengths[-1],
                      n_windows=int(len(judge.w.start)), method="adam", mode=mode, compile_s=compile_total,
                      train_mae_init=mae0, skipped_steps=skipped, selected=best.x[0], loss_history=history, **extra)


def _point(space: ArmSpace, cam: CameraTwists | None, fc: FrameCorrections | None, z, start: dict
           ) -> tuple[dict, np.ndarray | None, np.ndarray | None]:
    """(parameter sets, the cameras' twists or None, the frames' corrections or None) of coordinates z
    (:func:`_nuisance`)."""
    z = np.asarray(z)
    p = dataclasses.replace(space, nominal=start).unpack(space.to_theta(z[:space.n]))
    xi, dq = _nuisance(z, space.n, cam, fc, xp=np)
    return ({k: np.asarray(v, float) for k, v in p.items()}, None if xi is None else np.asarray(xi, float),
            None if dq is None else np.asarray(dq, float))


def _image_extras(judge: "_Judge", r: Robot, images: ImageSupervision | None, p: dict, xi: np.ndarray | None,
                  dq: np.ndarray | None) -> dict[str, Any]:
    """The result's image entries (:func:`fit_arm_grad`): the image figures, the refined cameras, and the
    per-frame state corrections' summary (frames, prior std, RMS and largest |dq| per joint)."""
    extra: dict[str, Any] = dict(judge.image_figures(p, xi, dq))
    if images is not None and xi is not None:
        extra["camera_refinement"] = refined_cameras(images, xi)
    if images is not None and images.corrections is not None and dq is not None:
        extra["state_corrections"] = {
            "frames": int(dq.shape[0]), "state_std": images.corrections.scale,
            "rms": {j: float(np.sqrt(np.mean(dq[:, i] ** 2))) for i, j in enumerate(r.joint_names)},
            "max_abs": {j: float(np.max(np.abs(dq[:, i]))) for i, j in enumerate(r.joint_names)}}
    return extra


def _choose_start(judge: "_Judge", starts: list[dict], nu0) -> tuple[int, tuple[float, float]]:
    """The best of ``starts`` by the native objective, each scored with its own stand-ins (those of the
    chosen one are left in ``judge``) and the nuisance ``nu0`` (twists, corrections): (its index,
    (objective, MAE))."""
    scores = [(judge.refresh(p), judge.score((p, *nu0)))[1] for p in starts]
    i0 = int(np.argmin([f for f, _ in scores]))
    if judge.moving and i0 != len(starts) - 1:
        judge.refresh(starts[i0])
    return i0, scores[i0]


def _stages(curriculum, iters, batch, lr, mode) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(window lengths, Adam steps per stage), checked."""
    lengths = tuple(int(L) for L in curriculum)
    if not lengths:
        raise ModelError("fit_arm_grad: the curriculum is empty; give at least one window length")
    steps = (int(iters),) * len(lengths) if isinstance(iters, (int, np.integer)) else tuple(int(i) for i in iters)
    if len(steps) != len(lengths):
        raise ModelError(f"fit_arm_grad: {len(steps)} iteration counts for {len(lengths)} curriculum stages")
    if min(lengths) < 1 or min(steps) < 1:
        raise ModelError(f"fit_arm_grad: window lengths {lengths} and iterations {steps} must all be >= 1")
    if int(batch) < 1 or not (float(lr) > 0 and math.isfinite(float(lr))):
        raise ModelError(f"fit_arm_grad: batch ({batch}) must be >= 1 and lr ({lr}) a positive number")
    if mode not in ("auto", "forward", "reverse"):
        raise ModelError(f"fit_arm_grad: mode must be auto, forward or reverse, got {mode!r}")
    return lengths, steps


class _Judge:
    """The logs a fit descends on and the native score of its stages: the last stage's windows,
    position MSE (plus the image term with ``images``); the unmeasured joints' stand-in states
    (:func:`standin_states`), refreshed from given parameters when there are any."""

    def __init__(self, r: Robot, cfg: ArmConfig, logs: list[LogArrays], length: int,
                 images: ImageSupervision | None):
        self.r, self.cfg, self.raw, self.length = r, cfg, logs, int(length)
        self.moving = images is not None and any(lg.commanded is not None and np.any(lg.commanded & ~lg.scored)
                                                 for lg in logs)
        self.images = images
        names, Ts = [lg.name for lg in logs], [lg.q_meas.shape[0] for lg in logs]
        self.targets = None if images is None else (lambda L: window_targets(images, names, Ts, L, r.control_dt))
        self.img_fin = None if self.targets is None else self.targets(self.length)
        self.img_score = None if images is None else jax.jit(image_term(images))
        self.cam = None if images is None else images.twists
        self.use(logs)

    def use(self, logs: list[LogArrays]) -> list[LogArrays]:
        """Make ``logs`` the logs of the stages and of the score."""
        self.logs = logs
        self.w, self.wgt = stage_windows(self.r, logs, self.length, self.cfg)
        return logs

    def refresh(self, p: dict) -> list[LogArrays]:
        """The logs with every unmeasured joint's stand-in from a continuous rollout of ``p``."""
        return self.use(standin_states(self.r, self.raw, p, self.cfg)) if self.moving else self.logs

    def _rollout(self, p: dict):
        return rollout_native(self.r, p, self.w.inputs, self.w.state0, self.cfg, model=native_model(self.r, p))[1]

    def _image(self, q, xi, dq=None) -> float:
        assert self.img_score is not None
        return float(self.img_score(jnp.asarray(q), self.img_fin, None if xi is None else jnp.asarray(xi),
                                    None if dq is None else jnp.asarray(dq)))

    def score(self, point: tuple[dict, np.ndarray | None, np.ndarray | None]) -> tuple[float, float]:
        """(objective, position MAE) of ``point`` = (parameter sets, the cameras' twists or None, the frames'
        corrections or None) on the last stage's windows, native path (the image term and the priors
        included where they are fitted)."""
        p, xi, dq = point
        out = self._rollout(p)
        e = out.q - self.w.q_meas
        if not np.all(np.isfinite(e)):
            return math.inf, math.inf
        den = max(float(self.wgt.sum()), 1.0)
        J = float(np.sum(e**2 * self.wgt) / den)
        if self.img_score is not None:
            J += self._image(out.q, xi, dq)
            if xi is not None and self.cam is not None:
                J += float(self.cam.prior(xi, xp=np))
        return J, float(np.sum(np.abs(e) * self.wgt) / den)

    def image_figures(self, p: dict, xi: np.ndarray | None = None, dq: np.ndarray | None = None) -> dict[str, float]:
        """{"image_term", "image_soft_iou"} of ``p`` (and the cameras' twists ``xi``, the frames' corrections
        ``dq``, whose prior the term then includes) on the last stage's windows (none without images)."""
        if self.img_score is None or self.images is None:
            return {}
        J_img = self._image(self._rollout(p).q, xi, dq)
        per_frame = J_img / float(self.images.options.weight)
        if self.images.options.loss == "edge":
            return {"image_term": J_img, "image_edge_rms": math.sqrt(max(per_frame, 0.0))}
        return {"image_term": J_img, "image_soft_iou": 1.0 - per_frame}


def standin_states(r: Robot, logs: list[LogArrays], p: dict, cfg: ArmConfig) -> list[LogArrays]:
    """``logs`` with the q_meas / dq_meas of every joint that is commanded but not measured replaced
    by a continuous native rollout of parameter sets ``p`` over the whole log (from the log's first
    sample): the state such a joint's windows restart from (module :mod:`actuatorlab.identify.images`).
    A far better stand-in than the command, whose servo lag restarts every window with an error
    that the images then blame on the actuator (virtual OM-X, joint2 withheld: the image term's
    minimum moved from the true viscous friction to the box edge with the command as stand-in)."""
    out = []
    for lg in logs:
        un = np.zeros_like(lg.scored) if lg.commanded is None else lg.commanded & ~lg.scored
        if not np.any(un):
            out.append(lg)
            continue
        s0 = initial_state(r, cfg, q=lg.q_meas[0], dq=lg.dq_meas[0],
                           temperature=None if lg.temperature is None else lg.temperature[0])
        _, o = rollout_native(r, p, lg.inputs, s0, cfg, model=native_model(r, p))
        q, dq = lg.q_meas.copy(), lg.dq_meas.copy()
        q[:, un], dq[:, un] = np.asarray(o.q)[:, un], np.asarray(o.dq)[:, un]
        out.append(dataclasses.replace(lg, q_meas=q, dq_meas=dq))
    return out


def _descend(vg, point_of, native_score, r, cfg, lengths, steps, B, lr, rng, z, start, best, progress,
             judge: _Judge):
    """The curriculum: Adam with one cosine decay and one state through all stages, the end point
    of each stage scored on the native path. Before each stage after the first, the unmeasured
    joints' stand-ins are refreshed from the parameters reached (``judge``; the best so far is
    re-scored on them). Returns (best: native objective and (stage, (sets, twists)), steps done, steps
    skipped, compile seconds, per-stage history)."""
    logs = judge.logs
    base = {k: jnp.asarray(v, float) for k, v in start.items()}  # values not fitted
    total, done, skipped, compile_total = sum(steps), 0, 0, 0.0
    schedule = optax.cosine_decay_schedule(float(lr), total, alpha=LR_FLOOR)
    opt = optax.adam(schedule)
    zj = jnp.asarray(z)
    state = opt.init(zj)  # one Adam state through all stages
    history = []
    for si, (L, n_it) in enumerate(zip(lengths, steps)):
        ts = _time.perf_counter()
        if si > 0 and judge.moving:  # the unmeasured joints' stand-ins from the parameters reached so far
            logs = judge.refresh(point_of(zj, start)[0])
            best = BestSoFar(native_score(best.x[1])[0], best.x)
        w, wgt = (judge.w, judge.wgt) if L == judge.length else stage_windows(r, logs, L, cfg)
        img = None if judge.targets is None else judge.targets(L)
        plan = minibatches(len(w.start), B, n_it, rng)
        # trace + compile the gradient for this (B, L) once (a cache hit if already done), timed
        # apart from the steps; the jit call below then finds the executable
        tc = _time.perf_counter()
        vg.lower(zj, base, *_take(w, wgt, *plan[0], img)).compile()
        c_s = _time.perf_counter() - tc
        compile_total += c_s
        losses, bad = [], 0
        for idx, c in plan:
            f, g = vg(zj, base, *_take(w, wgt, idx, c, img))
            f = float(f)
            losses.append(f)
            if math.isfinite(f) and bool(jnp.all(jnp.isfinite(g))):
                zj, state = box_adam_step(opt, g, state, zj)
            else:
                bad += 1
            done += 1
            if progress:
                progress("adam", done, total)
        skipped += bad
        pt = point_of(zj, start)
        mse, _ = native_score(pt)
        best.update([mse], [(si, pt)])
        history.append({"length": L, "iters": n_it, "batch": B, "n_windows": int(len(w.start)),
                        "lr": float(schedule(done - n_it)), "loss": losses, "skipped": bad, "native_mse": mse,
                        "compile_s": c_s, "wall_s": _time.perf_counter() - ts})

    return best, done, skipped, compile_total, history
