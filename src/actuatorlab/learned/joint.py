"""Learned and residual actuators for ONE joint, in the one-joint replay of :mod:`actuatorlab.sim.rollout`.

Two kinds (after Dou et al., "NeuralActuator", RSS 2026, for the learned effort; Hwangbo et al.,
"Learning agile and dynamic motor skills for legged robots", Science Robotics 2019, for the
actuator net on a history of states and commands):

* ``learned``: the network's effort replaces the whole actuator (firmware + motor + friction); the
  bench's rigid body stays physics::

      x_k    = normalize(frames k-H .. k)              frames: logged commands, simulated q, dq
      tau_k  = clip(s * net(x_k).torque, -b, b)        [N.m | N], s = effort_scale, b = effort_bound
      I      = I_load + armature,  tau_e = plant(q_k)  (gravity, bias; sim.plant)
      dq_k+1 = dq_k + dt (tau_k + tau_e) / I           semi-implicit Euler
      q_k+1  = q_k + dt dq_k+1

* ``residual``: a fitted analytic model (:func:`actuatorlab.models.actuator.make_step`) plus a
  learned correction added to the drive's effort (``Inputs.tau_extra``), before friction::

      tau_m = drive(u(q_target(t - delay), q_k, ...), dq) + clip(s * net(x_k).torque, -b, b)

Causality: the frame of step k holds the *logged* command/telemetry sample of step k (zero-order
hold of the last sample at or before the grid time, :func:`~actuatorlab.sim.rollout.log_arrays`)
and the *simulated* q_k, dq_k; the history buffer is carried in the ``lax.scan`` state, so no
future sample can reach the present. A window restarted at k0 (training, one-step prediction)
starts from the measured state at k0, and its history buffer holds the measured frames before k0.

Precision: the physics (state, plant, analytic step) runs in the dtype of the log arrays (float64
in the project's replay); the network runs in float32 (inputs cast after normalization, output
cast back).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ModelError
from ..models.features import FeatureLayout, Normalizer, assemble_frame
from ..models.actuator import Constants, Inputs, Outputs, State, StepConfig, make_step
from ..models.plant import carriage, pendulum
from ..sim.rollout import _delayed

__all__ = ["JOINT_FEATURES", "KINDS", "JointModel", "Window", "LogSet", "frame", "effort",
           "simulate", "log_set", "windows", "rollout_logs", "replay_mae", "onestep_logs", "window_loss", "analytic_effort",
           "measured_windows"]

#: per-channel features of a one-joint frame, in layout order: logged command q_target [rad|m],
#: simulated q [rad|m] and dq [rad/s|m/s], tracking error q_target - q [rad|m], the firmware
#: gain kp [firmware units] of the log, supply voltage [V], torque enable [0/1]
JOINT_FEATURES = ("q_target", "q", "dq", "err", "kp", "voltage", "enable")
KINDS = ("learned", "residual")


class JointModel(eqx.Module):
    """A learned (or residual) one-joint actuator: the network plus what it needs to be replayed.

    Fields:
        net: equinox network, ``net(x (history+1, n_features) float32) -> Heads`` (``.torque``
            (1,) normalized effort); trained (its torque head and trunk, :func:`trainable`).
        norm: :class:`~actuatorlab.models.features.Normalizer` of the frames (fitted on
            training frames only).
        params: physics parameters {name: scalar} (float64): the fitted analytic model's for
            ``residual``; for ``learned`` the bench's ``armature`` [kg.m^2|kg], ``q_offset``,
            ``force_offset`` (plant terms). Never trained.
        kind: "learned" | "residual" (static).
        cfg: StepConfig of the analytic model (residual) or of the bench (law, plant) (static).
        layout: :class:`~actuatorlab.models.features.FeatureLayout`, one channel, per-channel
            features from :data:`JOINT_FEATURES` (static).
        effort_scale: [N.m|N] effort of a unit network output (static).
        effort_bound: [N.m|N] the effort (learned) or correction (residual) is clipped to
            [-effort_bound, effort_bound] (static).
    """

    net: Any
    norm: Normalizer
    params: dict
    kind: str = eqx.field(static=True)
    cfg: StepConfig = eqx.field(static=True)
    layout: FeatureLayout = eqx.field(static=True)
    effort_scale: float = eqx.field(static=True)
    effort_bound: float = eqx.field(static=True)

    def __check_init__(self):
        if self.kind not in KINDS:
            raise ModelError(f"unknown learned-model kind {self.kind!r}; available: {', '.join(KINDS)}")
        unknown = [f for f in self.layout.per_channel if f not in JOINT_FEATURES]
        if unknown or self.layout.global_features or self.layout.n_channels != 1:
            raise ModelError(f"a one-joint layout has one channel, no global features and per-channel "
                             f"features from {', '.join(JOINT_FEATURES)}; got {self.layout.to_dict()}")

    @property
    def history(self) -> int:
        return self.layout.history


def trainable(model: JointModel):
    """filter_spec for :func:`actuatorlab.learned.trainer.train`: the network's float arrays,
    except the force / gate / condition heads that a one-joint rollout does not use."""
    spec = jax.tree.map(lambda _: False, model)
    net_spec = jax.tree.map(eqx.is_inexact_array, model.net)
    heads = getattr(model.net, "heads", None)
    if heads is not None:
        net_spec = eqx.tree_at(lambda n: (n.heads.force, n.heads.gate, n.heads.condition), net_spec,
                               replace=tuple(jax.tree.map(lambda _: False, getattr(heads, h))
                                             for h in ("force", "gate", "condition")))
    return eqx.tree_at(lambda m: m.net, spec, replace=net_spec)


class Window(NamedTuple):
    """One replay window (leaves gain a leading axis when batched).

    consts: Constants of the log (scalars); qt, en, vs (N,) logged q_target [rad|m], enable,
    supply voltage [V] from k0 on; qt_d, en_d (N,) the same delayed by the analytic model's delay
    (residual; equal to qt, en for learned); ctx (history+1, n_features) measured frames
    k0-history-1 .. k0-1 (index clipped at 0); q0, dq0 measured state at k0; q_prev, q_prev2
    measured positions at k0-1, k0-2 (reconstructed from dq0 before the log starts);
    q_meas (N,) measured positions (targets); mask (N,) bool.
    """

    consts: Constants
    qt: jax.Array
    en: jax.Array
    vs: jax.Array
    qt_d: jax.Array
    en_d: jax.Array
    ctx: jax.Array
    q0: jax.Array
    dq0: jax.Array
    q_prev: jax.Array
    q_prev2: jax.Array
    q_meas: jax.Array
    mask: jax.Array


def frame(layout: FeatureLayout, consts: Constants, qt, en, vs, q, dq):
    """One float32 frame (n_features,) in layout order from scalars (or (N,) arrays ->
    (N, n_features)): logged qt, en, vs, the log's kp, and the (simulated or measured) q, dq."""
    vals = {"q_target": qt, "q": q, "dq": dq, "err": qt - q, "kp": consts.law.kp + 0.0 * q,
            "voltage": vs, "enable": en}
    return assemble_frame(layout, {f: jnp.asarray(vals[f])[..., None] for f in layout.per_channel})


