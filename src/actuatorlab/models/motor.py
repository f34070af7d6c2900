"""DC motor seen from the joint output: back-EMF torque-speed envelope, current limit, supply sag
through a source resistance (``+sag``), and the winding temperature of ``+thermal`` models (R(T),
Joule heating).

What limits a PWM servo's torque at stall and at speed (all output-side SI, see docs/models.md):

* the firmware's PWM limit: |duty| <= max_duty (XL330 "PWM Limit" register, 885 = 100 %; in the
  control law, :mod:`.control`);
* the supply voltage V behind the H-bridge: logged, or the nominal one sagging under the supply
  current through a source resistance (:func:`sagged_supply_voltage`);
* winding (+ bridge) resistance R and back-EMF kt dq: i = (duty V - kt dq) / R;
* the firmware's current limit I_max (XL330 "Current Limit" register, 1750 mA by default).

Together (:func:`torque_envelope`)::

    tau_max(dq) = kt min(I_max, (d_max V - kt dq) / R),   tau_min(dq) = kt max(-I_max, (-d_max V - kt dq) / R)

The functions the whole-robot rollouts step with take ``xp``, the array namespace (``jax.numpy`` by
default; ``numpy`` in the native MuJoCo rollout).
"""

from __future__ import annotations

import jax.numpy as jnp

__all__ = ["dc_motor_torque", "dc_motor_current", "sagged_supply_voltage", "torque_envelope",
           "R_REFERENCE_TEMPERATURE", "winding_resistance", "winding_temperature_step"]

#: [degC] temperature at which the parameter ``R`` holds (``+thermal`` models).
R_REFERENCE_TEMPERATURE = 25.0


def dc_motor_torque(p, volts, dq, enabled, xp=jnp):
    """Torque of a voltage-driven DC motor (armature inductance neglected: L/R << dt).

    i   = clip((u - kt * dq_m) / R, -current_limit, current_limit)       [A]
    tau = enabled * kt * i                                               [N.m]
    with ``kt`` the torque constant times the gear ratio (equal to the back-EMF constant in SI),
    ``dq_m`` the output-side velocity. This gives the four-quadrant torque-speed envelope
    tau_max(dq) = kt (V - kt dq) / R, the stall torque kt V / R and no-load speed V / kt.
    Torque disabled (``enabled == 0``) opens the bridge: no torque, no back-EMF braking.
    """
    i = xp.clip((volts - p["kt"] * dq) / p["R"], -p["current_limit"], p["current_limit"])
    return enabled * p["kt"] * i


def dc_motor_current(p, volts, dq, enabled, xp=jnp):
    """Armature current [A] of :func:`dc_motor_torque`: enabled * clip((u - kt dq_m) / R, +-I_max)
    (0 with the bridge open)."""
    return enabled * xp.clip((volts - p["kt"] * dq) / p["R"], -p["current_limit"], p["current_limit"])


def sagged_supply_voltage(p, v0, duty, dq, xp=jnp):
    """Supply voltage [V] at the H-bridge when the supply (no-load voltage ``v0`` [V]) has a source
    resistance R_s = ``source_resistance`` [ohm] (battery / bench supply / cable), solved exactly
    (no lag, no iteration) together with the motor equation of :func:`dc_motor_torque`.

    A PWM bridge at duty d draws the average supply current i_s = d i from the supply (switching
    losses neglected), and the motor current is i = (d V - kt dq) / R. With V = v0 - R_s i_s::

        V_lin = (v0 + R_s d kt dq / R) / (1 + R_s d^2 / R)            both equations at once
        V_1   = min(v0, V_lin)                                         the supply only sources current
        V     = max(0, v0 - R_s max(0, d clip((d V_1 - kt dq) / R, +-I_max)))   with the current limit

    The supply only sources current (i_s >= 0): a regenerating motor does not raise V above v0
    (the returned energy goes into the bridge and bus capacitor, not modelled). Where the current
    limit binds, i = +-I_max and the sag is R_s d I_max. R_s = 0 gives V = v0 exactly, so ``+sag``
    contains its parent. At stall and full duty, i = v0 / (R + R_s): the stall torque kt v0 /
    (R + R_s) drops while light loads (small d) barely sag, a duty-dependent effective resistance
    R + d^2 R_s that a constant R cannot mimic. (Thevenin source model of a supply, e.g.
    Horowitz & Hill, The Art of Electronics, 3rd ed., sec. 1.2.)

    Arguments broadcast elementwise: ``v0`` [V], ``duty`` [1] (in [-1, 1]), ``dq`` [rad/s | m/s]
    output-side velocity; ``p`` uses kt, R, current_limit, source_resistance.
    """
    rs, R, kt = p["source_resistance"], p["R"], p["kt"]
    v_lin = (v0 + rs * duty * kt * dq / R) / (1.0 + rs * duty * duty / R)
    v1 = xp.minimum(v0, v_lin)
    i = xp.clip((duty * v1 - kt * dq) / R, -p["current_limit"], p["current_limit"])
    return xp.maximum(v0 - rs * xp.maximum(duty * i, 0.0), 0.0)


def torque_envelope(p, v_supply, dq, max_duty=1.0):
    """(tau_min, tau_max) [N.m | N]: the efforts the motor can produce at velocity ``dq`` with the
    firmware at its PWM limit ``max_duty`` on a supply of no-load voltage ``v_supply`` (sagging
    through ``source_resistance``), i.e. :func:`dc_motor_torque` at duty = +-max_duty::

        tau_max(dq) = kt clip((d_max V(+d_max) - kt dq) / R, +-I_max)
        tau_min(dq) = kt clip((-d_max V(-d_max) - kt dq) / R, +-I_max) = -tau_max(-dq)

    Odd-symmetric in (duty, dq); at stall tau_max = kt min(I_max, d_max V / R)."""
    d = jnp.asarray(max_duty, dtype=jnp.result_type(v_supply, dq))

    def at(duty):
        v = sagged_supply_voltage(p, v_supply, duty, dq)
        return dc_motor_torque(p, duty * v, dq, 1.0)

    return at(-d), at(d)


def winding_resistance(p, temperature):
    """Winding resistance [ohm] at ``temperature`` [degC] (linear copper law):

        R(T) = R (1 + alpha (T - 25 degC))

    with ``R`` the resistance at :data:`R_REFERENCE_TEMPERATURE` and alpha = ``resistance_tempco``
    [1/K] (0.00393/K for annealed copper near room temperature; e.g. the CRC Handbook of Chemistry
    and Physics, "Electrical resistivity of pure metals")."""
    return p["R"] * (1.0 + p["resistance_tempco"] * (temperature - R_REFERENCE_TEMPERATURE))


def winding_temperature_step(p, temperature, current, R_T, h):
    """Winding temperature [degC] after one explicit Euler step of h [s] of the first-order
    thermal model (one lumped node, winding + case, to ambient):

        C_th dT/dt = i^2 R(T) - (T - T_amb) / R_th

    with C_th = ``thermal_capacitance`` [J/K], R_th = ``thermal_resistance`` [K/W], T_amb =
    ``ambient_temperature`` [degC], ``current`` i [A] and ``R_T`` = R(T) [ohm]. At constant heat P
    the solution approaches T_amb + R_th P with time constant R_th C_th (the standard motor
    thermal model, e.g. maxon's "Key information on maxon DC motors", thermal data). Euler is
    stable for h < 2 R_th C_th (seconds here against physics steps of about 1 ms)."""
    heat = current * current * R_T
    return temperature + h * (heat - (temperature - p["ambient_temperature"]) / p["thermal_resistance"]) \
        / p["thermal_capacitance"]
