"""Supervised training of the force, contact-gate and condition heads (teacher forcing, no simulator).

The force, gate and condition heads of a whole-robot learned actuator are supervised by labels,
not through the rollout, so they can be trained on windows of MEASURED frames (the log's own
positions, velocities, commands and telemetry; :func:`~actuatorlab.models.features.sliding_windows`,
causal: window k holds frames k - H .. k) without MJX: seconds per hundred steps on a CPU instead
of ~10 s per step through the simulator (docs/learned_arm.md). Loss (the head terms of
:func:`~actuatorlab.learned.arm.arm_loss`, same weights)::

    J = mean c_f (1 + w_c contact) sum_xyz huber(f_hat - f)    f_hat = sigmoid(gate) (f_raw + f_prior)   [N]
      + mean c_f BCE(gate, contact)
      + mean BCE(condition_c, [channel c restricted])

f_prior = 0, or with ``force_prior`` (a classical method of :mod:`actuatorlab.sim.force`,
calibrated on the free-motion TRAINING logs and stored with the model) that method's causal
estimate on the same frames: the head then learns a correction of the classical estimate, which
keeps its linear growth with the load beyond the training loads (docs/force.md, "Force prior").
w_c = 4 (``budget["contact_weight"]``; 4 is arm_loss's weight); contact: the log's ``contact`` channel when it has one (the synth suite's protocol truth: a
payload carried or an external force above 0.05 N), else |f| > 0.01 N (a force gauge's noise
would otherwise mark a no-contact log as contact everywhere); c_f = 1 where the log carries a
force label. What is trained (``trunk``): with ``init`` (a model trained through the simulator)
only the force, gate and condition heads by default, so its torque path is unchanged; from scratch
the trunk too. The torque head is never trained here: a model made by :func:`train_heads` from
scratch has an untrained torque head (its ``training.torque_head`` says so) and is for force and
condition estimation, not for rollouts. Optimisation, EMA, checkpoints, exact resume and the run
folder are :func:`actuatorlab.learned.trainer.train`'s; the best EMA parameters by validation
force MAE are written as RUN/arm_model.json + RUN/arm_model.eqx.
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
import optax

from ..errors import DataError, ModelError, UnknownNameError
from ..logs.format import Trajectory
from ..precision import physics
from ..sim.arm_learned import RESIDUAL_FEATURE, RESIDUAL_FEATURES, TELEMETRY, LearnedArm, frames_of_log
from ..models.features import sliding_windows
from ..sim.force import ForcePrior, prior_forces
from .arm import _effort_scale, add_residual_channels, arm_log, DEFAULT_FEATURES, make_learned_arm, save_arm_model, with_residual_inputs
from ..models.nets import Heads
from ..sim.dynamics import ArmDynamics
from ..robots.loader import load_robot
from ..models.features import fit_normalizer, Normalizer
from .trainer import train, TrainConfig
from ..sim.arm_data import log_arrays
from .force_frame import joint_force_map

__all__ = ["HEADS_BUDGET", "HeadData", "head_data", "heads_loss", "head_sums", "head_terms", "val_metrics", "train_heads", "yaw_joint", "yaw_augment",
           "MIRROR_TOL", "ODD_FEATURES", "mirror_symmetry", "mirror_augment", "task_balance_weights", "frame_name"]

#: default budget of :func:`train_heads` (a few minutes on 2 CPU cores for a small network)
HEADS_BUDGET: dict[str, Any] = dict(steps=1500, batch=128, lr=1e-3, eval_every=250, noise=0.0, weight_decay=1e-4,
                                    contact_weight=4.0)
FORCE_THRESHOLD = 0.01  # [N]


class HeadData(eqx.Module):
    """Teacher-forced samples: x (N, H+1, F) raw measured windows, force (N, 3) [N], force_w (N,)
    1 where labelled, contact (N,) 0/1, condition (N, C) 0/1, prior (N, 3) [N] the model's force
    prior at each frame (None: no prior)."""

    x: Any
    force: Any
    force_w: Any
    contact: Any
    condition: Any
    prior: Any = None

    @property
    def n(self) -> int:
        return int(self.x.shape[0])

    def take(self, idx) -> "HeadData":
        return jax.tree.map(lambda a: a[idx], self)


class LazyWindows:
    """The causal windows of :func:`~actuatorlab.models.features.sliding_windows` over many logs,
    gathered on indexing instead of stored: ``frames`` (N, F) float32, the logs' frames end to end,
    and ``src`` (N, H+1) int32, the frame each window position reads (frames before a log's start
    replaced by its frame 0, as ``sliding_windows`` does). ``w[idx]`` equals the stored windows'
    ``x[idx]`` exactly; memory is N (F + H + 1) numbers instead of N (H + 1) F."""

    def __init__(self, frames: np.ndarray, src: np.ndarray):
        self.frames = np.asarray(frames, np.float32)
        self.src = np.asarray(src, np.int32)

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.src.shape[0], self.src.shape[1], self.frames.shape[1])

    def __len__(self) -> int:
        return int(self.src.shape[0])

    def __getitem__(self, idx) -> np.ndarray:
        return self.frames[self.src[idx]]

    def __array__(self, dtype=None, copy=None):  # materialise (validation, small sets)
        x = self.frames[self.src]
        return x if dtype is None else x.astype(dtype)


def head_data(robot, model: LearnedArm, trajs: list[Trajectory], lazy: bool = False) -> HeadData:
    """Windows of measured frames of every log for ``model``'s layout (raw, not normalized).

    ``lazy``: ``x`` is a :class:`LazyWindows` that gathers each batch's windows on indexing (for
    training sets: the stored windows of a scale-1 synth dataset with 161 push logs take about
    (H + 1) = 33 times the frames' memory)."""

    prior = model.force_prior
    prior_est = prior.estimator(robot) if prior is not None else None  # one dynamics model for every log
    parts, frames, src = [], [], []
    H = int(model.layout.history)
    for t in trajs:
        lg = arm_log(robot, t, model.layout.channels, model.layout.per_channel)
        b = lg.base
        fr = frames_of_log(model, b.inputs.q_target, b.q_meas, b.dq_meas, b.inputs.v_supply, b.inputs.enable,
                           lg.telemetry)
        if lazy:  # the frames and, per window, which frame (counted over all logs) each position reads
            x, T, n0 = None, fr.shape[0], sum(f.shape[0] for f in frames)
            frames.append(np.asarray(fr, np.float32))
            src.append((n0 + np.clip(np.arange(T)[:, None] + np.arange(-H, 1)[None, :], 0, T - 1)).astype(np.int32))
        else:
            x = np.asarray(sliding_windows(fr, model.layout.history))
            T = x.shape[0]
        if t.has("contact"):
            c = (np.nan_to_num(np.asarray(t["contact"], float)) > 0.5).astype(np.float32)
        else:
            c = (np.linalg.norm(lg.force, axis=-1) > FORCE_THRESHOLD).astype(np.float32)
        fp = None
        if prior is not None:
            fp = prior_forces(robot, prior, t, prior_est)
            if fp.shape[0] != T:
                raise DataError(t.source_file or t.name, f"force prior has {fp.shape[0]} frames, the log {T}")
        parts.append(HeadData(x, lg.force.astype(np.float32), np.full(T, float(lg.force_known), np.float32), c,
                              np.tile(lg.condition.astype(np.float32), (T, 1)), fp))
    if not parts:
        raise DataError(None, "train_heads: no logs")
    out = jax.tree.map(lambda *a: np.concatenate(a), *parts)  # x = None (lazy) is no leaf
    return dataclasses.replace(out, x=LazyWindows(np.concatenate(frames), np.concatenate(src))) if lazy else out


