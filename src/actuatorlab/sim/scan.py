"""The one-joint scan as a simulator backend: a bench robot rolled out by :func:`rollout_batch_state`.

:func:`rollout_scan` is ``backend="scan"`` of :func:`actuatorlab.sim.backends.rollout`: the same
:class:`~actuatorlab.sim.arm_step.ArmInputs` / :class:`~actuatorlab.sim.arm_step.ArmState` in and
:class:`~actuatorlab.sim.arm_step.ArmOutputs` out as the MuJoCo backends, computed by the
closed-form one-joint replay (:func:`actuatorlab.sim.rollout.rollout_batch_state`:
``jax.lax.scan`` of :func:`actuatorlab.models.actuator.make_step`) with the bench's plant
constants (:attr:`Robot.bench`, written by :func:`actuatorlab.robots.bench.bench_config`), the
robot's control law and law constants. No MuJoCo; jit-, vmap- and grad-able in the parameters.

Timing (``cfg``, :class:`~actuatorlab.sim.arm_step.ArmConfig`, target ``"hold"`` only): each
control step is ``r = substeps / law_every`` firmware periods of ``firmware_dt``; the scan runs on
the firmware grid (the command held over the control step, the law once per firmware period,
``law_every`` physics steps of ``physics_dt``) and its outputs are read at the start of every
control step. ``law_every == substeps`` (one law evaluation per control step, the one-joint fit's
own timing: ``ArmConfig.from_robot(robot, physics_dt=robot.control_dt, substeps=1, law_every=1)``)
is :func:`~actuatorlab.sim.rollout.rollout_batch` itself, bit for bit; otherwise the command is
delayed on the control grid first (linear interpolation between control samples, as the delay
line of the MuJoCo backends; not clipped to ``delay_steps``).

Frames: ``ArmState.qpos`` and ``ArmOutputs.q`` are the joint's MuJoCo coordinate, as on the other
backends (a pendulum's angle from hanging down); the firmware and the scan read the encoder
``q - q_offset`` (:mod:`actuatorlab.models.plant`), so ``q_offset = 0`` adds and subtracts
nothing.

Start: the scan starts from ``qpos``, ``qvel`` and ``temperature`` of ``state0`` only; the firmware
memory is rebuilt from the velocity (as the one-joint replay and
:func:`~actuatorlab.sim.arm.initial_state` do) and the delay line from the first command (the
other fields of ``state0`` are not read).

Fields the scan does not produce: ``ArmOutputs.current`` is NaN; ``qm``, ``dqm`` (outputs) are NaN
for a compliant joint (the scan records the output side only; the final state has them) and q, dq
for a rigid one; ``temperature`` of a joint without ``+thermal`` is the start temperature, as on
the other backends. The final state's ``u`` is the last firmware output, ``target_prev`` and
``target_filt`` the last delayed command, ``hist_target`` / ``hist_enable`` the last
``delay_steps`` commands (newest first, the first command repeated before the start).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ModelError
from ..models.actuator import Constants, StepConfig
from ..models.control import LawConstants
from ..models.plant import PlantConstants
from ..precision import physics
from ..robots.loader import Robot
from .arm_learned import LearnedArm
from .arm_step import ArmConfig, ArmInputs, ArmOutputs, ArmState
from .rollout import _delayed, rollout_batch_state

__all__ = ["rollout_scan"]


def _step_config(robot: Robot, cfg: ArmConfig) -> StepConfig:
    """The one-joint :class:`~actuatorlab.models.actuator.StepConfig` of bench robot ``robot`` at
    timing ``cfg`` (law, plant, transmission, thermal; ``law_every`` physics steps per law)."""
    if robot.n_joints != 1:
        raise ModelError(f"{robot.name}: the scan backend simulates one joint (a bench robot); this robot has "
                         f"{robot.n_joints} joints: use backend 'native' or 'mjx'")
    if not robot.bench:
        raise ModelError(f"{robot.name}: the scan backend needs a bench robot (plant constants 'bench' in its "
                         "config, robots/bench.py); use backend 'native' or 'mjx'")
    if cfg.target != "hold":
        raise ModelError(f"{robot.name}: the scan backend holds the command over a control step; target "
                         f"{cfg.target!r} needs backend 'native' or 'mjx'")
    j = robot.joints[0]
    return StepConfig(law=j.law, plant="pendulum" if j.joint_type == "revolute" else "carriage",
                      compliant=bool(robot.compliant[0]), substeps=cfg.law_every, thermal=bool(robot.thermal[0]))


def _constants(robot: Robot, cfg: ArmConfig, batch: int) -> Constants:
    """(B,) law and plant constants of the bench's joint, dt = the firmware period."""
    lc = robot.law_constants()._replace(dt=np.array([cfg.firmware_dt]))
    plant = dict(robot.bench)
    pc = PlantConstants(*[np.array([plant[k]]) for k in PlantConstants._fields])
    return Constants(LawConstants(*[np.broadcast_to(v, (batch,)) for v in lc]),
                     PlantConstants(*[np.broadcast_to(v, (batch,)) for v in pc]))


