"""Whole-robot rollouts with an actuatorlab actuator model on every listed joint (MJX path).

A :class:`~actuatorlab.robots.Robot` names, per joint, a firmware law, a DC motor (or ideal torque
source), a transmission and a friction model. The joint torque is computed here from the *same*
pure functions as the one-joint model (:mod:`actuatorlab.models`: control laws, ``drive_effort``,
``friction_budget``, ``stick_slip_torque``, ``transmission_coupling``) and applied to MuJoCo as
``qfrc_applied``; MuJoCo does the multibody dynamics (gravity, Coriolis, coupling, constraints).
Two paths share the equations and this module's types:

* :func:`make_mjx_rollout` (this module): MJX, ``jax.lax.scan``; jit-, vmap- and grad-able with
  respect to actuator parameters, per-step inputs and MJX model fields (link masses, ...);
* :func:`actuatorlab.sim.arm_native.rollout_native`: native MuJoCo (``mj_step1``/``mj_step2``)
  with a NumPy twin of the same functions: fastest, no gradients.

Timing per control step k (period ``control_dt = substeps * physics_dt``)::

    delay line   q*_k = target delayed by ``delay`` (linear interpolation between control samples)
    physics step s = 0 .. substeps-1 (h = physics_dt):
      MuJoCo position/velocity stage at (qpos, qvel): M, qfrc_bias, qfrc_passive
      firmware tick (s % law_every == 0, period firmware_dt = law_every h):
        target  q_t = q*_k (hold) | q*_{k-1} + (q*_k - q*_{k-1}) min(1, (s + law_every)/substeps)
                (linear) | q_f += (1 - exp(-firmware_dt/target_tau)) (q*_k - q_f) (filter)
        u = law(q_t, q_meas, q_prev, q_prev2, dq, V)     q_meas = q - q_offset; u held to next tick
      tau_m  = drive_effort(u, dq_m, enable)             DC motor: kt (clip((u - kt dq_m)/R)), ...
      tau_m  = clip(tau_m, lo, hi)                       effort bounds, below (at dq_m)
      tau_e  = qfrc_passive - qfrc_bias - force_offset   external effort seen by the joint
      rigid joint (dq_m = dq; one body, rotor in MuJoCo's armature):
        I      = M[i, i]                                 effective inertia (rotor included)
        tau_f  = stick_slip(I, dq, tau_m + tau_e, F(tau_m, tau_e, dq, armature / I), h)
        qfrc_applied[i] = tau_m + tau_f - force_offset
      compliant joint (``+backlash``, ``+compliance``; rotor q_m, dq_m with J = armature is a
      body of its own, MuJoCo's armature of the joint is 0):
        I_load = 1 / (M^-1)[i, i]                        output-side inertia, see below
        J_eff  = J I_load / (J + I_load)
        tau_c  = transmission_coupling(p, q_m, dq_m, q, dq, J_eff, h)   dead zone + spring-damper
        tau_f  = stick_slip(J, dq_m, tau_m - tau_c, F(tau_m, -tau_c, dq_m), h)   motor side
        dq_m'  = dq_m + h (tau_m - tau_c + tau_f) / J;   q_m' = q_m + h dq_m'
        qfrc_applied[i] = tau_c - force_offset
      winding temperature (``+thermal`` joints, voltage drives; T [degC] carried in ArmState):
        R_T    = R (1 + alpha (T - 25))                  R(T), used by the motor law above
        i      = enable clip((u - kt dq_m) / R_T, +-current_limit)
        T'     = T + h (i^2 R_T - (T - T_amb) / R_th) / C_th
      MuJoCo acceleration + Euler step

The firmware always reads the output side (the joint), as the one-joint model does. The coupling
(:func:`~actuatorlab.models.actuator.transmission_coupling`) is the one-joint model's: a dead zone
of width ``backlash`` and a spring-damper beyond it, its stiffness capped at 0.25 J_eff / h^2 so
the explicit step stays stable. I_load is 1 / (M^-1)[i, i], the inertia the joint presents to an
effort applied on it alone, rather than M[i, i]: a joint's effort also accelerates the links it
is coupled to, and a cap computed from M[i, i] (up to 4x larger on the OpenManipulator-X wrist)
let a stiff, backlash-free chain diverge in a few steps. The motor-side state is part of
:class:`ArmState`; :func:`initial_state` starts it at the joint's position and velocity (middle
of the dead band, spring relaxed).

Effort bounds: voltage and current drives ``|tau_m| <= effort_limit``; effort drives (``pd``)
also the DC-motor envelope of Isaac Lab's ``DCMotor`` actuator,
``hi = clip(S (1 - dq_m / v_max), 0, E)``, ``lo = clip(S (-1 - dq_m / v_max), -E, 0)``
(S saturation effort, E effort limit, v_max velocity limit). A rigid joint's armature parameter
is written into MuJoCo's ``dof_armature``, so the rotor inertia is part of the multibody mass
matrix and of M[i, i]; damping and dry friction of modelled joints are zeroed in the MJCF (the
model supplies them). The friction uses the diagonal of M only (each joint sees its own effective
inertia; coupling through off-diagonal terms and constraint forces is not in the stick/slip
test), after Duclusaud et al., "Extended Friction Models for the Physics Simulation of Servo
Actuators", ICRA 2025, who apply the same budget per joint in MuJoCo.

Winding temperature (``+thermal``): the lumped first-order model of
:func:`~actuatorlab.models.motor.winding_temperature_step` (I^2 R heating, cooling through R_th to
the ambient) with R(T) from :func:`~actuatorlab.models.motor.winding_resistance` (copper tempco
about 25 degC). Only joints whose model has ``+thermal`` (:attr:`Robot.thermal`, a static mask
like the compliant one) use R(T) and move their temperature; every other joint's temperature stays
where it started and its equations are untouched, so a robot without ``+thermal`` rolls out
bit-identically to one that never heard of temperature. ``+thermal`` needs a voltage drive.

Outputs are recorded at the start of each control period (like :class:`~actuatorlab.models.
actuator.Outputs`): joint q, dq, motor side q_m, dq_m, winding temperature, and the first
substep's u, tau_motor, tau_friction (motor side for a compliant joint), tau_ext and motor current.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from ..precision import physics, physics_fn
from ..errors import ModelError
from ..models.actuator import drive_effort, effective_inertia, transmission_coupling
from ..models.control import CONTROL_LAWS, LawConstants
from ..models.friction import friction_budget, stick_slip_torque
from ..models.motor import dc_motor_current, winding_resistance, winding_temperature_step
from ..robots.loader import Robot
from .arm_learned import combine_effort, frame, initial_history, LearnedArm, net_step, telemetry_or_empty

__all__ = ["ArmConfig", "ArmInputs", "ArmState", "ArmOutputs", "Kit", "JAX_KIT", "make_inputs",
           "initial_state", "make_mjx_rollout", "mjx_model", "mujoco_armature", "position_loss"]


@dataclass(frozen=True)
class ArmConfig:
    """Static timing of a rollout (compile-time).

    physics_dt [s] MuJoCo step; substeps: physics steps per control step (per input sample);
    law_every: physics steps per firmware-law evaluation (divides substeps); target: "hold" |
    "linear" | "filter" (target between control steps, see the module docstring); target_tau [s]
    filter time constant; delay_steps: length of the delay line in control steps (the largest
    delay it represents is (delay_steps - 1) * control_dt; longer delays are clipped to it).
    """

    physics_dt: float
    substeps: int
    law_every: int
    target: str = "hold"
    target_tau: float = 0.01
    delay_steps: int = 1

    @property
    def control_dt(self) -> float:
        return self.substeps * self.physics_dt

    @property
    def firmware_dt(self) -> float:
        return self.law_every * self.physics_dt

    @classmethod
    def from_robot(cls, robot: Robot, **overrides: Any) -> "ArmConfig":
        """The robot's own timing; ``overrides`` replace fields (e.g. ``substeps=1``)."""
        cfg = cls(robot.physics_dt, robot.substeps, robot.law_every, robot.target, robot.target_tau,
                  robot.delay_steps)
        cfg = dataclasses.replace(cfg, **overrides)
        if cfg.substeps < 1 or cfg.law_every < 1 or cfg.substeps % cfg.law_every:
            raise ModelError(f"ArmConfig: law_every ({cfg.law_every}) must divide substeps ({cfg.substeps})")
        if cfg.target not in ("hold", "linear", "filter"):
            raise ModelError(f"ArmConfig: target must be hold, linear or filter, got {cfg.target!r}")
        if cfg.delay_steps < 1:
            raise ModelError("ArmConfig: delay_steps must be >= 1")
        return cfg