def head_sums(model: LearnedArm, d: HeadData, valid=None, contact_weight: float = 4.0) -> dict:
    """The sums behind :func:`heads_loss` on ``d`` (rows with ``valid`` = 0 count nowhere; they
    must also have ``force_w`` = 0): ``force`` sum fw (1 + w_c c) huber, ``gate`` sum fw BCE,
    ``den`` sum fw, ``abs`` sum fw |f_hat - f|, ``abs_c``/``den_c`` the same over contact
    frames, ``cond``/``cond_n`` the condition BCE summed and its count. Sums over row chunks add up,
    so a large validation set is scored chunk by chunk (:func:`val_metrics`)."""

    def one(x):
        h: Heads = model.heads(x)
        return h.force_raw, h.gate_logit, h.condition_logit

    f_raw, g, c = jax.vmap(one)(d.x)
    f_hat = jax.nn.sigmoid(g)[:, None] * (f_raw if d.prior is None else f_raw + d.prior)
    fw = d.force_w
    v = jnp.ones(fw.shape, fw.dtype) if valid is None else valid
    err = jnp.abs(f_hat - d.force)
    wc = fw * d.contact
    return {"force": jnp.sum(fw * (1.0 + contact_weight * d.contact) * optax.huber_loss(f_hat, d.force, delta=1.0).sum(-1)),
            "gate": jnp.sum(fw * optax.sigmoid_binary_cross_entropy(g, d.contact)), "den": jnp.sum(fw),
            "abs": jnp.sum(fw[:, None] * err), "abs_c": jnp.sum(wc[:, None] * err), "den_c": jnp.sum(wc),
            "cond": jnp.sum(v[:, None] * optax.sigmoid_binary_cross_entropy(c, d.condition)),
            "cond_n": jnp.sum(v) * c.shape[-1]}