def _history(x, d: int):
    """(B, D) the last ``d`` samples of x (B, T), newest first, the first sample repeated before it."""
    pad = jnp.repeat(x[:, :1], max(d - x.shape[1], 0), axis=1)
    return jnp.concatenate([pad, x], axis=1)[:, ::-1][:, :d]


@physics
def rollout_scan(robot: Robot, params: Any, inputs: ArmInputs, state0: ArmState,
                 cfg: ArmConfig) -> tuple[ArmState, ArmOutputs]:
    """(final state, outputs (T, 1)) of bench robot ``robot`` (module docstring).

    params: one parameter set, name -> (1,) servo-side values (``robot.nominal_params()``);
    inputs (T, 1) or (B, T, 1) with state0 (nq,) or (B, nq) fields, as on the native backend."""
    if isinstance(params, LearnedArm):
        raise ModelError(f"{robot.name}: the scan backend runs analytic models; a learned whole-robot model "
                         "runs on 'native' or 'mjx', a one-joint learned one through actuatorlab.learned.joint")
    scfg = _step_config(robot, cfg)
    p = {k: v[..., 0] for k, v in robot.joint_params(params, xp=jnp).items()}
    if any(jnp.ndim(v) for v in p.values()):
        raise ModelError(f"{robot.name}: the scan backend takes one parameter set (name -> (1,)), not a batch")
    batched = jnp.ndim(inputs.q_target) == 3
    raw_qt, raw_en, vs = (jnp.asarray(v, float)[..., 0].reshape(-1, jnp.shape(v)[-2]) for v in inputs)
    B, T = raw_qt.shape
    qadr, dadr = int(robot.qpos_adr[0]), int(robot.dof_adr[0])
    off = p["q_offset"]
    q0 = jnp.broadcast_to(jnp.asarray(state0.qpos, float)[..., qadr] - off, (B,))
    dq0 = jnp.broadcast_to(jnp.asarray(state0.qvel, float)[..., dadr], (B,))
    temp0 = jnp.broadcast_to(jnp.asarray(state0.temperature, float)[..., 0], (B,))
    r = cfg.substeps // cfg.law_every
    dl = jax.vmap(lambda x: _delayed(x, p["delay"], cfg.control_dt))
    qt_d, qt, en = dl(raw_qt), raw_qt, raw_en
    if r > 1:  # delayed on the control grid, then held over its r firmware periods
        qt, en, vs = (jnp.repeat(x, r, axis=1) for x in (qt_d, dl(raw_en), vs))
        p = dict(p, delay=jnp.zeros_like(p["delay"]))
    arrays = dict(q_target=qt, enable=en, v_supply=vs, q_meas=jnp.broadcast_to(q0[:, None], qt.shape),
                  dq_meas=jnp.broadcast_to(dq0[:, None], qt.shape), consts=_constants(robot, cfg, B),
                  temperature0=temp0 if scfg.thermal else jnp.full((B,), jnp.nan))
    fin, out = rollout_batch_state(scfg, p, arrays)
    temp = out.temperature[:, ::r] if scfg.thermal else jnp.broadcast_to(temp0[:, None], (B, T))
    q = out.q[:, ::r] + off
    dq = out.dq[:, ::r]
    nan = jnp.full_like(q, jnp.nan)
    outs = ArmOutputs(q, dq, out.u[:, ::r], out.tau_motor[:, ::r], out.tau_friction[:, ::r], out.tau_ext[:, ::r],
                      q, dq, nan if scfg.compliant else q, nan if scfg.compliant else dq, temp, nan)
    d = cfg.delay_steps
    state = ArmState(fin.q + off, fin.dq, fin.q_prev, fin.q_prev2, out.u[:, -1], qt_d[:, -1], qt_d[:, -1],
                     _history(raw_qt, d), _history(raw_en, d), fin.qm + off, fin.dqm,
                     fin.temperature if scfg.thermal else temp0)
    outs = ArmOutputs(*[v[..., None] for v in outs])
    state = ArmState(*[v[..., None] for v in state])
    if not batched:
        outs, state = ArmOutputs(*[v[0] for v in outs]), ArmState(*[v[0] for v in state])
    return state, outs