class ArmInputs(NamedTuple):
    """Per control step, per joint (robot joint order): q_target [rad | m] (T, n) the host's
    command, enable [1 on / 0 free] (T, n), v_supply [V] (T, n). A leading batch axis is allowed."""

    q_target: Any
    enable: Any
    v_supply: Any


class ArmState(NamedTuple):
    """Rollout state between control steps.

    qpos (nq,), qvel (nv,): MuJoCo state; q_prev, q_prev2 (n,) [rad | m]: positions the firmware
    measured at its last two ticks; u (n,) [V | N.m]: held firmware output; target_prev (n,): the
    previous control step's delayed target ("linear"); target_filt (n,): filtered target
    ("filter"); hist_target, hist_enable (D, n): last D raw inputs, newest first (delay line);
    qm, dqm (n,) [rad | m], [rad/s | m/s]: motor side of each joint's transmission, expressed at
    the joint (the rotor of a compliant joint; equal to the joint's q, dq for a rigid one);
    temperature (n,) [degC]: winding temperature (moves only on ``+thermal`` joints).
    """

    qpos: Any
    qvel: Any
    q_prev: Any
    q_prev2: Any
    u: Any
    target_prev: Any
    target_filt: Any
    hist_target: Any
    hist_enable: Any
    qm: Any
    dqm: Any
    temperature: Any


