"""DC motor seen from the joint output: back-EMF torque-speed envelope, current limit, and the
winding temperature of ``+thermal`` models (R(T), Joule heating)."""

from __future__ import annotations

import jax.numpy as jnp

__all__ = ["dc_motor_torque", "dc_motor_current", "R_REFERENCE_TEMPERATURE", "winding_resistance",
           "winding_temperature_step"]

#: [degC] temperature at which the parameter ``R`` holds (``+thermal`` models).
R_REFERENCE_TEMPERATURE = 25.0


def dc_motor_torque(p, volts, dq, enabled):
    """Torque of a voltage-driven DC motor (armature inductance neglected: L/R << dt).

    i   = clip((u - kt * dq_m) / R, -current_limit, current_limit)       [A]
    tau = enabled * kt * i                                               [N.m]
    with ``kt`` the torque constant times the gear ratio (equal to the back-EMF constant in SI),
    ``dq_m`` the output-side velocity. This gives the four-quadrant torque-speed envelope
    tau_max(dq) = kt (V - kt dq) / R, the stall torque kt V / R and no-load speed V / kt.
    Torque disabled (``enabled == 0``) opens the bridge: no torque, no back-EMF braking.
    """
    i = jnp.clip((volts - p["kt"] * dq) / p["R"], -p["current_limit"], p["current_limit"])
    return enabled * p["kt"] * i


def dc_motor_current(p, volts, dq, enabled):
    """Armature current [A] of :func:`dc_motor_torque`: enabled * clip((u - kt dq_m) / R, +-I_max)
    (0 with the bridge open)."""
    return enabled * jnp.clip((volts - p["kt"] * dq) / p["R"], -p["current_limit"], p["current_limit"])


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
