"""The teacher-forced samples of the force, gate and condition heads (:func:`head_data`: causal
windows of MEASURED frames with their labels) and the two exact symmetries of an arm's dynamics
that augment them: the rotation about a vertical yaw joint (:func:`yaw_augment`) and the
reflection in the arm's vertical mirror plane (:func:`mirror_augment`), used by
:func:`actuatorlab.learned.heads.train_heads`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import equinox as eqx
import jax
import numpy as np

from ..errors import DataError, ModelError
from ..logs.format import Trajectory
from ..models.features import sliding_windows
from ..sim.arm_learned import LearnedArm, frames_of_log
from ..sim.dynamics import ArmDynamics
from ..sim.force import prior_forces
from .arm import arm_log

__all__ = ["FORCE_THRESHOLD", "HeadData", "LazyWindows", "head_data", "yaw_joint", "yaw_channel", "yaw_augment",
           "MIRROR_TOL", "ODD_FEATURES", "mirror_symmetry", "mirror_augment"]

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
    parts: list[Any] = []
    frames: list[np.ndarray] = []
    src: list[np.ndarray] = []
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


def yaw_channel(robot, layout, what: str):
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
