"""DC motor seen from the joint output: back-EMF torque-speed envelope and current limit."""

from __future__ import annotations

import jax.numpy as jnp

__all__ = ["dc_motor_torque"]


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