class ArmOutputs(NamedTuple):
    """At the start of every control period (T, ...): q, dq (T, n) joint position [rad | m] and
    velocity; u (T, n) firmware output; tau_motor, tau_friction, tau_ext (T, n) [N.m | N] efforts
    of the first physics step; qpos (T, nq), qvel (T, nv) the full MuJoCo state; qm, dqm (T, n)
    motor side of the transmissions (= q, dq for rigid joints); temperature (T, n) [degC] winding
    temperature; current (T, n) [A] motor current of the first physics step (voltage drives; 0
    for current and effort drives)."""

    q: Any
    dq: Any
    u: Any
    tau_motor: Any
    tau_friction: Any
    tau_ext: Any
    qpos: Any
    qvel: Any
    qm: Any
    dqm: Any
    temperature: Any
    current: Any


# ---------------------------------------------------------------------------------------------
# The actuator equations, written once over an array namespace ("kit"): jax.numpy for MJX, numpy
# (with NumPy twins of the library functions, see arm_native) for native MuJoCo.
@dataclass(frozen=True)
class Kit:
    """Array namespace and the model functions to use with it."""

    xp: Any
    laws: dict
    drive_effort: Callable
    friction_budget: Callable
    stick_slip_torque: Callable
    transmission_coupling: Callable
    motor_current: Callable = dc_motor_current

    def put(self, out, idx, val):
        """out with out[..., idx] = val (functional for jax, a copy for numpy)."""
        if idx is None:
            return val
        if self.xp is np:
            out = np.array(out, copy=True)
            out[..., idx] = val
            return out
        return out.at[..., idx].set(val)


JAX_KIT = Kit(jnp, {k: v.fn for k, v in CONTROL_LAWS.items()}, drive_effort, friction_budget,
              stick_slip_torque, transmission_coupling, dc_motor_current)


@dataclass(frozen=True, eq=False)
class _Layout:
    """Static per-robot structure: joint addresses, law/drive groups, effort bounds (n,),
    compliant (n,) bool: joints with a two-body transmission (:attr:`Robot.compliant`); thermal
    (n,) bool: joints with a winding temperature (:attr:`Robot.thermal`); voltage (n,) bool:
    joints with a DC-motor (voltage) drive."""

    qadr: np.ndarray
    dadr: np.ndarray
    law_groups: tuple
    drive_groups: tuple
    compliant: np.ndarray
    thermal: np.ndarray
    voltage: np.ndarray
    envelope: np.ndarray
    effort_limit: np.ndarray
    saturation: np.ndarray
    velocity_limit: np.ndarray


def _groups(values: list[str]) -> tuple:
    uniq = list(dict.fromkeys(values))
    if len(uniq) == 1:
        return ((uniq[0], None),)
    return tuple((u, np.array([i for i, v in enumerate(values) if v == u])) for u in uniq)


def layout(robot: Robot) -> _Layout:
    js = robot.joints
    thermal, voltage = robot.thermal, np.array([j.drive == "voltage" for j in js])
    if (thermal & ~voltage).any():
        bad = [j.name for j, t, v in zip(js, thermal, voltage) if t and not v]
        raise ModelError(f"{robot.name}: +thermal needs a voltage (DC motor) drive; joints {bad} have "
                         f"a current or effort drive (no winding resistance in the model)")
    return _Layout(qadr=robot.qpos_adr, dadr=robot.dof_adr,
                   law_groups=_groups([j.law for j in js]),
                   drive_groups=_groups([j.drive for j in js]),
                   compliant=robot.compliant, thermal=thermal, voltage=voltage,
                   envelope=np.array([j.drive == "effort" for j in js]),
                   effort_limit=np.array([j.effort_limit for j in js]),
                   saturation=np.array([j.saturation_effort for j in js]),
                   velocity_limit=np.array([j.velocity_limit for j in js]))


def _take(tree, idx):
    if idx is None:
        return tree
    if isinstance(tree, dict):
        return {k: v[..., idx] for k, v in tree.items()}
    return type(tree)(*[v[..., idx] for v in tree])


def firmware_output(kit: Kit, lay: _Layout, p, lc: LawConstants, target, q_meas, q_prev, q_prev2,
                    dq, v_supply):
    """Firmware law of every joint: u (..., n) [V | N.m] (each joint's own law)."""
    u = None
    for law, idx in lay.law_groups:
        val = kit.laws[law](_take(lc, idx), _take(p, idx), *(_take((target, q_meas, q_prev, q_prev2,
                                                                     dq, v_supply), idx)))
        u = val if idx is None else kit.put(kit.xp.zeros_like(q_meas) if u is None else u, idx, val)
    return u


