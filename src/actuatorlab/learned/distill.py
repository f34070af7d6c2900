"""Warm start of a learned actuator: distillation of an analytic teacher on measured frames.

Before a network is trained through the simulator it learns, teacher-forced and without the
simulator, to reproduce the effort of a fitted analytic model (the teacher) at the log's measured
states. The data are (window, target) pairs: the causal window of raw measured frames the
network reads at control step k (:func:`~actuatorlab.models.features.sliding_windows`) and the
effort the teacher applies at that step, in the network's own output units::

    replacing : y_kc = tau_teacher_kc / s_c                (the network gives the whole effort)
    residual  : y_kc = (tau_teacher_kc - tau_base_kc) / s_c (the network corrects its base model)
    J_distill = mean_{k,c} m_kc (net(normalize(window_k)).torque_c - clip(y_kc, -E_c/s_c, E_c/s_c))^2

with s_c the channel's effort scale, E_c its effort limit and m_kc the weight (0 on padding).
:func:`distill` knows nothing of robots: any network ``torque_fn(params, window) -> (C,)`` and any
(windows, targets) pairs: the one training algorithm (:func:`actuatorlab.learned.learn.learn`)
calls it with a robot's frames and with a bench's.

:func:`teacher_effort` gives the teacher's effort of a whole robot at every measured frame: one
native rollout step (:func:`~actuatorlab.sim.arm_native.rollout_native`) restarted from the measured
state of each frame (:func:`~actuatorlab.sim.arm_windows.make_windows`, windows of one control
step: measured q, dq, the firmware memory and the delay line rebuilt from the log), the effort the
actuator model writes to the joint at the first physics step of the control step (motor +
friction - force offset). The simulator's later substeps are not used: no rollout error enters the
target.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..errors import DataError
from ..robots.loader import Robot
from ..sim.arm import ArmConfig, ArmInputs
from ..sim.arm_native import rollout_native
from ..sim.arm_windows import make_windows

__all__ = ["DistillConfig", "teacher_effort", "distill"]


@dataclasses.dataclass(frozen=True)
class DistillConfig:
    """Settings of :func:`distill`.

    Fields:
        steps: Adam steps [-] (default 300; 0 = no distillation).
        batch: windows per step [-] (default 256).
        lr: peak learning rate, cosine decay to 5 % (default 1e-3).
        seed: seed of the minibatches and of the state noise [-] (default 0).
        copies: noisy copies of every log besides the clean one [-] (default 2), for the data
            builders (:func:`~actuatorlab.learned.arm_train.distill_targets`,
            :func:`~actuatorlab.learned.joint_train.distill_targets`): the teacher is queried
            at states near the measured ones, where the student's own closed loop will take it.
        noise: std of the state noise, per joint, relative to the log's std of q and of dq [-]
            (default 0.05).
        envelope: synthetic logs per training log [-] (default 0: none; one joint only,
            :func:`~actuatorlab.learned.joint_train.envelope_logs`): random commands within the
            range of the training logs' commands, at their gains and benches, and the teacher's own
            closed-loop rollout as the state, so that the network learns the teacher outside the
            logged frames too (the robot path ignores it).
    """

    steps: int = 300
    batch: int = 256
    lr: float = 1e-3
    seed: int = 0
    copies: int = 2
    noise: float = 0.05
    envelope: int = 0


def teacher_effort(robot: Robot, params, q_meas, dq_meas, inputs: ArmInputs, cfg: ArmConfig | None = None,
                   temperature=None, model=None) -> np.ndarray:
    """(T, n) [N.m | N] effort the analytic model ``params`` (parameter sets) applies to each joint
    at each measured frame of one log (arrays (T, n), robot joint order), teacher-forced (module
    docstring). ``model``: the teacher's :func:`~actuatorlab.sim.arm_native.native_model` to reuse
    over many logs (built once: the native backend keeps a pool of MjData per model it is given)."""
    cfg = cfg or ArmConfig.from_robot(robot)
    q_meas = np.asarray(q_meas, float)
    if q_meas.ndim != 2 or q_meas.shape[0] < 1:
        raise DataError(None, f"teacher_effort: q_meas must be (T, {robot.n_joints}), got {q_meas.shape}")
    w = make_windows(robot, q_meas, dq_meas, inputs, 1, stride=1, cfg=cfg, temperature=temperature)
    _, out = rollout_native(robot, params, w.inputs, w.state0, cfg, model=model)
    off = np.asarray(robot.joint_params(params)["force_offset"], float)
    tau = (np.asarray(out.tau_motor) + np.asarray(out.tau_friction))[:, 0] - off
    T = q_meas.shape[0]
    full = np.empty((T, robot.n_joints))
    full[w.start] = tau
    if len(w.start) < T:  # a one-frame log has one window; make_windows stops one frame short otherwise
        full[len(w.start):] = tau[-1]
    return full


def distill(params, torque_fn: Callable[[Any, jax.Array], jax.Array], windows, target, weight=None,
            cfg: DistillConfig = DistillConfig(), filter_spec=eqx.is_inexact_array) -> tuple[Any, dict]:
    """Fit ``torque_fn(params, window) -> (C,)`` to ``target`` (N, C) on ``windows`` (N, H+1, F) by
    mean squared error (``weight`` (N, C), default 1), training the leaves of ``params`` that
    ``filter_spec`` selects. Returns (params, info): info holds the weighted MSE before and after
    and the fraction of the target's variance explained (``r2``) after."""
    x = jnp.asarray(windows, jnp.float32)
    y = jnp.asarray(target, jnp.float32)
    wt = jnp.ones_like(y) if weight is None else jnp.asarray(weight, jnp.float32)
    if x.shape[0] != y.shape[0] or wt.shape != y.shape:
        raise DataError(None, f"distill: {x.shape[0]} windows, targets {y.shape}, weights {wt.shape}")
    diff, static = eqx.partition(params, filter_spec)
    sched = optax.cosine_decay_schedule(cfg.lr, max(cfg.steps, 1), alpha=0.05)
    opt = optax.adam(sched)
    ost = opt.init(diff)

    def mse(d, xb, yb, wb):
        pred = jax.vmap(lambda w: torque_fn(eqx.combine(d, static), w))(xb).astype(jnp.float32)
        return jnp.sum(wb * (pred - yb) ** 2) / jnp.maximum(jnp.sum(wb), 1.0)

    @eqx.filter_jit
    def step(d, o, xb, yb, wb):
        loss, g = eqx.filter_value_and_grad(mse)(d, xb, yb, wb)
        up, o = opt.update(g, o, d)
        return eqx.apply_updates(d, up), o, loss

    score = eqx.filter_jit(mse)

    def full_mse(d) -> float:
        n, c = 0.0, 0.0
        for i in range(0, x.shape[0], 4096):
            s = slice(i, i + 4096)
            k = float(jnp.sum(wt[s]))
            n += float(score(d, x[s], y[s], wt[s])) * max(k, 1.0)
            c += k
        return n / max(c, 1.0)

    before = full_mse(diff)
    rng = np.random.default_rng(cfg.seed)
    N, B = int(x.shape[0]), min(int(cfg.batch), int(x.shape[0]))
    for _ in range(int(cfg.steps)):
        idx = rng.choice(N, size=B, replace=False)
        diff, ost, _ = step(diff, ost, x[idx], y[idx], wt[idx])
    after = full_mse(diff) if cfg.steps else before
    var = float(jnp.sum(wt * (y - jnp.sum(wt * y, 0) / jnp.maximum(jnp.sum(wt, 0), 1.0)) ** 2)
                / jnp.maximum(jnp.sum(wt), 1.0))
    return eqx.combine(diff, static), {"mse_before": before, "mse_after": after, "steps": int(cfg.steps),
                                       "windows": N, "r2": 1.0 - after / var if var > 0 else None}
