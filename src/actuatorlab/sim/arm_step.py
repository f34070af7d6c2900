"""The common physics step of the whole-robot simulators: one tick of every joint's actuator.

Both whole-robot backends, MJX (:func:`actuatorlab.sim.arm.make_mjx_rollout`) and native MuJoCo
(:func:`actuatorlab.sim.arm_native.rollout_native`), call the functions of this module, with the
array namespace ``xp`` = ``jax.numpy`` or ``numpy``; the backends differ only in how they read the
multibody state (:class:`Sensed`) and integrate it. The actuator equations themselves are the
one-joint model's (:mod:`actuatorlab.models`), each taking the same ``xp``.

A :class:`~actuatorlab.robots.Robot` names, per joint, a firmware law, a DC motor (or ideal torque
source), a transmission and a friction model. The joint torque is computed here from the *same*
pure functions as the one-joint model (:mod:`actuatorlab.models`: control laws, ``drive_effort``,
``friction_budget``, ``stick_slip_torque``, ``two_body_step``) and applied to MuJoCo as
``qfrc_applied``; MuJoCo does the multibody dynamics (gravity, Coriolis, coupling, constraints).
The two backends share these equations (:func:`actuator_step`) and this module's types:

* :func:`actuatorlab.sim.arm.make_mjx_rollout`: MJX, ``jax.lax.scan``; jit-, vmap- and grad-able
  with respect to actuator parameters, per-step inputs and MJX model fields (link masses, ...);
* :func:`actuatorlab.sim.arm_native.rollout_native`: native MuJoCo (``mj_step1``/``mj_step2``),
  ``xp = numpy``: fastest, no gradients.

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
        tau_c, tau_f, dq_m', _ = two_body_step(p, J, I_load, tau_m, tau_e, (q_m, dq_m), (q, dq), h)
                                                         dead zone + spring-damper at the end of
                                                         the step, friction on the motor side
        q_m'   = q_m + h dq_m'
        qfrc_applied[i] = tau_c - force_offset
      winding temperature (``+thermal`` joints, voltage drives; T [degC] carried in ArmState):
        R_T    = R (1 + alpha (T - 25))                  R(T), used by the motor law above
        i      = enable clip((u - kt dq_m) / R_T, +-current_limit)
        T'     = T + h (i^2 R_T - (T - T_amb) / R_th) / C_th
      MuJoCo acceleration + Euler step

The firmware always reads the output side (the joint), as the one-joint model does. The
transmission (:func:`~actuatorlab.models.actuator.two_body_step`) is the one-joint model's: a dead
zone of width ``backlash`` and a spring-damper beyond it, taken at the end of the step (implicit)
with the output's response to it predicted from I_load, and the friction's stick test taken on
rotor and joint together. Each joint predicts its own response only, so the whole robot caps the
spring at 0.5 J_eff / h^2 (omega h <= 0.71, :data:`STIFFNESS_CAP`), where the one-joint model
needs no cap; a spring stiffer than that acts as the capped one. I_load is 1 / (M^-1)[i, i],
the inertia the joint presents to an effort applied on it alone, rather than M[i, i]: a joint's
effort also accelerates the links it is coupled to, so 1 / (M^-1)[i, i] is what MuJoCo's step
then does with tau_c (up to 4x smaller than M[i, i] on the OpenManipulator-X wrist). The motor-side state is part of
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
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from ..errors import ModelError
from ..models.actuator import drive_effort, effective_inertia, two_body_step
from ..models.control import CONTROL_LAWS, LawConstants
from ..models.friction import friction_budget, stick_slip_torque
from ..models.motor import dc_motor_current, winding_resistance, winding_temperature_step
from ..robots.loader import Robot
from .arm_learned import combine_effort, LearnedArm

#: a compliant joint's spring in the whole robot is at most STIFFNESS_CAP J_eff / h^2 (omega h <= 0.71):
#: each joint's implicit step predicts its own output's response only (1 / (M^-1)[i, i]), and a
#: stiffer spring lets the joints' coupling through M ring the chain apart (the OpenManipulator-X
#: chirps of tests/test_arm_backlash.py diverge from 2 J_eff / h^2 on); the one-joint model (one
#: body, exact response) needs no cap
STIFFNESS_CAP = 0.5

__all__ = ["ArmConfig", "ArmInputs", "ArmState", "ArmOutputs", "Actuators", "ActuatorState", "Sensed",
           "Command", "StepRecord", "layout", "actuators", "command_step", "actuator_step", "arm_outputs",
           "check_learned",
           "mujoco_armature", "motor_side", "filter_gain"]


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


def _put(xp, out, idx, val):
    """``out`` with out[..., idx] = val (functional for jax, a copy for numpy); ``val`` when idx is None."""
    if idx is None:
        return val
    if xp is np:
        out = np.array(out, copy=True)
        out[..., idx] = val
        return out
    return out.at[..., idx].set(val)


def firmware_output(a: "Actuators", target, q_meas, q_prev, q_prev2, dq, v_supply):
    """Firmware law of every joint: u (..., n) [V | N.m] (each joint's own law)."""
    xp, u = a.xp, None
    for law, idx in a.lay.law_groups:
        val = CONTROL_LAWS[law].fn(_take(a.lc, idx), _take(a.p, idx),
                                   *_take((target, q_meas, q_prev, q_prev2, dq, v_supply), idx), xp=xp)
        u = val if idx is None else _put(xp, xp.zeros_like(q_meas) if u is None else u, idx, val)
    return u


def motor_effort(xp, lay: _Layout, p, lc: LawConstants, u, dq, enable):
    """Drive effort at the joint (..., n) with the effort bounds of the module docstring."""
    tau = None
    for drive, idx in lay.drive_groups:
        u_g, dq_g, en_g = _take((u, dq, enable), idx)
        val = drive_effort(drive, _take(p, idx), _take(lc, idx), u_g, dq_g, en_g, xp=xp)
        tau = val if idx is None else _put(xp, xp.zeros_like(u) if tau is None else tau, idx, val)
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


def joint_effort(xp, lay: _Layout, p, tau_m, sensed: "Sensed", qm, dqm, h):
    """Transmission and friction of every joint (..., n) for one physics step.

    Args: motor effort ``tau_m`` (evaluated at the motor-side velocity), what the physics engine
    reports (:class:`Sensed`: joint state q, dq (output side), M[i, i], 1 / (M^-1)[i, i] and the
    smooth external effort), the motor side ``qm, dqm`` (:func:`motor_side`).

    Returns (applied, tau_f, tau_e, qm', dqm'): the effort written to qfrc_applied, the friction,
    the external effort and the motor side after the step (semi-implicit Euler, as the one-joint
    model; rigid joints return qm, dqm unchanged). The equations are in the module docstring.
    """
    q, dq, m_diag, i_load = sensed.q, sensed.dq, sensed.m_diag, sensed.i_load
    tau_e = sensed.tau_smooth - p["force_offset"]
    comp = lay.compliant
    if not comp.all():  # rigid: one body, friction on the joint
        budget = friction_budget(p, tau_m, tau_e, dq, p["armature"] / m_diag, xp=xp)
        tau_f = stick_slip_torque(m_diag, dq, tau_m + tau_e, budget, h, xp=xp)
        applied = tau_m + tau_f
        if not comp.any():
            return applied - p["force_offset"], tau_f, tau_e, qm, dqm
    # compliant: the rotor is its own body, friction on the motor side; the engine moves the
    # output under tau_c with the inertia i_load the step assumes for it, each joint's spring
    # capped where the joints' coupling through M (not in i_load) could make it ring
    J = p["armature"]
    k_s = xp.minimum(p["stiffness"], STIFFNESS_CAP * effective_inertia(J, i_load) / h**2)
    tau_c, tau_fm, dqm, _ = two_body_step(dict(p, stiffness=k_s), J, i_load, tau_m, tau_e, (qm, dqm), (q, dq), h,
                                          xp=xp)
    qm = qm + h * dqm
    if comp.all():
        return tau_c - p["force_offset"], tau_fm, tau_e, qm, dqm
    return (xp.where(comp, tau_c, applied) - p["force_offset"], xp.where(comp, tau_fm, tau_f), tau_e,
            qm, dqm)


def hot_params(xp, lay: _Layout, p, temperature):
    """``p`` with ``R`` replaced by R(T) (:func:`~actuatorlab.models.motor.winding_resistance`) on
    the ``+thermal`` joints, for the motor law of this physics step; ``p`` itself (the same
    object) when no joint is thermal. ``temperature`` (..., n) [degC]."""
    if not lay.thermal.any():
        return p
    R_T = winding_resistance(p, temperature)
    return dict(p, R=R_T if lay.thermal.all() else xp.where(lay.thermal, R_T, p["R"]))


def motor_current(xp, lay: _Layout, p, u, dq, enable):
    """Motor current (..., n) [A] of the voltage-drive joints (0 elsewhere), with the motor law's
    parameters ``p`` (:func:`hot_params`) at the motor-side velocity ``dq``."""
    i = dc_motor_current(p, u, dq, enable, xp=xp)
    return i if lay.voltage.all() else xp.where(lay.voltage, i, 0.0)


def thermal_step(xp, lay: _Layout, p_hot, temperature, current, h):
    """Winding temperature (..., n) [degC] after one physics step of h [s]
    (:func:`~actuatorlab.models.motor.winding_temperature_step`) on the ``+thermal`` joints;
    unchanged elsewhere (the same object when no joint is thermal)."""
    if not lay.thermal.any():
        return temperature
    t1 = winding_temperature_step(p_hot, temperature, current, p_hot["R"], h)
    return t1 if lay.thermal.all() else xp.where(lay.thermal, t1, temperature)


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
# The step both backends run.
@dataclass(frozen=True, eq=False)
class Actuators:
    """Everything one rollout's actuator step needs besides its state: the array namespace ``xp``
    (``numpy`` | ``jax.numpy``), the robot's static :func:`layout`, the joints' parameters ``p``
    (name -> (..., n), ``Robot.joint_params``), the firmware constants ``lc`` (period =
    ``cfg.firmware_dt``), the timing ``cfg``, the target filter's gain and the physics step h [s]."""

    xp: Any
    lay: _Layout
    p: Any
    lc: LawConstants
    cfg: ArmConfig
    a_filt: float
    h: float


def actuators(robot: Robot, cfg: ArmConfig, p, xp, lay: _Layout | None = None) -> Actuators:
    """The :class:`Actuators` of ``robot`` with joint parameters ``p`` for the namespace ``xp``."""
    lc = robot.law_constants()
    lc = lc._replace(dt=np.full_like(lc.dt, cfg.firmware_dt))
    if xp is not np:
        lc = LawConstants(*[xp.asarray(v) for v in lc])
    return Actuators(xp, layout(robot) if lay is None else lay, p, lc, cfg, filter_gain(cfg), cfg.physics_dt)


class ActuatorState(NamedTuple):
    """Actuator memory between physics steps (..., n): q_prev, q_prev2 [rad | m] the positions the
    firmware measured at its last two ticks; u [V | N.m] its held output; filt the filtered
    target; qm, dqm the motor side (:class:`ArmState`); temperature [degC] the winding's."""

    q_prev: Any
    q_prev2: Any
    u: Any
    filt: Any
    qm: Any
    dqm: Any
    temperature: Any


class Sensed(NamedTuple):
    """What the physics engine reports at the start of a physics step (position and velocity stage),
    per joint (..., n): q, dq joint position and velocity; m_diag = M[i, i] (rigid joints: rotor
    included); i_load = 1 / (M^-1)[i, i] (None when no joint is compliant); tau_smooth =
    (qfrc_passive - qfrc_bias)[i] plus the joint torque of any external force."""

    q: Any
    dq: Any
    m_diag: Any
    i_load: Any
    tau_smooth: Any


class Command(NamedTuple):
    """The control step's command (..., n): target = the delayed q*_k, target_prev = q*_{k-1},
    enable = the delayed enable, v_supply [V]."""

    target: Any
    target_prev: Any
    enable: Any
    v_supply: Any


class StepRecord(NamedTuple):
    """What a physics step records (..., n): the sensed q, dq, the firmware output u, the motor
    effort, friction, external effort, the motor side and temperature at the start of the step, the
    motor current (the fields of :class:`ArmOutputs` but qpos, qvel)."""

    q: Any
    dq: Any
    u: Any
    tau_motor: Any
    tau_friction: Any
    tau_ext: Any
    qm: Any
    dqm: Any
    temperature: Any
    current: Any


def arm_outputs(rec: StepRecord, qpos, qvel) -> ArmOutputs:
    """The :class:`ArmOutputs` of a control step: the first physics step's record and the MuJoCo
    state (qpos, qvel) at the start of the period."""
    return ArmOutputs(rec.q, rec.dq, rec.u, rec.tau_motor, rec.tau_friction, rec.tau_ext, qpos, qvel, rec.qm,
                      rec.dqm, rec.temperature, rec.current)


def check_learned(robot: Robot, lay: _Layout, params) -> LearnedArm | None:
    """``params`` when it is a learned model that can drive ``robot`` (raises a one-line error
    otherwise), None for parameter sets."""
    if not isinstance(params, LearnedArm):
        return None
    if params.n_joints != robot.n_joints:
        raise ModelError(f"learned model has {params.n_joints} joints, {robot.name} {robot.n_joints}")
    if not params.residual and lay.compliant[params.mask].any():
        raise ModelError(f"{robot.name}: a learned (not residual) effort needs rigid channels; "
                         f"compliant transmissions are only corrected (residual)")
    return params


def command_step(xp, hist_target, hist_enable, q_target, enable, dsteps):
    """One control step of the delay line: (hist_target, hist_enable, target, enable) with the new
    command (..., n) pushed in and read ``dsteps`` (n,) [control steps] back."""
    hist_t, hist_e = push(xp, hist_target, q_target), push(xp, hist_enable, enable)
    return hist_t, hist_e, delayed(xp, hist_t, dsteps), delayed(xp, hist_e, dsteps)


def _firmware_tick(a: Actuators, st: ActuatorState, q, dq, cmd: Command, s, tick):
    """(u, q_prev, q_prev2, filt) after the firmware tick at substep ``s``: updated where ``tick``
    (a Python bool on the native backend, skipping the law between ticks; a traced bool on MJX)."""
    if isinstance(tick, (bool, np.bool_)) and not tick:
        return st.u, st.q_prev, st.q_prev2, st.filt
    filt = st.filt + a.a_filt * (cmd.target - st.filt)
    q_meas = q - a.p["q_offset"]
    u = firmware_output(a, target_at(a.xp, a.cfg, s, cmd.target, cmd.target_prev, filt), q_meas, st.q_prev,
                        st.q_prev2, dq, cmd.v_supply)
    if isinstance(tick, (bool, np.bool_)):
        return u, q_meas, st.q_prev, filt
    w = a.xp.where
    return w(tick, u, st.u), w(tick, q_meas, st.q_prev), w(tick, st.q_prev, st.q_prev2), w(tick, filt, st.filt)


def actuator_step(a: Actuators, st: ActuatorState, sensed: Sensed, cmd: Command, s, tick,
                  learned: LearnedArm | None = None, tau_net=None):
    """One physics step of every joint's actuator (the equations of the module docstring).

    ``s`` the substep in the control period, ``tick`` whether the firmware runs at it (``s %
    law_every == 0``); ``learned``/``tau_net`` a learned model and its network's effort (..., n)
    held over the control step (:mod:`actuatorlab.sim.arm_learned`), else None.
    Returns (state after the step, effort to write to ``qfrc_applied`` (..., n), :class:`StepRecord`).
    """
    xp, lay, p = a.xp, a.lay, a.p
    qm, dqm = motor_side(lay, xp, sensed.q, sensed.dq, st.qm, st.dqm)
    u, q_prev, q_prev2, filt = _firmware_tick(a, st, sensed.q, sensed.dq, cmd, s, tick)
    p_hot = hot_params(xp, lay, p, st.temperature)
    tau_m = motor_effort(xp, lay, p_hot, a.lc, u, dqm, cmd.enable)
    cur = motor_current(xp, lay, p_hot, u, dqm, cmd.enable)
    temp1 = thermal_step(xp, lay, p_hot, st.temperature, cur, a.h)
    applied, tau_f, tau_e, qm1, dqm1 = joint_effort(xp, lay, p, tau_m, sensed, qm, dqm, a.h)
    if learned is not None:
        applied = combine_effort(learned, applied, tau_net, xp)
        if not learned.residual:  # record the network's effort as the motor's
            tau_m = xp.where(learned.mask, tau_net, tau_m)
            tau_f = xp.where(learned.mask, 0.0, tau_f)
    rec = StepRecord(sensed.q, sensed.dq, u, tau_m, tau_f, tau_e, qm, dqm, st.temperature, cur)
    return ActuatorState(q_prev, q_prev2, u, filt, qm1, dqm1, temp1), applied, rec