def effort(model: JointModel, buf, dtype):
    """Effort [N.m|N] (learned) or correction (residual) from a float32 history buffer
    (history+1, n_features), clipped to +-effort_bound, returned as ``dtype``."""
    tau = model.effort_scale * model.net(model.norm.apply(buf)).torque[0]
    return jnp.clip(tau, -model.effort_bound, model.effort_bound).astype(dtype)


def simulate(model: JointModel, w: Window) -> Outputs:
    """Closed-loop replay of one window from its measured initial state; ``Outputs`` leaves (N,),
    ``q[0] = q0``. For ``learned``, ``u = tau_motor`` is the network's effort and
    ``tau_friction = 0`` (friction is inside the learned effort)."""
    c = w.consts
    dt = c.law.dt
    q0 = jnp.asarray(w.q0)
    buf0 = w.ctx.astype(jnp.float32)
    if model.kind == "learned":
        plant_fn = pendulum if model.cfg.plant == "pendulum" else carriage
        p = model.params

        stateful = hasattr(model.net, "step")  # a recurrent state carried between steps (actuator_lstm)

        def body(carry, x):
            q, dq, mem = carry
            qt, en, vs = x
            f = frame(model.layout, c, qt, en, vs, q, dq)
            if stateful:
                mem, t = model.net.step(mem, model.norm.apply(f))
                tau = jnp.clip(model.effort_scale * t[0], -model.effort_bound, model.effort_bound).astype(q.dtype)
            else:
                mem = jnp.concatenate([mem[1:], f[None]], axis=0)
                tau = effort(model, mem, q.dtype)
            I_load, tau_e = plant_fn(c.plant, p, q)
            dq1 = dq + dt * (tau + tau_e) / (I_load + p["armature"])
            return (q + dt * dq1, dq1, mem), Outputs(q, dq, tau, tau, tau_e, jnp.zeros_like(tau))

        # a stateful network starts every window from its zero state, as Isaac Lab resets it
        mem0 = model.net.init_state() if stateful else buf0
        _, out = jax.lax.scan(body, (q0, jnp.asarray(w.dq0, q0.dtype), mem0), (w.qt, w.en, w.vs))
        return out

    step = make_step(model.cfg)
    p = model.params

    def step_body(carry, x):
        s, buf = carry
        qt, en, vs, qt_d, en_d = x
        buf = jnp.concatenate([buf[1:], frame(model.layout, c, qt, en, vs, s.q, s.dq)[None]], axis=0)
        s, out = step(p, c, s, Inputs(qt_d, en_d, vs, effort(model, buf, s.q.dtype)))
        return (s, buf), out

    s0 = State(q0, w.dq0, q0, w.dq0, w.q_prev, w.q_prev2)
    _, out = jax.lax.scan(step_body, (s0, buf0), (w.qt, w.en, w.vs, w.qt_d, w.en_d))
    return out


