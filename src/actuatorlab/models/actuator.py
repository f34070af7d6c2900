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
output q with inertia I_load), the coupling effort through the dead band of width b::

    delta = q_m - q;  e = delta - clip(delta, -b/2, b/2)          dead-zone (backlash)
    tau_c = k e + c (dq_m - dq) [e != 0],   c = 2 zeta sqrt(k J_eff), zeta = 0.3
    k is capped at 0.25 J_eff / h^2 (omega h <= 0.5) so the explicit step stays stable.
    J dq_m'  = J dq_m + h (tau_m - tau_c + tau_f),   friction on the gearbox (motor side)
    I dq'    = I dq + h (tau_c + tau_e)
(Nordin & Gutman, "Controlling mechanical systems with backlash — a survey", Automatica 2002,
dead-zone model.) The coupling is :func:`transmission_coupling` (J_eff: :func:`effective_inertia`),
the one function the whole-robot rollouts (:mod:`actuatorlab.sim.arm`) use as well.
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
           "transmission_coupling", "effective_inertia"]

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


def transmission_coupling(p, qm, dqm, q, dq, j_eff, h, xp=jnp):
    """Effort [N.m | N] that a compliant transmission with backlash passes from the motor side to
    the output (the motor side feels its opposite).

    Args:
        p: parameters; uses ``backlash`` [rad | m] (full width b of the dead band) and
            ``stiffness`` [N.m/rad | N/m] (series spring k).
        qm, dqm: motor-side position [rad | m] and velocity [rad/s | m/s], expressed at the output.
        q, dq: output position and velocity (same units).
        j_eff: reduced inertia of the two bodies [kg.m^2 | kg] (:func:`effective_inertia`).
        h: integration step [s].

    Equations (dead-zone backlash model, Nordin & Gutman, "Controlling mechanical systems with
    backlash -- a survey", Automatica 38 (2002), with a spring-damper contact)::

        delta = q_m - q
        e     = delta - clip(delta, -b/2, b/2)         deflection beyond the dead band (0 inside)
        k_s   = min(k, 0.25 J_eff / h^2)               omega h <= 0.5: the explicit step stays stable
        c     = 2 zeta sqrt(k_s J_eff),  zeta = 0.3    contact damping, only while engaged
        tau_c = k_s e + c (dq_m - dq) [e != 0]

    A spring stiffer than the step can resolve acts as the stiffest resolvable one; b = 0 gives a
    plain series spring (``+compliance``). Inside the band tau_c is exactly 0. Works on scalars or
    arrays of any shape (elementwise); ``xp`` is the array namespace (``jax.numpy``, or ``numpy``
    for the native MuJoCo rollout).
    """
    k_s = xp.minimum(p["stiffness"], 0.25 * j_eff / h**2)
    half = 0.5 * p["backlash"]
    delta = qm - q
    e = delta - xp.clip(delta, -half, half)
    engaged = xp.abs(e) > 0.0
    c_d = 2.0 * _ZETA * xp.sqrt(k_s * j_eff)
    return k_s * e + xp.where(engaged, c_d * (dqm - dq), 0.0)


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
                tau_c = transmission_coupling(p, qm, dqm, q, dq, effective_inertia(J, I_load), h)
                pT = hot(T)
                tau_d = motor(dqm, pT)
                tau_m = total(tau_d)
                budget = friction_budget(p, tau_m, -tau_c, dqm)
                tau_f = stick_slip_torque(J, dqm, tau_m - tau_c, budget, h)
                dqm = dqm + h * (tau_m - tau_c + tau_f) / J
                dq = dq + h * (tau_c + tau_e) / I_load
                return (q + h * dq, dq, qm + h * dqm, dqm, heat(T, tau_d, pT)), tau_f

            (q, dq, qm, dqm, T), tau_f = jax.lax.scan(sub, (s.q, s.dq, s.qm, s.dqm, s.temperature), None,
                                                      length=n_sub)
            new = State(q, dq, qm, dqm, s.q, s.q_prev, T)
        out = Outputs(s.q, s.dq, u, tau_m0, tau_e0, tau_f[0], s.temperature)
        return new, out

    return step
