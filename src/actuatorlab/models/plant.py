"""Plants of the test benches: what the actuator drives.

Each plant returns the load inertia [kg.m^2 | kg] and the external effort on the joint
[N.m | N] (gravity, biases) for a state. Constants come from the log's ``Setup.bench``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from .control import Constant

__all__ = ["PlantConstants", "pendulum", "carriage", "GRAVITY"]

GRAVITY = 9.81  # [m/s^2]


class PlantConstants(NamedTuple):
    """mass [kg] tip point mass; length [m] pivot to mass; arm_mass [kg] uniform rod;
    gravity [m/s^2] (0 for a horizontal axis / prismatic carriage)."""

    mass: Constant
    length: Constant
    arm_mass: Constant
    gravity: Constant


def pendulum(c: PlantConstants, p, q):
    """Pendulum bench (q = 0 hangs down, positive counter-clockwise).

    I_load  = m l^2 + m_arm l^2 / 3                                   [kg.m^2]
    tau_ext = -(m l + m_arm l / 2) g sin(q + q_offset) - force_offset [N.m]
    """
    inertia = c.mass * c.length**2 + c.arm_mass * c.length**2 / 3.0
    tau = -(c.mass * c.length + 0.5 * c.arm_mass * c.length) * c.gravity * jnp.sin(q + p["q_offset"])
    return inertia, tau - p["force_offset"]


def carriage(c: PlantConstants, p, q):
    """Prismatic carriage (EMPS): all moving mass is in ``armature``; external force is the bias.

    I_load = mass (0 for EMPS: the identified M is the armature)      [kg]
    f_ext  = -force_offset                                            [N]
    """
    return c.mass + 0.0 * q, -p["force_offset"] + 0.0 * q
