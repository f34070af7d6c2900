"""One joint: control law -> drive/motor -> transmission (armature, backlash, compliance) ->
friction -> plant, as a pure step ``step(params, consts, state, inputs) -> (state, outputs)``.

The firmware/control law (:mod:`.control`) is evaluated once per control period on the measured
position and held over ``substeps`` physics steps (sample-and-hold). The motor (:mod:`.motor`),
friction (:mod:`.friction`) and plant (:mod:`.plant`) are separate pure functions.

Rigid transmission (one body, inertia I = I_load + armature)::

    tau_m = drive(u, dq, V) [+ tau_extra]        motor effort at the output (supply sag, current limit; + residual)
    tau_e = plant external effort (gravity, bias)
    tau_f = stick_slip(I, dq, tau_m + tau_e, F(tau_m, tau_e, dq), h)
    dq'   = dq + h (tau_m + tau_e + tau_f) / I   semi-implicit Euler, h = dt / substeps
    q'    = q + h dq'

Winding temperature (``+thermal``, voltage drives; :func:`~.motor.winding_resistance`,
:func:`~.motor.winding_temperature_step`): the drive sees R(T) = R (1 + alpha (T - 25 degC)) at the
winding temperature T of the physics step, and T moves by C_th dT/dt = i^2 R(T) - (T - T_amb) / R_th
with the motor current i = tau_drive / kt. The rollout starts T at the log's first logged
temperature (the servo's own sensor, read as the winding's), else at ``ambient_temperature``.

Compliant transmission with backlash (two bodies: motor side q_m with inertia J = armature,
output q with inertia I_load), the coupling effort through the dead band of width b, integrated
semi-implicitly (:func:`two_body_step`)::

    delta = q_m - q;  e = delta - clip(delta, -b/2, b/2)          dead-zone (backlash)
    tau_c' = k e + (k h + c) (dq_m' - dq') [engaged],  c = 2 zeta sqrt(k J_eff), zeta = 0.3
    J dq_m'  = J dq_m + h (tau_m - tau_c' + tau_f),   friction on the gearbox (motor side)
    I dq'    = I dq + h (tau_c' + tau_e)
The spring acts on the positions at the end of the step (implicit), so the step is stable at
any stiffness and an infinitely stiff spring without dead band locks the two bodies into the
rigid transmission above (the compliant extensions contain their rigid parent). The friction's
stick test is taken on the coupled pair, and its gear-mesh loss on the torque the mesh carries.
(Nordin & Gutman, "Controlling mechanical systems with backlash — a survey", Automatica 2002,
dead-zone model.) :func:`two_body_step` is the one function the whole-robot rollouts
(:mod:`actuatorlab.sim.arm`) use as well.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp

from ..errors import ModelError
from .control import LawConstants, get_control_law
from .friction import friction_budget, stick_slip_torque
from .motor import (dc_motor_torque, sagged_supply_voltage, winding_resistance,
                    winding_temperature_step)
from .plant import PlantConstants, carriage, pendulum

__all__ = ["StepConfig", "Constants", "State", "Inputs", "Outputs", "make_step", "drive_effort",
           "two_body_step", "effective_inertia"]

_ZETA = 0.3


@dataclass(frozen=True)
class StepConfig:
    """Static (compile-time) structure of a joint model.

    law: control-law name (``Setup.controller``); plant: "pendulum" | "carriage";
    compliant: two-body transmission with backlash and series stiffness; substeps: physics steps
    per control period; thermal: the model has ``+thermal`` (a winding temperature in the state;
    voltage drives only, :func:`make_step` raises otherwise).
    """

    law: str = "dynamixel_pwm"
    plant: Literal["pendulum", "carriage"] = "pendulum"
    compliant: bool = False
    substeps: int = 1
    thermal: bool = False


class Constants(NamedTuple):
    """Per-log constants: the controller's (:class:`LawConstants`) and the bench's (:class:`PlantConstants`)."""

    law: LawConstants
    plant: PlantConstants


class State(NamedTuple):
    """q [rad|m] output position, dq [rad/s|m/s] output velocity, qm / dqm motor-side position and
    velocity expressed at the output (equal to q, dq for a rigid transmission), q_prev [rad|m] the
    position the controller measured one control period ago, q_prev2 two periods ago;
    temperature [degC] the winding temperature of ``+thermal`` models (None otherwise)."""

    q: jnp.ndarray
    dq: jnp.ndarray
    qm: jnp.ndarray
    dqm: jnp.ndarray
    q_prev: jnp.ndarray
    q_prev2: jnp.ndarray
    temperature: jnp.ndarray | None = None


class Inputs(NamedTuple):
    """Per control period: q_target [rad|m] (already delayed), enable [0/1], v_supply [V];
    tau_extra [N.m|N] an optional effort added to the drive's (held over the period), the hook
    through which a learned residual (:mod:`actuatorlab.learned.joint`) corrects the analytic
    actuator; None (the default) leaves the analytic step unchanged."""

    q_target: jnp.ndarray
    enable: jnp.ndarray
    v_supply: jnp.ndarray
    tau_extra: jnp.ndarray | None = None


class Outputs(NamedTuple):
    """q, dq at the start of the period; u the controller output [V|N.m]; tau_motor, tau_ext,
    tau_friction [N.m|N] efforts at the start of the period; temperature [degC] the winding
    temperature at the start of the period (``+thermal`` models; None otherwise)."""

    q: jnp.ndarray
    dq: jnp.ndarray
    u: jnp.ndarray
    tau_motor: jnp.ndarray
    tau_ext: jnp.ndarray
    tau_friction: jnp.ndarray
    temperature: jnp.ndarray | None = None


def drive_effort(drive: str, p, c: LawConstants, u, dq_motor, enable, v_supply=None, xp=jnp):
    """Effort of the drive at the output for controller output ``u``.

    voltage: DC motor (:func:`dc_motor_torque`); current: ``enable * drive_gain * u`` (an ideal
    current loop, EMPS); effort: ``enable * u`` (ideal torque source).

    v_supply [V] (voltage drive only, optional): the supply's no-load voltage that the law's
    ``u = duty * v_supply`` was computed with. Given, the supply sags through
    ``source_resistance`` (``+sag``): the motor sees duty * V with V from
    :func:`~actuatorlab.models.motor.sagged_supply_voltage`, i.e. u - duty (v_supply - V) (exactly u
    when R_s = 0). Omitted (the whole-robot path), or parameters without
    ``source_resistance`` (older parameter sets), no sag.
    ``xp``: the array namespace (``jax.numpy``; ``numpy`` for the native MuJoCo rollout).
    """
    if drive == "voltage":
        if v_supply is not None and "source_resistance" in p:
            v0 = xp.where(v_supply > 0.0, v_supply, 1.0)
            duty = u / v0
            u = u - duty * (v0 - sagged_supply_voltage(p, v0, duty, dq_motor, xp))  # duty * V
        return dc_motor_torque(p, u, dq_motor, enable, xp)
    if drive == "current":
        return enable * c.drive_gain * u
    return enable * u


def effective_inertia(J, I_load):
    """Reduced inertia of the two-body transmission [kg.m^2 | kg]: J_eff = J I_load / (J + I_load)
    for rotor inertia J (``armature``) and output-side inertia I_load, the inertia that the
    coupling spring sees when both bodies are free."""
    return J * I_load / (J + I_load)


def two_body_step(p, J, I_load, tau_m, tau_e, motor, output, h, xp=jnp):
    """One physics step of the compliant transmission with backlash: returns
    ``(tau_c, tau_f, dqm', dq')``, the effort [N.m | N] the transmission passes to the output over
    the step (the motor side feels its opposite), the friction on the motor side, and both
    bodies' velocities at the end of the step (semi-implicit Euler: positions follow as
    q' = q + h dq').

    Args:
        p: parameters; uses ``backlash`` [rad | m] (full width b of the dead band), ``stiffness``
            [N.m/rad | N/m] (series spring k) and the friction's (:func:`friction_budget`).
        J: rotor inertia (``armature``) and I_load: output-side inertia [kg.m^2 | kg].
        tau_m: motor effort [N.m | N] at the output; tau_e: every other effort on the output
            (gravity, the physics engine's smooth forces).
        motor: (qm, dqm), the motor side's position [rad | m] and velocity [rad/s | m/s],
            expressed at the output; output: (q, dq), the output's.
        h: integration step [s].

    Equations (dead-zone backlash model, Nordin & Gutman, "Controlling mechanical systems with
    backlash -- a survey", Automatica 38 (2002), with a spring-damper contact; backward Euler on
    the spring and its damper)::

        delta = q_m - q
        e     = delta - clip(delta, -b/2, b/2)          deflection beyond the dead band (0 inside)
        K     = k h + c  while engaged (|e| > 0, or b = 0), else 0;  c = 2 zeta sqrt(k J_eff)
        tau_c = k e + K w',   w' = dq_m' - dq'           the spring at the end of the step
        J dq_m' = J dq_m + h (tau_m - tau_c + tau_f),   I dq' = I dq + h (tau_c + tau_e)

    Solved for w' in closed form (one linear equation); the friction's stick/slip
    (:func:`stick_slip_torque`) is taken on the motor side *with the load it drags through the
    spring*: dq_m' moves by h tau_f / J_f with J_f = J (1 + h K / J_eff) / (1 + h K / I), which is
    J for a free rotor (K = 0) and J + I for a rigid spring (K -> inf), so friction brings dq_m'
    towards 0 and never past it (it dissipates), and a stiff joint at rest holds
    |tau_m + tau_e| <= F as the rigid one does. The friction budget reads the load's effort tau_e
    (BAM's external torque, as the rigid step) and charges the gear-mesh loss on the torque the
    mesh carries, the coupling effort before friction. For k -> inf and b = 0 the step is the
    rigid transmission's (the mesh torque tends to the rigid step's (1 - r) tau_m - r tau_e).
    Works on scalars or arrays of any shape (elementwise); ``xp``: ``jax.numpy`` or ``numpy``.
    """
    (qm, dqm), (q, dq) = motor, output
    j_eff = effective_inertia(J, I_load)
    k = p["stiffness"]
    half = 0.5 * p["backlash"]
    delta = qm - q
    e = delta - xp.clip(delta, -half, half)
    engaged = (xp.abs(e) > 0.0) | (half <= 0.0)
    K = xp.where(engaged, k * h + 2.0 * _ZETA * xp.sqrt(k * j_eff), 0.0)
    f0 = k * e
    den = 1.0 + h * K / j_eff
    a = J * dqm + h * tau_m  # momenta before the coupling and the friction
    b = I_load * dq + h * tau_e
    tau_c0 = f0 + K * ((a - h * f0) / J - (b + h * f0) / I_load) / den  # without friction
    budget = friction_budget(p, tau_m, tau_e, dqm, xp=xp, tau_mesh=tau_c0)
    j_f = J * den / (1.0 + h * K / I_load)
    tau_f = stick_slip_torque(j_f, (a - h * tau_c0) / J, 0.0, budget, h, xp=xp)
    tau_c = tau_c0 + K * h * tau_f / (J * den)
    return tau_c, tau_f, (a + h * (tau_f - tau_c)) / J, (b + h * tau_c) / I_load


def make_step(cfg: StepConfig):
    """Build the pure step function for a static configuration."""
    law = get_control_law(cfg.law)
    if cfg.thermal and law.drive != "voltage":
        raise ModelError(f"the +thermal extension (winding temperature) needs a voltage (DC motor) drive; "
                         f"control law {cfg.law!r} drives a {law.drive} (no winding resistance in the model): "
                         f"drop +thermal from the model name")
    plant_fn = pendulum if cfg.plant == "pendulum" else carriage
    n_sub = int(cfg.substeps)

    def step(p, k: Constants, s: State, x: Inputs):
        h = k.law.dt / n_sub
        u = law.fn(k.law, p, x.q_target, s.q, s.q_prev, s.q_prev2, s.dq, x.v_supply)
        I_load, tau_e0 = plant_fn(k.plant, p, s.q)
        if cfg.thermal and s.temperature is None:
            raise ModelError("a +thermal model needs the winding temperature in its state "
                             "(State.temperature); the rollout starts it from the log")

        def hot(T):  # parameters with the winding resistance R(T) (``+thermal``), else p itself
            return p if not cfg.thermal else dict(p, R=winding_resistance(p, T))

        def motor(dq, pT):  # the drive's own effort (its current is motor / kt)
            return drive_effort(law.drive, pT, k.law, u, dq, x.enable, x.v_supply)

        def total(tau):  # plus the residual correction when there is one
            return tau if x.tau_extra is None else tau + x.tau_extra

        def heat(T, tau_motor, pT):  # one physics step of the winding's first-order thermal node
            if not cfg.thermal:
                return T
            return winding_temperature_step(p, T, tau_motor / p["kt"], pT["R"], h)

        tau_m0 = total(motor(s.dqm, hot(s.temperature)))

        if not cfg.compliant:
            def sub(carry, _):
                q, dq, T = carry
                I_load, tau_e = plant_fn(k.plant, p, q)
                inertia = I_load + p["armature"]
                pT = hot(T)
                tau_d = motor(dq, pT)
                tau_m = total(tau_d)
                budget = friction_budget(p, tau_m, tau_e, dq, p["armature"] / inertia)
                tau_f = stick_slip_torque(inertia, dq, tau_m + tau_e, budget, h)
                dq = dq + h * (tau_m + tau_e + tau_f) / inertia
                return (q + h * dq, dq, heat(T, tau_d, pT)), tau_f

            (q, dq, T), tau_f = jax.lax.scan(sub, (s.q, s.dq, s.temperature), None, length=n_sub)
            new = State(q, dq, q, dq, s.q, s.q_prev, T)
        else:
            def sub(carry, _):
                q, dq, qm, dqm, T = carry
                I_load, tau_e = plant_fn(k.plant, p, q)
                J = p["armature"]
                # a plant whose whole moving mass is the armature (EMPS carriage) keeps 0.1 % of it
                # on the output side so that the two-body model stays defined
                I_load = jnp.maximum(I_load, 1e-3 * J)
                pT = hot(T)
                tau_d = motor(dqm, pT)
                tau_m = total(tau_d)
                _, tau_f, dqm, dq = two_body_step(p, J, I_load, tau_m, tau_e, (qm, dqm), (q, dq), h)
                return (q + h * dq, dq, qm + h * dqm, dqm, heat(T, tau_d, pT)), tau_f

            (q, dq, qm, dqm, T), tau_f = jax.lax.scan(sub, (s.q, s.dq, s.qm, s.dqm, s.temperature), None,
                                                      length=n_sub)
            new = State(q, dq, qm, dqm, s.q, s.q_prev, T)
        out = Outputs(s.q, s.dq, u, tau_m0, tau_e0, tau_f[0], s.temperature)
        return new, out

    return step