def head_terms(sums: dict) -> dict:
    """The terms of :func:`heads_loss` from :func:`head_sums` (added over chunks or not)."""
    den = jnp.maximum(sums["den"], 1.0)
    return {"force": sums["force"] / den, "gate": sums["gate"] / den,
            "condition": sums["cond"] / jnp.maximum(sums["cond_n"], 1.0), "force_mae": sums["abs"] / (3.0 * den),
            "force_mae_contact": sums["abs_c"] / (3.0 * jnp.maximum(sums["den_c"], 1.0))}


def heads_loss(model: LearnedArm, d: HeadData, weights=(1.0, 1.0, 1.0), contact_weight: float = 4.0):
    """The head loss J of the module docstring on a batch (``contact_weight`` = w_c); returns (J,
    terms); ``force_mae_contact``: the force MAE over the labelled frames in contact [N]."""
    t = head_terms(head_sums(model, d, contact_weight=contact_weight))
    a_f, a_g, a_c = weights
    return a_f * t["force"] + a_g * t["gate"] + a_c * t["condition"], t


#: validation rows per compiled call of :func:`val_metrics` (a whole scale-1 validation set in one
#: call needed about 11 GB of activations for the small Transformer)
VAL_CHUNK = 2048


def val_metrics(model: LearnedArm, d: HeadData, contact_weight: float = 4.0, chunk: int = VAL_CHUNK,
                _fn: dict | None = None) -> dict:
    """:func:`heads_loss`'s terms on a whole (validation) set, ``chunk`` rows per call: every call
    has one shape (the last chunk is padded with rows that count nowhere), the sums are added in
    float64 and divided at the end, so the result is that of one call on the whole set up to
    float32 rounding. ``_fn``: a dict the compiled chunk function is cached in between calls."""
    n = d.n
    fn = None if _fn is None else _fn.get("fn")
    if fn is None:
        fn = eqx.filter_jit(lambda m, b, v: head_sums(m, b, v, contact_weight))
        if _fn is not None:
            _fn["fn"] = fn
    total: dict = {}
    for i in range(0, n, chunk):
        idx = np.arange(i, min(i + chunk, n))
        b = d.take(idx)
        valid = np.ones(idx.size, np.float32)
        pad = chunk - idx.size
        if pad:
            b = jax.tree.map(lambda a: np.concatenate([np.asarray(a), np.repeat(np.asarray(a)[-1:], pad, 0)]), b)
            b = dataclasses.replace(b, force_w=np.concatenate([np.asarray(b.force_w)[:idx.size],
                                                                np.zeros(pad, np.float32)]))
            valid = np.concatenate([valid, np.zeros(pad, np.float32)])
        s = fn(model, jax.tree.map(jnp.asarray, b), jnp.asarray(valid))
        for k, x in s.items():
            total[k] = total.get(k, 0.0) + float(x)
    return {k: float(v) for k, v in head_terms(total).items()}


def _head_spec(model: LearnedArm, trunk: bool):
    """Filter spec: force / gate / condition heads (+ the trunk when ``trunk``), never the torque head."""
    spec = jax.tree.map(lambda _: False, model)
    net_spec = jax.tree.map(eqx.is_inexact_array, model.net) if trunk else jax.tree.map(lambda _: False, model.net)
    heads = getattr(model.net, "heads", None)
    if heads is None:
        raise ModelError(f"train_heads: the {model.arch} network has no output heads")
    on = jax.tree.map(eqx.is_inexact_array, heads)
    for name in ("force", "gate", "condition"):
        net_spec = eqx.tree_at(lambda n, k=name: getattr(n.heads, k), net_spec, replace=getattr(on, name))
    net_spec = eqx.tree_at(lambda n: n.heads.torque, net_spec,
                           replace=jax.tree.map(lambda _: False, heads.torque))
    return eqx.tree_at(lambda m: m.net, spec, replace=net_spec)


def yaw_joint(robot) -> tuple[str, np.ndarray, tuple[float, float]] | None:
    """(name, world axis (3,), range [rad]) of the robot's yaw joint, or None: its first joint when
    that is a hinge whose world axis is parallel to gravity in every configuration (nothing moves
    it: checked at three random configurations). About such an axis the whole arm's dynamics are
    invariant (gravity, M(q), C(q, qd) do not depend on its angle), which
    :func:`yaw_augment` uses."""
    import mujoco

    m = robot.model()
    name = robot.joint_names[0]
    j = m.joint(name)
    g = np.asarray(m.opt.gravity, float)
    if int(j.type[0]) != int(mujoco.mjtJoint.mjJNT_HINGE) or np.linalg.norm(g) == 0:
        return None
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)
    axes = []
    for _ in range(3):
        d.qpos[:] = m.qpos0 + rng.uniform(-0.5, 0.5, m.nq)
        mujoco.mj_kinematics(m, d)
        axes.append(np.array(d.xaxis[j.id]))
    a = axes[0] / np.linalg.norm(axes[0])
    if not all(abs(abs(float(x @ g)) / (np.linalg.norm(x) * np.linalg.norm(g)) - 1.0) < 1e-9 for x in axes):
        return None
    lo, hi = (float(v) for v in m.jnt_range[j.id]) if m.jnt_limited[j.id] else (-np.pi, np.pi)
    return name, a, (lo, hi)