class LogSet(NamedTuple):
    """Whole logs of one :class:`~actuatorlab.sim.rollout.Batch` prepared for a model: leaves
    (B, T) (consts (B,)); the delayed command for the residual's analytic model is precomputed."""

    consts: Constants
    qt: jax.Array
    en: jax.Array
    vs: jax.Array
    qt_d: jax.Array
    en_d: jax.Array
    q_meas: jax.Array
    dq_meas: jax.Array
    mask: jax.Array


def log_set(model: JointModel, batch) -> LogSet:
    """Arrays of a :class:`~actuatorlab.sim.rollout.Batch` for :func:`windows`."""
    if batch.law != model.cfg.law or batch.plant != model.cfg.plant:
        raise ModelError(f"the model was trained on {model.cfg.law}/{model.cfg.plant} logs; these are "
                         f"{batch.law}/{batch.plant}")
    a = {k: jnp.asarray(v) for k, v in batch.arrays().items() if k != "consts"}
    consts = jax.tree.map(jnp.asarray, batch.consts)
    if model.kind == "residual":
        delay = model.params["delay"]
        dl = jax.vmap(lambda x, dt: _delayed(x, delay, dt))
        qt_d, en_d = dl(a["q_target"], consts.law.dt), dl(a["enable"], consts.law.dt)
    else:
        qt_d, en_d = a["q_target"], a["enable"]
    return LogSet(consts, a["q_target"], a["enable"], a["v_supply"], qt_d, en_d, a["q_meas"],
                  a["dq_meas"], jnp.asarray(batch.mask))


@partial(jax.jit, static_argnames=("layout", "horizon"))
def _windows(layout, horizon, logs: LogSet, idx, k0) -> Window:
    history = layout.history
    T = logs.qt.shape[1]

    def one(i, k):
        c = jax.tree.map(lambda x: x[i], logs.consts)
        ks = jnp.clip(k + jnp.arange(horizon), 0, T - 1)
        valid = (k + jnp.arange(horizon) < T) & logs.mask[i, ks]
        kc = jnp.clip(k - history - 1 + jnp.arange(history + 1), 0, T - 1)
        ctx = frame(layout, c, logs.qt[i, kc], logs.en[i, kc], logs.vs[i, kc], logs.q_meas[i, kc],
                    logs.dq_meas[i, kc])
        q0, dq0 = logs.q_meas[i, k], logs.dq_meas[i, k]
        dt = c.law.dt
        qp1 = jnp.where(k >= 1, logs.q_meas[i, jnp.maximum(k - 1, 0)], q0 - dq0 * dt)
        qp2 = jnp.where(k >= 2, logs.q_meas[i, jnp.maximum(k - 2, 0)], qp1 - dq0 * dt)
        return Window(c, logs.qt[i, ks], logs.en[i, ks], logs.vs[i, ks], logs.qt_d[i, ks], logs.en_d[i, ks],
                      ctx, q0, dq0, qp1, qp2, logs.q_meas[i, ks], valid)

    return jax.vmap(one)(idx, k0)


def windows(model: JointModel, logs: LogSet, idx, k0, horizon: int) -> Window:
    """Windows of ``horizon`` steps starting at step ``k0`` (W,) of log ``idx`` (W,)."""
    return _windows(model.layout, int(horizon), logs, jnp.asarray(idx, jnp.int32),
                    jnp.asarray(k0, jnp.int32))


@eqx.filter_jit
def _simulate_batch(model, w):
    return jax.vmap(lambda wi: simulate(model, wi))(w)


def rollout_logs(model: JointModel, logs: LogSet) -> Outputs:
    """Full closed-loop replay of every log from its measured initial state; leaves (B, T)."""
    B, T = logs.qt.shape
    w = windows(model, logs, np.arange(B), np.zeros(B, np.int32), T)
    return _simulate_batch(model, w)