def motor_effort(kit: Kit, lay: _Layout, p, lc: LawConstants, u, dq, enable):
    """Drive effort at the joint (..., n) with the effort bounds of the module docstring."""
    xp = kit.xp
    tau = None
    for drive, idx in lay.drive_groups:
        val = kit.drive_effort(drive, _take(p, idx), _take(lc, idx), *_take((u, dq, enable), idx))
        tau = val if idx is None else kit.put(xp.zeros_like(u) if tau is None else tau, idx, val)
    E = lay.effort_limit
    if lay.envelope.any():
        S, V = lay.saturation, lay.velocity_limit
        hi = xp.where(lay.envelope, xp.clip(S * (1.0 - dq / V), 0.0, E), E)
        lo = xp.where(lay.envelope, xp.clip(S * (-1.0 - dq / V), -E, 0.0), -E)
        return xp.clip(tau, lo, hi)
    return xp.clip(tau, -E, E)


def mujoco_armature(compliant, armature, xp=np):
    """Armature to write into MuJoCo's ``dof_armature`` (n,): the rotor inertia ``armature`` of a
    rigid joint, 0 for a compliant one (its rotor is integrated as a body of its own)."""
    if not np.any(compliant):
        return armature
    return xp.where(compliant, 0.0, armature)


def motor_side(lay: _Layout, xp, q, dq, qm, dqm):
    """(qm, dqm) of every joint: the carried motor-side state for compliant joints, the joint's
    own q, dq for rigid ones."""
    if not lay.compliant.any():
        return q, dq
    return xp.where(lay.compliant, qm, q), xp.where(lay.compliant, dqm, dq)


def load_inertia(xp, M, dadr):
    """Output-side inertia of each joint (n,) [kg.m^2 | kg]: 1 / (M^-1)[i, i], the inertia a joint
    presents to an effort applied on it alone with every other dof free (<= M[i, i]; equal for a
    joint that is dynamically decoupled from the others). ``M`` (nv, nv) the mass matrix."""
    if xp is np:
        E = np.eye(M.shape[-1])[:, dadr]
        return 1.0 / np.linalg.solve(M, E)[dadr, np.arange(len(dadr))]
    return 1.0 / _inv_diag_spd(M)[dadr]