def _yaw_channel(robot, layout, what: str):
    """(yaw_joint(robot), its channel index, features per channel) for a model ``layout`` that has
    the yaw joint among its channels with a ``q`` feature; else a one-line ModelError for ``what``."""
    found = yaw_joint(robot)
    if found is None or found[0] not in layout.channels or "q" not in layout.per_channel:
        raise ModelError(f"train_heads: {what} needs a first joint that is a vertical hinge among the "
                         f"model's channels with a 'q' feature ({robot.name}: "
                         f"{'none' if found is None else found[0]}; channels {list(layout.channels)})")
    return found, layout.channels.index(found[0]), len(layout.per_channel)


def yaw_augment(b: "HeadData", cols: list[int], axis: np.ndarray, limits: tuple[float, float], q_col: int,
                rng: np.random.Generator) -> "HeadData":
    """The same samples seen from a yaw-rotated arm: every frame's yaw-joint angle features
    (``cols``: its q_target and q columns of the raw frame) shifted by one random angle per sample,
    and the force label (and prior) rotated by that angle about the yaw ``axis``. Exact for a yaw
    joint (:func:`yaw_joint`): the end-effector position turns with it, J(q + d e_1) = R(d) J(q) in
    translation, so J^T f is unchanged for the rotated force R(d) f: same joint torques, currents
    and PWM. The angle keeps the sample's last-frame yaw angle (column ``q_col``) inside ``limits``."""
    q_now = np.asarray(b.x[:, -1, q_col], float)
    ang = rng.uniform(limits[0] - q_now, limits[1] - q_now)
    x = np.array(b.x, copy=True)
    for c in cols:
        x[:, :, c] += ang[:, None].astype(x.dtype)
    from scipy.spatial.transform import Rotation

    R = Rotation.from_rotvec(ang[:, None] * (np.asarray(axis, float) / np.linalg.norm(axis))[None]).as_matrix()
    rot = lambda f: None if f is None else np.einsum("bij,bj->bi", R, np.asarray(f, float)).astype(np.float32)  # noqa: E731
    return HeadData(x, rot(b.force), b.force_w, b.contact, b.condition, rot(b.prior))


#: relative tolerance of :func:`mirror_symmetry`'s check (of the largest entry of g, M, J_p)
MIRROR_TOL = 1e-2
#: per-channel features that change sign with the joint's motion under a reflection (angles,
#: rates, torque-like telemetry, the estimated external torque ``tau_ext`` and ``f_lever`` = tau_ext /
#: lever arm, a mirror-invariant length: exact up to the calibration's current offset b_j, as for
#: ``current``); the others (voltage, enable, temperature)
#: are unchanged
ODD_FEATURES = ("q_target", "q", "dq", "err", "current", "pwm", "load", "tau_ext", "f_lever")