def replay_mae(model: JointModel, log_sets) -> float:
    """Mean absolute position error [rad | m] of the full closed-loop replays (:func:`rollout_logs`)
    over every valid sample of ``log_sets`` (a sequence of :class:`LogSet`): the one-joint
    validation criterion."""
    num = den = 0.0
    for ls in log_sets:
        e = np.abs(np.asarray(rollout_logs(model, ls).q) - np.asarray(ls.q_meas))[np.asarray(ls.mask)]
        num, den = num + float(np.sum(e)), den + e.size
    return num / max(den, 1)


def onestep_logs(model: JointModel, logs: LogSet) -> jax.Array:
    """One-step-ahead prediction q_pred[k+1] from every measured state (and measured history);
    (B, T) with q_pred[:, 0] = q_meas[:, 0]."""
    B, T = logs.qt.shape
    idx = np.repeat(np.arange(B), T - 1)
    k0 = np.tile(np.arange(T - 1), B)
    out = _simulate_batch(model, windows(model, logs, idx, k0, 2))
    q1 = out.q[:, 1].reshape(B, T - 1)
    return jnp.concatenate([logs.q_meas[:, :1], q1], axis=1)


def window_loss(model: JointModel, w: Window, delta: float = 0.05):
    """Huber loss (``delta`` [rad|m], divided by delta) of simulated vs measured positions over a
    batch of windows (leaves (W, N)), valid samples only; returns (loss, {"mae": ...})."""
    out = jax.vmap(lambda wi: simulate(model, wi))(w)
    e = out.q - w.q_meas
    m = w.mask.astype(e.dtype)
    a = jnp.abs(e)
    hub = jnp.where(a < delta, 0.5 * e**2, delta * (a - 0.5 * delta)) / delta
    n = jnp.maximum(m.sum(), 1.0)
    return (hub * m).sum() / n, {"mae": (a * m).sum() / n}


@partial(jax.jit, static_argnames=("cfg",))
def analytic_effort(cfg: StepConfig, params: dict, logs: LogSet) -> jax.Array:
    """(B, T) [N.m|N] effort an analytic model (``cfg``, ``params``) applies to the joint at every
    measured frame of ``logs``, teacher-forced: one control period restarted from the measured q,
    dq (q_prev, q_prev2 the measured positions before, reconstructed from dq before the log starts,
    as :func:`windows`), the command delayed by the model's own ``delay``; the effort of its first
    physics step, drive + friction (the effort a ``learned`` model's network replaces). A
    ``+thermal`` model needs the winding temperature, which a frame does not carry: give ``cfg``
    without thermal (the resistance at 25 degC)."""
    step = make_step(cfg)
    dt = jnp.asarray(logs.consts.law.dt)  # (B,)
    dl = jax.vmap(lambda x, d: _delayed(x, params["delay"], d))
    qt_d, en_d = dl(logs.qt, dt), dl(logs.en, dt)
    q, dq = logs.q_meas, logs.dq_meas
    qp1 = jnp.concatenate([q[:, :1] - dq[:, :1] * dt[:, None], q[:, :-1]], axis=1)
    qp2 = jnp.concatenate([qp1[:, :1] - dq[:, :1] * dt[:, None], qp1[:, :-1]], axis=1)

    def one(c, qt, en, vs, qk, dqk, a, b):
        _, out = step(params, c, State(qk, dqk, qk, dqk, a, b), Inputs(qt, en, vs, None))
        return out.tau_motor + out.tau_friction

    per_log = jax.vmap(one, in_axes=(None, 0, 0, 0, 0, 0, 0, 0))
    return jax.vmap(per_log)(logs.consts, qt_d, en_d, logs.vs, q, dq, qp1, qp2)


@partial(jax.jit, static_argnames=("layout",))
def measured_windows(layout: FeatureLayout, logs: LogSet) -> jax.Array:
    """(B, T, history+1, n_features) float32: the raw frames the network reads at every measured
    state of ``logs`` (frames k-history .. k, index clipped at 0; the window :func:`simulate`
    gives the network at step k of a window restarted at k)."""
    H = layout.history
    f = jax.vmap(jax.vmap(lambda c, qt, en, vs, q, dq: frame(layout, c, qt, en, vs, q, dq),
                          in_axes=(None, 0, 0, 0, 0, 0)))(logs.consts, logs.qt, logs.en, logs.vs, logs.q_meas,
                                                          logs.dq_meas)
    T = f.shape[1]
    idx = jnp.clip(jnp.arange(T)[:, None] + jnp.arange(-H, 1)[None, :], 0, T - 1)  # (T, H+1)
    return f[:, idx]
