"""Learned actuator efforts in the whole-robot rollouts (actuator in the loop).

A :class:`LearnedArm` is a parameter pytree that the rollout entry points accept in place of the
analytic parameter sets: ``make_mjx_rollout(robot)(model, inputs, state)`` and
``rollout_native(robot, model, inputs, state)`` (same entry points, same ``(ArmState, ArmOutputs)``
result; the model selects the path). Per actuator channel c (a robot joint) and per control step k
(period ``control_dt``; the effort is held over the step's physics substeps)::

    frame_k  = [per channel: q*_k (logged command), q_k, dq_k (SIMULATED, at the start of the
                step), e_k = q*_k - q_k, logged telemetry at k (current, PWM, temperature, load),
                supply voltage, enable]                                  (layout order, float32)
    window_k = (frame_{k-H}, ..., frame_{k-1}, frame_k)                  (H = layout.history)
    heads    = net(normalize(window_k))                                  (float32)
    tau_c    = clip(s_c * heads.torque_c, -E_c, E_c)                     [N.m | N]
    learned  : applied_c = tau_c                      (firmware, motor and friction replaced)
    residual : applied_c = analytic_c + tau_c         (the analytic model of ``base`` corrected)

with s_c the channel's effort scale and E_c its effort limit (the robot config's
``effort_limit``). Joints that are not channels (e.g. an unlogged gripper) keep the analytic model
of ``base``. The history is causal: frames before the rollout start are the *measured* frames of
the log before the window (``LearnedInputs.past``; copies of the first frame at the start of a
log), so a window restarted from a measured state sees what a running model would have seen, and
no frame ever holds a future sample. After Dou et al., "NeuralActuator" (RSS 2026): the network
learns the effort the simulator needs from pose trajectories alone, through the simulator.

Precision: the network, the frames and the heads are float32; the effort is cast to the physics
dtype (float64 under the project's x64 context) before it enters MuJoCo/MJX.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, TypedDict, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ModelError
from ..models.features import FeatureLayout, Normalizer, build_window, push_history
from ..models.nets import Heads

__all__ = ["TELEMETRY", "STATE_FEATURES", "LearnedArm", "LearnedInputs", "OnlineEstimator", "frame", "net_step", "trainable", "yaw_rotate",
           "step_fn_batched"]

#: per-channel features read from logged telemetry: feature name -> log channel prefix
TELEMETRY: dict[str, str] = {"current": "current", "pwm": "pwm_duty", "temperature": "temperature",
                             "load": "load", "tau_ext": "tau_ext", "f_lever": "f_lever"}
#: the per-channel feature computed from a log by the model's ``residual_input`` (a classical
#: estimator) rather than logged: the estimated external joint torque [N.m], log channel tau_ext/<joint>
RESIDUAL_FEATURE = "tau_ext"
#: every per-channel feature computed from the ``residual_input``: ``tau_ext`` and ``f_lever``, the
#: same torque over the joint's lever arm to the end-effector point, tau_ext_j / max(|J_p[:, j]|,
#: LEVER_MIN) [N] (:func:`~actuatorlab.sim.force.lever_arms`), log channel f_lever/<joint>
RESIDUAL_FEATURES: tuple[str, ...] = ("tau_ext", "f_lever")
#: per-channel features computed from the (simulated or measured) state and the inputs
STATE_FEATURES: tuple[str, ...] = ("q_target", "q", "dq", "err", "voltage", "enable")


class LearnedInputs(NamedTuple):
    """Inputs of a learned rollout: the :class:`~actuatorlab.sim.arm.ArmInputs` fields (T, n) and
    telemetry (T, C, K): the logged telemetry features of the layout (``LearnedArm.telemetry``
    order, K may be 0), past (H, n_features): raw measured frames before the first step, oldest
    first (None: copies of the first frame). A leading batch axis is allowed on every field."""

    q_target: Any
    enable: Any
    v_supply: Any
    telemetry: Any = None
    past: Any = None


class LearnedArm(eqx.Module):
    """A learned (or residual) actuator model of a whole robot; a pytree whose trained leaves are
    the network's (:func:`trainable`).

    net: network (:mod:`actuatorlab.models.nets`) on windows (history + 1, n_features);
    normalizer: feature normalization (fitted on training frames);
    base: analytic parameter sets name -> (n_groups,) (servo side): the corrected model of a
        residual, and the model of the joints that are not channels;
    layout: feature layout (channels = robot joint names); channel_index: their robot indices;
    effort_scale, effort_limit: (C,) [N.m | N] s_c and E_c of the module docstring;
    residual: correct the analytic effort (True) or replace it (False);
    arch, sizes: the network's registry name and sizes (to save and rebuild it);
    force_prior: None, or the :class:`~actuatorlab.sim.force.ForcePrior` (a calibrated
        classical estimator) whose estimate the force head corrects: f = sigmoid(gate) (f_raw + f_prior).
    force_yaw: the frame of the force head (:meth:`heads`). ``()``: the network's f_raw is the force in
        the robot's base frame. ``(q_col, a_x, a_y, a_z)``: the network predicts the force in the frame
        that turns with the robot's yaw joint (a vertical hinge whose world axis is a; its measured
        angle theta is raw feature ``q_col`` of the window's newest frame), and
        f_raw = R(a, theta) f_net (Rodrigues' rotation formula). A horizontal push at the end effector
        then maps to the same network output at every yaw angle, so the network never has to learn
        sin / cos of the yaw angle to point a lateral force (docs/force.md, "Force frame").
    force_joint: None, or a :class:`~actuatorlab.learned.force_frame.JointForceMap`: the network's
        force head has one output per channel, the external joint torques [N.m], and
        f_raw = (J_p J_p^T + lambda^2 I)^-1 J_p tau at the window's newest measured angles (damped
        least squares through the arm's kinematics; docs/force.md, "Force frame"). Excludes
        ``force_yaw`` (a joint torque is already unchanged by a yaw of the whole arm).
    residual_input: None, or the :class:`~actuatorlab.sim.force.ForcePrior` (a calibrated
        classical estimator, fitted on training logs) whose causal external-joint-torque estimate
        is the ``tau_ext`` per-channel feature (and ``f_lever``, the same over each joint's lever
        arm: ``RESIDUAL_FEATURES``; added to a log by
        :func:`~actuatorlab.learned.arm.with_residual_inputs`, docs/condition.md).
    """

    net: eqx.Module
    normalizer: Normalizer
    base: dict
    layout: FeatureLayout = eqx.field(static=True)
    channel_index: tuple = eqx.field(static=True)
    n_joints: int = eqx.field(static=True)
    effort_scale: tuple = eqx.field(static=True)
    effort_limit: tuple = eqx.field(static=True)
    residual: bool = eqx.field(static=True)
    arch: str = eqx.field(static=True)
    sizes: tuple = eqx.field(static=True, default=())
    force_prior: Any = eqx.field(static=True, default=None)
    force_yaw: tuple = eqx.field(static=True, default=())
    residual_input: Any = eqx.field(static=True, default=None)
    force_joint: Any = eqx.field(static=True, default=None)

    def __check_init__(self):
        unknown = [f for f in self.layout.per_channel if f not in STATE_FEATURES and f not in TELEMETRY]
        if unknown:
            raise ModelError(f"learned arm: unknown per-channel features {unknown}; known: "
                             f"{list(STATE_FEATURES) + list(TELEMETRY)}")
        if self.layout.global_features:
            raise ModelError(f"learned arm: global features {list(self.layout.global_features)} are not "
                             "supported by the whole-robot rollouts (use per-channel features)")
        if len(self.channel_index) != self.layout.n_channels or len(self.effort_scale) != self.layout.n_channels:
            raise ModelError("learned arm: channel_index / effort_scale do not match the layout's channels")
        if self.force_joint is not None and self.force_yaw:
            raise ModelError("learned arm: force_joint and force_yaw exclude each other (choose one force frame)")

    def heads(self, window) -> Heads:
        """The network's outputs for ONE raw window (history + 1, n_features), f_raw in the base
        frame (rotated from the yaw frame when ``force_yaw`` is set, mapped from joint torques when
        ``force_joint`` is)."""
        net = cast(Callable[[jax.Array], Heads], self.net)  # every models.nets architecture: window -> Heads
        h = net(self.normalizer.apply(window))
        if self.force_joint is not None:
            return h._replace(force_raw=self.force_joint.force(window[-1], h.force_raw))
        if not self.force_yaw:
            return h
        return h._replace(force_raw=yaw_rotate(self.force_yaw[1:], window[-1, self.force_yaw[0]], h.force_raw))

    @property
    def telemetry(self) -> tuple[str, ...]:
        """The layout's telemetry features, in layout order (the K axis of ``LearnedInputs.telemetry``)."""
        return tuple(f for f in self.layout.per_channel if f in TELEMETRY)

    @property
    def mask(self) -> np.ndarray:
        """(n,) bool: robot joints driven (or corrected) by the network."""
        m = np.zeros(self.n_joints, bool)
        m[list(self.channel_index)] = True
        return m


def yaw_rotate(axis, theta, v):
    """v (..., 3) turned by angle ``theta`` [rad] about the unit ``axis`` (3,) (Rodrigues:
    v cos(theta) + (a x v) sin(theta) + a (a . v) (1 - cos(theta)))."""
    a = jnp.asarray(axis, v.dtype)
    c, s = jnp.cos(theta).astype(v.dtype), jnp.sin(theta).astype(v.dtype)
    return v * c + jnp.cross(a, v) * s + a * jnp.sum(a * v, axis=-1, keepdims=True) * (1 - c)


def frame(model: LearnedArm, q_target, q, dq, v_supply, enable, telemetry):
    """One raw frame (..., n_features) float32. q_target, q, dq, v_supply, enable: (..., n) robot
    order [rad | m, rad/s | m/s, V, 0/1]; telemetry (..., C, K) in ``model.telemetry`` order."""
    idx = np.asarray(model.channel_index)
    f32 = jnp.float32
    qt, qq, dd = (jnp.asarray(a)[..., idx] for a in (q_target, q, dq))
    vals = {"q_target": qt, "q": qq, "dq": dd, "err": qt - qq, "voltage": jnp.asarray(v_supply)[..., idx],
            "enable": jnp.asarray(enable)[..., idx]}
    tel = model.telemetry
    cols = [jnp.asarray(vals[f], f32) if f in vals else jnp.asarray(telemetry, f32)[..., tel.index(f)]
            for f in model.layout.per_channel]
    x = jnp.stack(cols, axis=-1)  # (..., C, F) channel-major like assemble_frame
    return x.reshape(x.shape[:-2] + (x.shape[-2] * x.shape[-1],))


def net_step(model: LearnedArm, hist, q_target, q, dq, v_supply, enable, telemetry, dtype):
    """One control step for ONE environment: (effort (n,) [N.m | N] in ``dtype`` (0 off the
    channels), heads, history one step later). ``hist`` (H, n_features) raw past frames."""
    fr = frame(model, q_target, q, dq, v_supply, enable, telemetry)
    heads: Heads = model.heads(build_window(hist, fr))
    s = jnp.asarray(model.effort_scale, dtype)
    E = jnp.asarray(model.effort_limit, dtype)
    tau_c = jnp.clip(s * heads.torque.astype(dtype), -E, E)
    tau = jnp.zeros(model.n_joints, dtype).at[np.asarray(model.channel_index)].set(tau_c)
    return tau, heads, push_history(hist, fr)


def initial_history(model: LearnedArm, first_frame, past):
    """History (H, n_features) at the rollout start: ``past`` when given, else copies of the first
    frame (a log's start: no earlier sample exists)."""
    H = model.layout.history
    if past is not None:
        past = jnp.asarray(past, jnp.float32)
        if past.shape != (H, model.layout.n_features):
            raise ModelError(f"learned rollout: past frames must have shape ({H}, {model.layout.n_features}), "
                             f"got {past.shape}")
        return past
    return jnp.broadcast_to(jnp.asarray(first_frame, jnp.float32), (H, model.layout.n_features))


def telemetry_or_empty(model: LearnedArm, tel, T: int):
    """Telemetry (T, C, K) float32 checked against the layout (an error when the layout reads
    telemetry and ``tel`` is None; (T, C, 0) zeros when it reads none)."""
    K = len(model.telemetry)
    if tel is None:
        if K:
            raise ModelError(f"learned rollout: the model reads telemetry {list(model.telemetry)}; pass "
                             "LearnedInputs with telemetry (T, C, K)")
        return jnp.zeros((T, model.layout.n_channels, 0), jnp.float32)
    tel = jnp.asarray(tel, jnp.float32)
    if tel.shape[-2:] != (model.layout.n_channels, K):
        raise ModelError(f"learned rollout: telemetry must be (T, {model.layout.n_channels}, {K}) for "
                         f"{list(model.telemetry)}, got {tel.shape}")
    return tel


def combine_effort(model: LearnedArm, applied, tau_net, xp=jnp):
    """Effort written to the joints: the network's on the channels (learned) or the analytic one
    plus the network's (residual)."""
    if model.residual:
        return applied + tau_net
    return xp.where(model.mask, tau_net, applied)


def trainable(model: LearnedArm):
    """Filter spec (a pytree of bools like ``model``) selecting the network's floating-point
    leaves only: the normalizer and the analytic base are data, not trained."""
    spec = jax.tree.map(lambda _: False, model)
    return eqx.tree_at(lambda m: m.net, spec, replace=jax.tree.map(eqx.is_inexact_array, model.net))


@eqx.filter_jit
def step_fn_batched(model: LearnedArm, hist, q_target, q, dq, v_supply, enable, telemetry):
    """:func:`net_step` over a batch (B, ...), float64 effort; the native path's per-step call."""
    f = lambda h, a, b, c, d, e, t: net_step(model, h, a, b, c, d, e, t, jnp.float64)  # noqa: E731
    return jax.vmap(f)(hist, q_target, q, dq, v_supply, enable, telemetry)


def frames_of_log(model: LearnedArm, q_target, q, dq, v_supply, enable, telemetry) -> np.ndarray:
    """Raw measured frames (T, n_features) of a whole log (arrays (T, n) and (T, C, K))."""
    return np.asarray(frame(model, q_target, q, dq, v_supply, enable, telemetry))


#: contact gate threshold: a frame whose contact probability is at or below it is "no contact"
#: (the contact rule of docs/force.md), and the online force is exactly 0 there
CONTACT_GATE = 0.5


def gate_weight(contact: float, soft_gate: bool = False) -> float:
    """What the online force estimate multiplies f_raw (+ f_prior) by: the contact probability
    where it is above :data:`CONTACT_GATE`, else 0 (``soft_gate``: the probability everywhere).
    Cutting below the threshold makes the reported force agree with the contact decision (no force
    on a frame called free) and removes the gate's leakage out of contact (bench/README.md, R23:
    D/val force MAE -2 % and -6 % on two models)."""
    return float(contact) if soft_gate or contact > CONTACT_GATE else 0.0


class OnlineOutputs(TypedDict):
    """One step of :class:`OnlineEstimator` (the fields of its docstring)."""

    effort: np.ndarray  # (C,) [N.m | N]
    force: np.ndarray  # (3,) [N] gated
    force_raw: np.ndarray  # (3,) [N]
    contact: float  # contact probability in [0, 1]
    condition: np.ndarray  # (C,) in [0, 1]


class OnlineEstimator:
    """Causal online inference with a learned whole-robot model, one telemetry frame at a time.

    A small stateful wrapper over the pure :func:`net_step`: it holds the history of the frames
    already seen (nothing else), so an output never depends on a later frame. Before the first
    frame the history is copies of it (as at the start of a log). The positions and velocities
    are the *measured* ones (on hardware there is no simulator in the loop).

    ``step(q_target, q, dq, v_supply, enable, telemetry)`` with robot-ordered (n,) arrays and
    telemetry (C, K) in ``model.telemetry`` order returns {"effort": (C,) [N.m | N] the network's
    effort (a residual's correction), "force": (3,) [N] w f_raw with w = :func:`gate_weight` (the
    contact probability s = sigmoid(gate) where s > :data:`CONTACT_GATE`, else 0; ``soft_gate=True``:
    s everywhere, the soft product), without the model's ``force_prior``
    (:class:`~actuatorlab.sim.force.LearnedForceEstimator` adds it), "force_raw": (3,) [N] f_raw,
    "contact": s, "condition": (C,) condition scores in [0, 1] (1 = normal, 0 = restricted)}.
    ``reset()`` forgets the history.
    """

    def __init__(self, model: LearnedArm, soft_gate: bool = False):
        self.model = model
        self.soft_gate = bool(soft_gate)
        self._hist = None
        self._step = eqx.filter_jit(_online_step)
        self._frame = eqx.filter_jit(frame)

    def reset(self) -> None:
        self._hist = None

    def step(self, q_target, q, dq, v_supply, enable, telemetry=None) -> OnlineOutputs:
        m = self.model
        tel = np.zeros((m.layout.n_channels, 0), np.float32) if telemetry is None else np.asarray(telemetry, np.float32)
        if tel.shape != (m.layout.n_channels, len(m.telemetry)):
            raise ModelError(f"online inference: telemetry must be ({m.layout.n_channels}, {len(m.telemetry)}) for "
                             f"{list(m.telemetry)}, got {tel.shape}")
        qt, qm, dqm, vs, en = (np.asarray(a, np.float32) for a in (q_target, q, dq, v_supply, enable))
        if self._hist is None:
            self._hist = initial_history(m, self._frame(m, qt, qm, dqm, vs, en, tel), None)
        eff, force, force_raw, contact, cond, self._hist = self._step(m, self._hist, qt, qm, dqm, vs, en, tel)
        force = np.asarray(force)
        if gate_weight(float(contact), self.soft_gate) == 0.0:
            force = np.zeros_like(force)
        return OnlineOutputs(effort=np.asarray(eff), force=force, force_raw=np.asarray(force_raw),
                             contact=float(contact), condition=np.asarray(cond))


def _online_step(m: LearnedArm, hist, q_target, q, dq, v_supply, enable, telemetry):
    tau, heads, hist = net_step(m, hist, q_target, q, dq, v_supply, enable, telemetry, jnp.float32)
    gate = jax.nn.sigmoid(heads.gate_logit)
    return (tau[np.asarray(m.channel_index)], gate * heads.force_raw, heads.force_raw, gate,
            jax.nn.sigmoid(heads.condition_logit), hist)