def mirror_symmetry(robot, tol: float = MIRROR_TOL, n_check: int = 20, dyn=None
                    ) -> tuple[np.ndarray, np.ndarray, dict[str, float]] | None:
    """The arm's mirror symmetry, or None: (signs (n_est,) +-1 over the estimated joints of
    :class:`~actuatorlab.sim.dynamics.ArmDynamics` (joint order of ``dyn.joints``), P (3, 3)
    the reflection of the base frame, worst relative deviations found {"g", "M", "J"}).

    The mirror plane is vertical, contains the yaw axis (:func:`yaw_joint`) and the arm at zero yaw:
    its normal n is the world axis of the first estimated joint after the yaw joint at ``qpos0``
    (it must be horizontal), ``P = I - 2 n n^T``. A joint whose axis lies in the plane (the yaw
    joint) flips sign under the reflection (a rotation by -q about the same axis), one whose axis
    is along n keeps it: ``S = diag(s)``. The arm is symmetric when, for q' = S q, qd' = S qd,
    the rigid-body terms transform as ``g(q') = S g(q)``, ``M(q') = S M(q) S`` and
    ``J_p(q') = P J_p(q) S``; then ``J_p(q')^T (P f) = S J_p(q)^T f``: the mirrored force gives
    the mirrored joint torques, i.e. mirrored currents and PWM for an odd-symmetric actuator
    (checked here at ``n_check`` random configurations within the joint ranges, relative to the
    largest entry; the actuator's symmetry is the model's own assumption). Returns None when the
    robot has no yaw joint or no end-effector body, or a check fails by more than ``tol``.
    ``dyn``: the ArmDynamics of ``robot`` to check (default: built here, its default joints).
    """
    import mujoco


    found = yaw_joint(robot)
    if found is None:
        return None
    if dyn is None:
        try:
            dyn = ArmDynamics(robot)
        except ModelError:  # no end effector to map a force to (e.g. no default end-effector body)
            return None
    if found[0] not in dyn.joints or len(dyn.joints) < 2:
        return None
    m = robot.model()
    d = mujoco.MjData(m)
    d.qpos[:] = m.qpos0
    mujoco.mj_kinematics(m, d)
    g_dir = np.asarray(m.opt.gravity, float) / np.linalg.norm(m.opt.gravity)
    axes = {j: np.array(d.xaxis[m.joint(j).id]) / np.linalg.norm(d.xaxis[m.joint(j).id]) for j in dyn.joints}
    n = next((axes[j] for j in dyn.joints if j != found[0]), None)
    if n is None or abs(float(n @ g_dir)) > 1e-9:
        return None
    P = np.eye(3) - 2.0 * np.outer(n, n)
    s = np.ones(len(dyn.joints))
    for k, j in enumerate(dyn.joints):
        c = abs(float(axes[j] @ n))
        if c < 1e-9:
            s[k] = -1.0
        elif abs(c - 1.0) > 1e-9:
            return None  # an oblique axis: no reflection of this plane maps the joint onto itself
    rng = np.random.default_rng(0)
    lo = np.array([m.jnt_range[m.joint(j).id][0] if m.jnt_limited[m.joint(j).id] else -np.pi for j in dyn.joints])
    hi = np.array([m.jnt_range[m.joint(j).id][1] if m.jnt_limited[m.joint(j).id] else np.pi for j in dyn.joints])
    lim = np.minimum(np.abs(lo), np.abs(hi))  # q and S q both inside the range
    worst = {"g": 0.0, "M": 0.0, "J": 0.0}
    for _ in range(int(n_check)):
        q = rng.uniform(-lim, lim)
        for key, a, b in (("g", s * dyn.gravity(q), dyn.gravity(s * q)),
                          ("M", np.outer(s, s) * dyn.mass_matrix(q), dyn.mass_matrix(s * q)),
                          ("J", P @ dyn.jacobian(q) * s, dyn.jacobian(s * q))):
            scale = max(float(np.abs(a).max()), 1e-12)
            worst[key] = max(worst[key], float(np.abs(a - b).max()) / scale)
    if max(worst.values()) > tol:
        return None
    return s, P, worst


def mirror_augment(b: "HeadData", neg_cols: list[int], P: np.ndarray, rng: np.random.Generator,
                   share: float = 0.5) -> "HeadData":
    """The same samples seen in a mirror (:func:`mirror_symmetry`): a random ``share`` of the
    samples gets every frame's odd features of the sign-flipping joints (``neg_cols``: raw frame
    columns of :data:`ODD_FEATURES` of the joints with s = -1) negated and its force label (and
    prior) reflected, ``f' = P f``. Contact and condition labels are unchanged (no channel changes
    its identity). With :func:`yaw_augment` the two generate every rotation and reflection about
    the vertical axis: a push seen from the left in training is also seen from the right."""
    flip = rng.random(b.n) < float(share)
    x = np.array(b.x, copy=True)
    if neg_cols:
        x[np.ix_(flip, np.arange(x.shape[1]), np.asarray(neg_cols))] *= -1
    P32 = np.asarray(P, np.float32)

    def refl(f):
        if f is None:
            return None
        f = np.array(f, np.float32, copy=True)
        f[flip] = f[flip] @ P32.T
        return f

    return HeadData(x, refl(b.force), b.force_w, b.contact, b.condition, refl(b.prior))


def task_balance_weights(trajs: list[Trajectory]) -> np.ndarray:
    """Sampling probabilities (N,) over the windows of ``trajs`` (one window per frame, logs in
    order) that give every ``excitation`` family the same total: p_i = 1 / (K n_f(i)), with K
    families and n_f the number of windows of window i's family (a log without the tag counts as
    family "unknown"). They sum to 1."""
    fam = np.concatenate([np.full(t.n, str((t.conditions or {}).get("excitation", "unknown")), object) for t in trajs])
    _, inv, cnt = np.unique(fam, return_inverse=True, return_counts=True)
    return 1.0 / (len(cnt) * cnt[inv].astype(float))