def _inv_diag_spd(M):
    """diag(M^-1) (nv,) of a symmetric positive definite ``M`` (nv, nv) in plain JAX ops: Cholesky
    M = L L^T and X = L^-1, both unrolled over the (static) size, diag(M^-1)_k = sum_i X[i, k]^2.
    Not ``jnp.linalg.solve``: its batched LAPACK call inside a vmapped, scanned environment step
    hung XLA's CPU runtime on the first execution in 4 of 6 runs at 256 environments (the ANYmal
    series-elastic env, bench/locomotion.py); this form ran 3 of 3 at the same speed."""
    import jax.numpy as jnp

    n = M.shape[-1]
    L = jnp.zeros_like(M)
    for j in range(n):
        ljj = jnp.sqrt(M[j, j] - jnp.sum(L[j, :j] ** 2))
        L = L.at[j, j].set(ljj)
        if j + 1 < n:
            L = L.at[j + 1:, j].set((M[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / ljj)
    X = jnp.zeros_like(M)
    eye = jnp.eye(n, dtype=M.dtype)
    for i in range(n):
        X = X.at[i].set((eye[i] - L[i, :i] @ X[:i, :]) / L[i, i])
    return jnp.sum(X ** 2, axis=0)


def joint_effort(kit: Kit, lay: _Layout, p, tau_m, q, dq, qm, dqm, m_diag, i_load, tau_smooth, h):
    """Transmission and friction of every joint (..., n) for one physics step.

    Args: motor effort ``tau_m`` (evaluated at the motor-side velocity), joint state ``q, dq``
    (output side), motor side ``qm, dqm`` (:func:`motor_side`), ``m_diag`` = M[i, i] (rigid
    joints: rotor included), ``i_load`` = 1 / (M^-1)[i, i] (:func:`load_inertia`; compliant joints,
    whose rotor is not in M, see :func:`mujoco_armature`; None when no joint is compliant) and
    ``tau_smooth`` = (qfrc_passive - qfrc_bias)[i].

    Returns (applied, tau_f, tau_e, qm', dqm'): the effort written to qfrc_applied, the friction,
    the external effort and the motor side after the step (semi-implicit Euler, as the one-joint
    model; rigid joints return qm, dqm unchanged). The equations are in the module docstring.
    """
    xp = kit.xp
    tau_e = tau_smooth - p["force_offset"]
    comp = lay.compliant
    if not comp.all():  # rigid: one body, friction on the joint
        budget = kit.friction_budget(p, tau_m, tau_e, dq, p["armature"] / m_diag)
        tau_f = kit.stick_slip_torque(m_diag, dq, tau_m + tau_e, budget, h)
        applied = tau_m + tau_f
        if not comp.any():
            return applied - p["force_offset"], tau_f, tau_e, qm, dqm
    J = p["armature"]  # compliant: the rotor is its own body, friction on the motor side
    tau_c = kit.transmission_coupling(p, qm, dqm, q, dq, effective_inertia(J, i_load), h)
    budget_m = kit.friction_budget(p, tau_m, -tau_c, dqm)
    tau_fm = kit.stick_slip_torque(J, dqm, tau_m - tau_c, budget_m, h)
    dqm = dqm + h * (tau_m - tau_c + tau_fm) / J
    qm = qm + h * dqm
    if comp.all():
        return tau_c - p["force_offset"], tau_fm, tau_e, qm, dqm
    return (xp.where(comp, tau_c, applied) - p["force_offset"], xp.where(comp, tau_fm, tau_f), tau_e,
            qm, dqm)


def hot_params(kit: Kit, lay: _Layout, p, temperature):
    """``p`` with ``R`` replaced by R(T) (:func:`~actuatorlab.models.motor.winding_resistance`) on
    the ``+thermal`` joints, for the motor law of this physics step; ``p`` itself (the same
    object) when no joint is thermal. ``temperature`` (..., n) [degC]."""
    if not lay.thermal.any():
        return p
    R_T = winding_resistance(p, temperature)
    return dict(p, R=R_T if lay.thermal.all() else kit.xp.where(lay.thermal, R_T, p["R"]))


def motor_current(kit: Kit, lay: _Layout, p, u, dq, enable):
    """Motor current (..., n) [A] of the voltage-drive joints (0 elsewhere), with the motor law's
    parameters ``p`` (:func:`hot_params`) at the motor-side velocity ``dq``."""
    i = kit.motor_current(p, u, dq, enable)
    return i if lay.voltage.all() else kit.xp.where(lay.voltage, i, 0.0)


def thermal_step(kit: Kit, lay: _Layout, p_hot, temperature, current, h):
    """Winding temperature (..., n) [degC] after one physics step of h [s]
    (:func:`~actuatorlab.models.motor.winding_temperature_step`) on the ``+thermal`` joints;
    unchanged elsewhere (the same object when no joint is thermal)."""
    if not lay.thermal.any():
        return temperature
    t1 = winding_temperature_step(p_hot, temperature, current, p_hot["R"], h)
    return t1 if lay.thermal.all() else kit.xp.where(lay.thermal, t1, temperature)


def push(xp, hist, x):
    """Delay line (..., D, n) with x (..., n) inserted as the newest entry."""
    return xp.concatenate([x[..., None, :], hist[..., :-1, :]], axis=-2)


def delayed(xp, hist, steps):
    """Entry ``steps`` (n,) [control steps, fractional] back in the delay line, linear
    interpolation between samples; clipped to the line's length."""
    D = hist.shape[-2]
    f = xp.clip(steps, 0.0, D - 1)
    k0 = xp.floor(f)
    w = f - k0
    k0 = k0.astype(np.int64) if xp is np else k0.astype(jnp.int32)
    k1 = xp.minimum(k0 + 1, D - 1)
    shape = hist.shape[:-2] + (1, hist.shape[-1])
    a = xp.take_along_axis(hist, xp.broadcast_to(k0[..., None, :], shape), axis=-2)[..., 0, :]
    b = xp.take_along_axis(hist, xp.broadcast_to(k1[..., None, :], shape), axis=-2)[..., 0, :]
    return (1.0 - w) * a + w * b


def target_at(xp, cfg: ArmConfig, s, tgt, prev, filt_new):
    """Target the firmware sees at physics substep ``s`` of a control period."""
    if cfg.target == "hold":
        return tgt
    if cfg.target == "linear":
        a = xp.minimum(1.0, (s + cfg.law_every) / cfg.substeps)
        return prev + (tgt - prev) * a
    return filt_new


def filter_gain(cfg: ArmConfig) -> float:
    return 1.0 - math.exp(-cfg.firmware_dt / cfg.target_tau)


# ---------------------------------------------------------------------------------------------
def make_inputs(robot: Robot, q_target, enable=1.0, v_supply=None) -> ArmInputs:
    """ArmInputs (T, n) from targets (T, n); enable and v_supply broadcast (default: each joint's
    configured supply voltage)."""
    qt = np.asarray(q_target, dtype=float)
    if qt.ndim < 2 or qt.shape[-1] != robot.n_joints:
        raise ModelError(f"q_target must have shape (T, {robot.n_joints}) for {robot.name}, got {qt.shape}")
    vs = np.array([j.supply_voltage for j in robot.joints]) if v_supply is None else v_supply
    return ArmInputs(qt, np.broadcast_to(np.asarray(enable, float), qt.shape).copy(),
                     np.broadcast_to(np.asarray(vs, float), qt.shape).copy())


def _follow_equalities(m: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray, skip: set[int]) -> None:
    """Joint equalities (x - x0 = c0 + c1 y + c2 y^2 + ..., y = q2 - q2_0): set each follower
    joint (not in ``skip``) from its leader, in place."""
    for e in range(m.neq):
        if m.eq_type[e] != mujoco.mjtEq.mjEQ_JOINT or m.eq_obj2id[e] < 0:
            continue
        j1, j2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
        q1, q2 = m.jnt_qposadr[j1], m.jnt_qposadr[j2]
        if q1 in skip:
            continue
        c = m.eq_data[e][:5]
        y = qpos[q2] - m.qpos0[q2]
        qpos[q1] = m.qpos0[q1] + c[0] + c[1] * y + c[2] * y**2 + c[3] * y**3 + c[4] * y**4
        qvel[m.jnt_dofadr[j1]] = (c[1] + 2 * c[2] * y + 3 * c[3] * y**2 + 4 * c[4] * y**3) * qvel[m.jnt_dofadr[j2]]


def initial_state(robot: Robot, cfg: ArmConfig | None = None, *, q=None, dq=None, qpos=None, qvel=None,
                  q_target=None, hist_target=None, hist_enable=None, qm=None, dqm=None, temperature=None,
                  params=None) -> ArmState:
    """A rollout start (NumPy arrays).

    The MuJoCo state is ``qpos``/``qvel`` (default: the model's qpos0, rest) with the modelled
    joints set to ``q``/``dq`` [rad | m] (n,) when given, and joints that follow another through a
    joint equality (a mimic finger) set from their leader. The firmware memory is reconstructed
    from the velocity (q_prev = q - dq firmware_dt, as the one-joint replay does); the delay line
    holds ``hist_target``/``hist_enable`` (D, n) newest first, or ``q_target`` (default: q, a servo
    holding its position) and enable = 1. The motor side of the transmissions is ``qm``/``dqm``
    (n,) when given, else the joint's own position and velocity (a compliant joint starts in the
    middle of its dead band, spring relaxed); the rollouts ignore it for rigid joints. The
    winding temperature is ``temperature`` [degC] (n,) when given, else each joint's
    ``ambient_temperature`` from ``params`` (parameter sets, as for the rollout; default the
    robot's nominal ones); it only moves on ``+thermal`` joints.
    """
    cfg = cfg or ArmConfig.from_robot(robot)
    m = robot.model()
    qp = np.array(m.qpos0 if qpos is None else qpos, dtype=float)
    qv = np.zeros(m.nv) if qvel is None else np.array(qvel, dtype=float)
    qadr, dadr = robot.qpos_adr, robot.dof_adr
    if q is not None:
        qp[qadr] = np.asarray(q, float)
    if dq is not None:
        qv[dadr] = np.asarray(dq, float)
    _follow_equalities(m, qp, qv, set(int(a) for a in qadr))
    qj, dqj = qp[qadr], qv[dadr]
    D, n = cfg.delay_steps, robot.n_joints
    if hist_target is None:
        qt = qj if q_target is None else np.broadcast_to(np.asarray(q_target, float), (n,))
        hist_target = np.tile(qt, (D, 1))
    if hist_enable is None:
        hist_enable = np.ones((D, n))
    hist_target, hist_enable = np.asarray(hist_target, float), np.asarray(hist_enable, float)
    if hist_target.shape != (D, n) or hist_enable.shape != (D, n):
        raise ModelError(f"delay line must have shape ({D}, {n}), got {hist_target.shape} / {hist_enable.shape}")
    h = cfg.firmware_dt
    qm = qj.copy() if qm is None else np.broadcast_to(np.asarray(qm, float), (n,)).copy()
    dqm = dqj.copy() if dqm is None else np.broadcast_to(np.asarray(dqm, float), (n,)).copy()
    if temperature is None:
        amb = {"ambient_temperature": (params or robot.nominal_params())["ambient_temperature"]}
        temperature = robot.joint_params(amb)["ambient_temperature"]
    temperature = np.broadcast_to(np.asarray(temperature, float), (n,)).copy()
    return ArmState(qp, qv, qj - dqj * h, qj - 2.0 * dqj * h, np.zeros(n), hist_target[0].copy(),
                    hist_target[0].copy(), hist_target, hist_enable, qm, dqm, temperature)


@physics
def position_loss(out: ArmOutputs, q_meas, mask=None):
    """Mean squared joint-position error [rad^2 | m^2] between a rollout and measurements (T, n);
    ``mask`` (T,) or (T, n) excludes padding."""
    err = (out.q - q_meas) ** 2
    if mask is None:
        return jnp.mean(err)
    w = jnp.broadcast_to(jnp.asarray(mask, err.dtype).reshape(mask.shape + (1,) * (err.ndim - mask.ndim)), err.shape)
    return jnp.sum(err * w) / jnp.maximum(jnp.sum(w), 1.0)


# ---------------------------------------------------------------------------------------------
@physics
def mjx_model(robot: Robot):
    """The robot's MJX model (``mujoco.mjx.put_model`` of ``robot.model(for_mjx=True)``)."""
    from mujoco import mjx

    return mjx.put_model(robot.model(for_mjx=True))


@physics_fn
def make_mjx_rollout(robot: Robot, cfg: ArmConfig | None = None, mx=None) -> Callable:
    """Build ``rollout(params, inputs, state, model_updates=None) -> (ArmState, ArmOutputs)``.

    params: parameter sets, name -> (n_groups,) servo-side values (``robot.nominal_params()``),
    or a learned / residual model (:class:`~actuatorlab.sim.arm_learned.LearnedArm`, whose
    network then gives the channels' effort, see :mod:`actuatorlab.sim.arm_learned`; its inputs
    are :class:`~actuatorlab.sim.arm_learned.LearnedInputs` when it reads telemetry);
    ``rollout.with_heads`` returns (state, outputs, heads) with the network's heads (T, ...);
    inputs: :class:`ArmInputs` (T, n); state: :class:`ArmState`; model_updates: MJX ``Model``
    fields to replace (name -> full array, e.g. ``{"body_mass": m}``), traced like the rest;
    ctrl: None or (T, nu) MuJoCo ``ctrl`` held over each control step, for the model's own
    actuators (a mixed robot's built-in joints, :func:`~actuatorlab.envs.actuators.mixed_robot`).

    The function is pure and not jitted: compose ``jax.jit``, ``jax.vmap`` (batch: ``in_axes=(None,
    0, 0)``) and ``jax.grad`` as needed. Differentiating through a model with constraint rows
    (equalities, joint limits, contacts) needs solver iterations = 1 and ls_iterations = 4, which
    :meth:`Robot.model` sets for MJX.
    """
    from mujoco import mjx

    cfg = cfg or ArmConfig.from_robot(robot)
    m = robot.model(for_mjx=True)
    mx = mjx.put_model(m) if mx is None else mx
    template = mjx.make_data(mx)
    has_efc = getattr(template._impl, "efc_J", np.zeros(0)).size > 0  # as mjx.forward decides
    integrate = mjx.euler if m.opt.integrator == mujoco.mjtIntegrator.mjINT_EULER else mjx.implicit
    lay = layout(robot)
    lc0 = robot.law_constants()
    lc = LawConstants(*[jnp.asarray(v) for v in lc0._replace(dt=np.full_like(lc0.dt, cfg.firmware_dt))])
    qadr, dadr = jnp.asarray(lay.qadr), jnp.asarray(lay.dadr)
    kit, xp, h = JAX_KIT, jnp, cfg.physics_dt
    a_filt = filter_gain(cfg)

    def run(params, inputs, state: ArmState, model_updates=None, ctrl=None):
        learned = params if isinstance(params, LearnedArm) else None
        if learned is not None:
            if learned.n_joints != robot.n_joints:
                raise ModelError(f"learned model has {learned.n_joints} joints, {robot.name} {robot.n_joints}")
            if not learned.residual and lay.compliant[learned.mask].any():
                raise ModelError(f"{robot.name}: a learned (not residual) effort needs rigid channels; "
                                 f"compliant transmissions are only corrected (residual)")
            params = learned.base
        p = robot.joint_params(params, xp=jnp)
        arm = mujoco_armature(lay.compliant, p["armature"], jnp)
        mxp = mx.replace(dof_armature=mx.dof_armature.at[dadr].set(arm))
        if model_updates:
            mxp = mxp.replace(**model_updates)
        d0 = template.replace(qpos=jnp.asarray(state.qpos), qvel=jnp.asarray(state.qvel))
        dsteps = p["delay"] / cfg.control_dt
        x_arm = ArmInputs(*[jnp.asarray(v) for v in inputs[:3]])
        T = x_arm.q_target.shape[0]
        if learned is not None:
            tele = telemetry_or_empty(learned, getattr(inputs, "telemetry", None), T)
            q00, dq00 = d0.qpos[qadr], d0.qvel[dadr]
            f0 = frame(learned, x_arm.q_target[0], q00, dq00, x_arm.v_supply[0], x_arm.enable[0], tele[0])
            hist0 = initial_history(learned, f0, getattr(inputs, "past", None))
        else:
            tele, hist0 = jnp.zeros((T, 0)), jnp.zeros((0,))
        ctrl_seq = jnp.zeros((T, 0)) if ctrl is None else jnp.asarray(ctrl)

        def control_step(carry, xs):
            d, c, hist = carry
            x, tel, ctrl_k = xs
            if ctrl is not None:  # the model's own actuators, held over the control step
                d = d.replace(ctrl=ctrl_k.astype(d.ctrl.dtype))
            hist_t = push(xp, c.hist_target, x.q_target)
            hist_e = push(xp, c.hist_enable, x.enable)
            tgt, en = delayed(xp, hist_t, dsteps), delayed(xp, hist_e, dsteps)
            if learned is not None:  # the network's effort, held over the control step
                tau_net, heads, hist = net_step(learned, hist, x.q_target, d.qpos[qadr], d.qvel[dadr],
                                                x.v_supply, x.enable, tel, d.qpos.dtype)
            else:
                tau_net, heads = None, None

            def substep(carry2, s):
                d, q_prev, q_prev2, u, filt, qm, dqm, temp = carry2
                d = mjx.fwd_position(mxp, d)
                d = mjx.fwd_velocity(mxp, d)
                q, dq = d.qpos[qadr], d.qvel[dadr]
                qm, dqm = motor_side(lay, xp, q, dq, qm, dqm)
                M = mjx.full_m(mxp, d)
                m_diag = jnp.diag(M)[dadr]
                i_load = load_inertia(jnp, M, lay.dadr) if lay.compliant.any() else None
                tau_s = (d.qfrc_passive - d.qfrc_bias)[dadr]
                tick = (s % cfg.law_every) == 0
                filt_new = filt + a_filt * (tgt - filt)
                q_meas = q - p["q_offset"]
                u_new = firmware_output(kit, lay, p, lc, target_at(xp, cfg, s, tgt, c.target_prev, filt_new),
                                        q_meas, q_prev, q_prev2, dq, x.v_supply)
                u = jnp.where(tick, u_new, u)
                q_prev, q_prev2 = jnp.where(tick, q_meas, q_prev), jnp.where(tick, q_prev, q_prev2)
                filt = jnp.where(tick, filt_new, filt)
                p_hot = hot_params(kit, lay, p, temp)
                tau_m = motor_effort(kit, lay, p_hot, lc, u, dqm, en)
                cur = motor_current(kit, lay, p_hot, u, dqm, en)
                temp1 = thermal_step(kit, lay, p_hot, temp, cur, h)
                applied, tau_f, tau_e, qm1, dqm1 = joint_effort(kit, lay, p, tau_m, q, dq, qm, dqm, m_diag,
                                                                i_load, tau_s, h)
                if learned is not None:
                    applied = combine_effort(learned, applied, tau_net)
                    if not learned.residual:  # record the network's effort as the motor's
                        tau_m = jnp.where(learned.mask, tau_net, tau_m)
                        tau_f = jnp.where(learned.mask, 0.0, tau_f)
                d = d.replace(qfrc_applied=jnp.zeros_like(d.qfrc_applied).at[dadr].set(applied))
                d = mjx.fwd_actuation(mxp, d)
                d = mjx.fwd_acceleration(mxp, d)
                d = mjx.solve(mxp, d) if has_efc else d.replace(qacc=d.qacc_smooth)
                d = integrate(mxp, d)
                return ((d, q_prev, q_prev2, u, filt, qm1, dqm1, temp1),
                        (q, dq, u, tau_m, tau_f, tau_e, qm, dqm, temp, cur))

            start = (d.qpos, d.qvel)
            (d, q_prev, q_prev2, u, filt, qm, dqm, temp), rec = jax.lax.scan(
                substep, (d, c.q_prev, c.q_prev2, c.u, c.target_filt, c.qm, c.dqm, c.temperature),
                jnp.arange(cfg.substeps))
            q, dq, u0, tau_m, tau_f, tau_e, qm0, dqm0, temp0, cur0 = [r[0] for r in rec]
            out = ArmOutputs(q, dq, u0, tau_m, tau_f, tau_e, *start, qm0, dqm0, temp0, cur0)
            c = ArmState(None, None, q_prev, q_prev2, u, tgt, filt, hist_t, hist_e, qm, dqm, temp)
            return (d, c, hist), (out, heads)

        c0 = ArmState(None, None, *[jnp.asarray(v) for v in state[2:]])
        (d, c, hist), (out, heads) = jax.lax.scan(control_step, (d0, c0, hist0), (x_arm, tele, ctrl_seq))
        qm, dqm = motor_side(lay, xp, d.qpos[qadr], d.qvel[dadr], c.qm, c.dqm)
        return c._replace(qpos=d.qpos, qvel=d.qvel, qm=qm, dqm=dqm), out, heads

    def rollout(params, inputs, state: ArmState, model_updates=None, ctrl=None):
        final, out, _ = run(params, inputs, state, model_updates, ctrl)
        return final, out

    def with_heads(params, inputs, state: ArmState, model_updates=None, ctrl=None):
        """(state, outputs, heads): heads (T, ...) of a learned model's network per control step
        (None for analytic parameters)."""
        return run(params, inputs, state, model_updates, ctrl)

    rollout.with_heads = with_heads
    return rollout