@physics
def train_heads(robot_name: str, train_trajs: list[Trajectory], val_trajs: list[Trajectory], *, out: str | Path,
                init: LearnedArm | None = None, arch: str = "transformer", sizes: dict | None = None,
                trunk: bool | None = None, steps: int | None = None, budget: dict | None = None, seed: int = 0,
                resume: bool = False, progress: bool = True, force_prior: str | None = None,
                prior_labels: bool = False, augment_yaw: bool = False, augment_mirror: bool = False,
                balance_tasks: bool = False, force_frame: str | None = None,
                residual_input: str | None = None, residual_features: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Train the force / gate / condition heads on teacher-forced windows (module docstring) and
    write RUN/arm_model.json + RUN/arm_model.eqx. ``init``: a model to start from (its layout,
    normalizer, effort scales and torque head are kept); otherwise a fresh ``arch`` network with
    ``sizes``, its normalizer fitted on the training frames. ``trunk``: also train the shared
    trunk (default: only without ``init``). ``force_prior``: a classical method name
    (``id_linear``, ``id_friction``, ``momentum_observer``) calibrated on the free-motion logs of
    ``train_trajs``, whose estimate the force head corrects (module docstring; stored in
    arm_model.json); with ``init`` the model's own prior is kept and this must be None or the same
    method. ``prior_labels``: calibrate the prior on every force-labelled training log (payloads,
    pushes; :func:`~actuatorlab.sim.force.fit_calibration`'s ``labelled``) instead of free
    motion only. ``augment_yaw``: rotate every training sample about the robot's yaw joint by a
    random angle (:func:`yaw_augment`; refused when the robot has none). ``augment_mirror``: reflect
    half of the training samples in the arm's vertical mirror plane (:func:`mirror_augment`; refused
    when :func:`mirror_symmetry` finds none); applied before the yaw rotation. ``balance_tasks``:
    draw each training window with probability proportional to 1 / (number of training windows of
    its log's ``excitation`` family), so every family (free motion, payloads, pushes, ...) fills
    the same share of a batch however few logs it has (default: uniform over windows).
    ``force_frame``: ``"base"`` (the force head predicts in the robot's base frame) or ``"yaw"``
    (it predicts in the frame turned by the yaw joint's measured angle, rotated to the base frame
    by the model: :attr:`~actuatorlab.sim.arm_learned.LearnedArm.force_yaw`; refused when the robot
    has no yaw joint among the channels) or ``"joint"`` (the force head predicts the external
    torque of every channel, mapped to a base-frame force through the arm's kinematics:
    :class:`~actuatorlab.learned.force_frame.JointForceMap`; from scratch only, the head has one
    output per channel); default: the initial model's frame, else ``"base"``.
    ``residual_input``: a classical method name (``id_linear``, ``id_friction``,
    ``momentum_observer``) calibrated on the free-motion logs of ``train_trajs``, whose estimated
    external joint torque ``tau_ext`` [N.m] becomes one more per-channel input of the network (from
    scratch only; stored in arm_model.json and stepped online by
    :class:`~actuatorlab.sim.force.LearnedTelemetry`; docs/force.md, "The residual input").
    Unlike ``force_prior`` it adds nothing to the output: the network decides how much to trust it.
    ``residual_features``: which of ``RESIDUAL_FEATURES`` it feeds (default ``("tau_ext",)``;
    ``"f_lever"`` is tau_ext over each joint's lever arm to the end-effector point [N],
    :func:`~actuatorlab.sim.force.lever_arms`); only with ``residual_input``.
    Returns the arm_model.json dict."""

    t_all = _time.perf_counter()
    if not train_trajs or not val_trajs:
        raise DataError(None, f"train_heads needs training and validation logs (got {len(train_trajs)} and "
                              f"{len(val_trajs)})")
    bud = {**HEADS_BUDGET, **(budget or {})}
    if steps is not None:
        bud["steps"] = int(steps)
    robot = load_robot(robot_name)
    if force_frame not in (None, "base", "yaw", "joint"):
        raise UnknownNameError("force frame", str(force_frame), ("base", "yaw", "joint"))
    res_prior = None
    res_feats = tuple(residual_features) if residual_features is not None else (RESIDUAL_FEATURE,)
    bad = [f for f in res_feats if f not in RESIDUAL_FEATURES]
    if bad or not res_feats or len(set(res_feats)) != len(res_feats):
        raise UnknownNameError("residual feature", ",".join(bad) or str(res_feats), list(RESIDUAL_FEATURES))
    if residual_features is not None and residual_input is None:
        raise ModelError("train_heads: residual_features need a residual_input (the classical method they come from)")
    if init is None:
        scored = log_arrays(robot, train_trajs[0]).scored
        channels = tuple(j for j, s in zip(robot.joint_names, scored) if s)
        feats = tuple(f for f in DEFAULT_FEATURES if f not in TELEMETRY or all(
            train_trajs[0].has(f"{TELEMETRY[f]}/{j}") for j in channels))
        if residual_input is not None:
            # calibrated on the training logs' free motion only; the same prior writes every log's channel
            res_prior = ForcePrior.fit(robot, residual_input, train_trajs)
            train_trajs = add_residual_channels(robot, res_prior, train_trajs, channels, res_feats)
            val_trajs = add_residual_channels(robot, res_prior, val_trajs, channels, res_feats)
            feats = feats + res_feats
        tmp = make_learned_arm(robot, "mlp", channels=channels, per_channel=feats, normalizer=Normalizer(
            np.zeros(len(channels) * len(feats)), np.ones(len(channels) * len(feats))), effort_scale=1.0,
            width=4, depth=1, d=4, head_width=4)
        logs = [arm_log(robot, t, channels, feats) for t in train_trajs]
        frames = np.concatenate([frames_of_log(tmp, lg.base.inputs.q_target, lg.base.q_meas, lg.base.dq_meas,
                                               lg.base.inputs.v_supply, lg.base.inputs.enable, lg.telemetry)
                                 for lg in logs])
        base = robot.nominal_params()
        sz = dict(sizes or {})
        if force_frame == "joint":  # one force output per channel: the external joint torques
            sz["force_out"] = len(channels)
        model = make_learned_arm(robot, arch, channels=channels, per_channel=feats, normalizer=fit_normalizer(frames),
                                 effort_scale=_effort_scale(robot, base, logs, channels, False), base=base,
                                 key=jax.random.PRNGKey(seed), **sz)
        if res_prior is not None:
            model = dataclasses.replace(model, residual_input=res_prior)
        trunk = True if trunk is None else trunk
    else:
        model = init
        trunk = False if trunk is None else trunk
        have_res = model.residual_input
        if residual_input is not None and (have_res is None or have_res.method != residual_input):
            raise ModelError(f"train_heads: a residual input is chosen with the network's inputs, from scratch only; "
                             f"the initial model reads {'no residual' if have_res is None else repr(have_res.method)}, "
                             f"not {residual_input!r}")
        have_feats = tuple(f for f in model.layout.per_channel if f in RESIDUAL_FEATURES)
        if residual_features is not None and tuple(residual_features) != have_feats:
            raise ModelError(f"train_heads: residual features are chosen with the network's inputs, from scratch only; "
                             f"the initial model reads {list(have_feats)}, not {list(residual_features)}")

        train_trajs = with_residual_inputs(robot, model, train_trajs)
        val_trajs = with_residual_inputs(robot, model, val_trajs)
    have = model.force_prior
    if force_prior is not None:
        if have is not None and have.method != force_prior:
            raise ModelError(f"train_heads: the initial model corrects the {have.method!r} force prior, "
                             f"not {force_prior!r}")
        if have is None:
            prior = ForcePrior.fit(robot, force_prior, train_trajs, labelled=prior_labels)
            model = dataclasses.replace(model, force_prior=prior)
    want = () if force_frame in ("base", "joint") else None
    if force_frame == "yaw":
        found, c, F = _yaw_channel(robot, model.layout, "force_frame 'yaw'")
        want = (c * F + model.layout.per_channel.index("q"), *(float(v) for v in found[1]))
    fj = model.force_joint
    if force_frame == "joint":
        fj = joint_force_map(robot, model.layout)
    elif force_frame in ("base", "yaw"):
        fj = None
    if (want is not None and want != tuple(model.force_yaw)) or fj != model.force_joint:
        if init is not None:
            raise ModelError(f"train_heads: the initial model's force frame is {frame_name(model)}, "
                             f"not {force_frame!r}")
        model = dataclasses.replace(model, force_yaw=tuple(model.force_yaw) if want is None else want, force_joint=fj)
    tr = head_data(robot, model, train_trajs, lazy=True)  # windows gathered per batch
    va = head_data(robot, model, val_trajs, lazy=True)
    B = int(bud["batch"])

    noise = float(bud["noise"])
    std = np.asarray(model.normalizer.std, np.float32)
    yaw = None
    if augment_yaw:
        found, c, F = _yaw_channel(robot, model.layout, "--augment-yaw")
        lay = model.layout
        cols = [c * F + lay.per_channel.index(f) for f in ("q_target", "q") if f in lay.per_channel]
        yaw = (cols, found[1], found[2], c * F + lay.per_channel.index("q"))

    mirror = None
    if augment_mirror:
        try:
            dyn = ArmDynamics(robot)
        except ModelError:
            dyn = None
        sym = None if dyn is None else mirror_symmetry(robot, dyn=dyn)
        lay = model.layout
        if sym is None:
            raise ModelError(f"train_heads: --augment-mirror needs an arm that is mirror-symmetric about a vertical "
                             f"plane through its yaw joint; {robot_name} is not (or has no yaw joint)")
        est = dyn.joints
        off = [c for c in lay.channels if c not in est]
        if off:
            raise ModelError(f"train_heads: --augment-mirror: channels {off} are not arm joints of {robot_name} "
                             f"(the mirror is defined on {list(est)})")
        F = len(lay.per_channel)
        flips = [c for c in lay.channels if sym[0][est.index(c)] < 0]
        neg = [lay.channels.index(c) * F + lay.per_channel.index(f) for c in flips for f in ODD_FEATURES
               if f in lay.per_channel]
        mirror = (neg, sym[1])

    prob = None
    if balance_tasks:
        prob = task_balance_weights(train_trajs)
        if prob.shape[0] != tr.n:
            raise DataError(None, f"train_heads: {tr.n} training windows but {prob.shape[0]} log frames")

    def batch_fn(step: int) -> HeadData:
        rng = np.random.default_rng([int(seed), int(step)])
        b = tr.take(rng.choice(tr.n, size=B, replace=tr.n < B) if prob is None else rng.choice(tr.n, size=B, p=prob))
        if mirror is not None:
            b = mirror_augment(b, *mirror, rng)
        if yaw is not None:
            b = yaw_augment(b, *yaw, rng)
        if noise > 0:  # input noise (augmentation): sigma in units of each feature's training std
            b = HeadData(b.x + noise * std * rng.standard_normal(b.x.shape).astype(np.float32), b.force, b.force_w,
                         b.contact, b.condition, b.prior)
        return jax.tree.map(jnp.asarray, b)

    w_c = float(bud["contact_weight"])

    val_cache: dict = {}

    def val_fn(m):  # chunk by chunk: a scale-1 validation set in one call needs ~11 GB of activations
        aux = val_metrics(m, va, contact_weight=w_c, _fn=val_cache)
        return {"val": aux["force_mae"], **{f"val_{k}": v for k, v in aux.items()}}

    tcfg = TrainConfig(steps=int(bud["steps"]), lr=float(bud["lr"]), warmup=max(1, int(bud["steps"]) // 20),
                       eval_every=int(bud["eval_every"]), checkpoint_every=int(bud["eval_every"]), seed=int(seed),
                       ema_decay=0.99, weight_decay=float(bud["weight_decay"]))
    meta = {"robot": robot_name, "arch": model.arch, "heads_only": True, "trunk": bool(trunk),
            "force_prior": None if model.force_prior is None else model.force_prior.method,
            "force_prior_labelled": None if model.force_prior is None else model.force_prior.calibration.labelled,
            "residual_input": None if model.residual_input is None else model.residual_input.method,
            "residual_features": [f for f in model.layout.per_channel if f in RESIDUAL_FEATURES],
            "augment_yaw": bool(augment_yaw), "augment_mirror": bool(augment_mirror),
            "balance_tasks": bool(balance_tasks), "force_frame": frame_name(model), "train": [t.name for t in train_trajs], "val": [t.name for t in val_trajs]}
    loss = (lambda m, d: heads_loss(m, d, contact_weight=w_c)) if w_c != 4.0 else heads_loss
    res = train(Path(out), model, loss, batch_fn, tcfg, val_fn=val_fn, resume=resume, progress=progress,
                meta=meta, filter_spec=_head_spec(model, bool(trunk)))
    best = res.best
    final = val_fn(best)
    return save_arm_model(out, robot_name, best, None if init is None else _base_desc(init), extra={
        "training": {"method": "train_heads (teacher forcing on measured frames, no simulator)",
                     "torque_head": "as initialised" if init is not None else "untrained (train_heads only)",
                     "trunk_trained": bool(trunk), "steps": res.steps, "best_step": res.best_step,
                     "best_val_force_mae": final["val"], "val_gate_bce": final["val_gate"],
                     "s_per_1k_steps": res.s_per_1k_steps, "compile_s": res.compile_s, "batch": B,
                     "lr": bud["lr"], "noise": noise, "weight_decay": float(bud["weight_decay"]), "contact_weight": w_c,
                     "augment_yaw": bool(augment_yaw), "augment_mirror": bool(augment_mirror),
                     "balance_tasks": bool(balance_tasks), "force_frame": frame_name(model),
                     "residual_input": None if model.residual_input is None else model.residual_input.method,
                     "residual_features": [f for f in model.layout.per_channel if f in RESIDUAL_FEATURES],
                     "best_val_force_mae_contact": final["val_force_mae_contact"], "wall_s": _time.perf_counter() - t_all},
        "data": {"train": [t.source_file or t.name for t in train_trajs],
                 "val": [t.source_file or t.name for t in val_trajs]}})


def frame_name(model: LearnedArm) -> str:
    """The force frame of ``model``'s force head: "joint", "yaw" or "base"."""
    return "joint" if model.force_joint is not None else ("yaw" if model.force_yaw else "base")


def _base_desc(model: LearnedArm) -> dict | None:
    """The analytic base description a residual model was saved with (None for a replacing model:
    its base is the robot's nominal model)."""
    if not model.residual:
        return None
    raise ModelError("train_heads: fine-tuning the heads of a residual model is not supported yet "
                     "(its analytic base description is not carried by LearnedArm)")
