"""Control laws at the real interface boundary: what the firmware/controller computes from a target.

Each law is a pure function ``law(c, p, q_target, q, q_prev, q_prev2, dq, v_supply) -> u`` where ``c`` holds
the log's constants (gains in the controller's own units, see :class:`LawConstants`), ``p`` the
model parameters, ``q``/``q_prev``/``q_prev2`` the positions the controller *measures* now and one
and two control periods earlier, ``dq`` its velocity reading, ``v_supply`` [V] the supply voltage. ``u`` is either
a motor voltage [V] (``drive == "voltage"``: an H-bridge feeding the DC motor, see
:mod:`actuatorlab.models.motor`) or a drive command whose effort is ``drive_gain * u``
(``drive == "current"``: a current-controlled drive) or an effort directly (``drive == "effort"``).
Every law also takes ``xp``, the array namespace it computes with (``jax.numpy`` by default,
``numpy`` in the native MuJoCo rollout), so both whole-robot backends run the same function.

The registry :data:`CONTROL_LAWS` maps the names used in ``Setup.controller`` to a
:class:`ControlLaw`; an unknown name raises an error that lists what exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import UnknownNameError

__all__ = ["LawConstants", "ControlLaw", "CONTROL_LAWS", "get_control_law",
           "DYNAMIXEL_ERROR_GAIN", "dynamixel_pwm", "feetech_pwm", "pd_effort", "emps_cascade"]

#: Dynamixel X-series (XL330, XM430) position P term to duty cycle, per rad and per register unit:
#: error in counts (4096 per turn) times Position P Gain / 128 / ... gives PWM counts out of 885;
#: BAM (Duclusaud et al. 2025) measured duty = kp * (4096/2pi)/(256*885) * error.
DYNAMIXEL_ERROR_GAIN = (4096.0 / (2.0 * jnp.pi)) / (256.0 * 885.0)
#: Feetech STS: duty per rad of position error per unit of the firmware P gain. BAM's identified
#: STS3215 actuator uses 0.166 (Rhoban/bam, Feetech actuator definition); the firmware is not
#: documented, so fits on Feetech logs also free ``gain_scale`` (``+gain``).
FEETECH_ERROR_GAIN = 0.166


Constant = jax.Array | np.ndarray | float  # a per-log constant: shape () or (n_logs,)


class LawConstants(NamedTuple):
    """Per-log controller constants (arrays of shape () or (n_logs,) when batched).

    kp: [controller units] position gain (Dynamixel/Feetech register value, EMPS 1/s, PD N.m/rad)
    kd: [controller units] velocity gain (EMPS kv in V/(m/s), PD N.m.s/rad; unused by PWM laws)
    error_gain: [duty/(rad . register unit)] PWM laws only
    max_duty: [1] duty-cycle saturation of the PWM laws
    u_max: [V | N.m] output saturation of the EMPS / PD laws
    drive_gain: [N.m/V | N/V] effort per unit of output of a current-mode drive (EMPS gtau)
    dt: [s] control period
    """

    kp: Constant
    kd: Constant
    error_gain: Constant
    max_duty: Constant
    u_max: Constant
    drive_gain: Constant
    dt: Constant


def dynamixel_pwm(c: LawConstants, p, q_target, q, q_prev, q_prev2, dq, v_supply, xp=jnp):
    """Dynamixel X-series position loop in PWM (voltage) mode, P term only.

    duty = clip(gain_scale * kp * error_gain * (q_target - q), -max_duty, max_duty)
    u = duty * v_supply                                                [V]
    (Duclusaud et al., "Extended Friction Models for the Physics Simulation of Servo Actuators",
    ICRA 2025, measured error_gain with an oscilloscope.)
    """
    duty = xp.clip(p["gain_scale"] * c.kp * c.error_gain * (q_target - q), -c.max_duty, c.max_duty)
    return duty * v_supply


def feetech_pwm(c: LawConstants, p, q_target, q, q_prev, q_prev2, dq, v_supply, xp=jnp):
    """Feetech STS position loop: same structure as :func:`dynamixel_pwm` with its own error gain.

    duty = clip(gain_scale * kp * error_gain * (q_target - q), -max_duty, max_duty); u = duty * v_supply.
    The conversion from the firmware's P gain to duty is not published: ``gain_scale`` is free in
    fits on Feetech logs.
    """
    return dynamixel_pwm(c, p, q_target, q, q_prev, q_prev2, dq, v_supply, xp)


def pd_effort(c: LawConstants, p, q_target, q, q_prev, q_prev2, dq, v_supply, xp=jnp):
    """Generic PD with an effort limit (an ideal torque source): u = clip(kp (q_t - q) - kd dq, +-u_max) [N.m]."""
    return xp.clip(c.kp * (q_target - q) - c.kd * dq, -c.u_max, c.u_max)


def emps_cascade(c: LawConstants, p, q_target, q, q_prev, q_prev2, dq, v_supply, xp=jnp):
    """EMPS position/velocity cascade (Janot, Gautier, Brunot, EMPS benchmark, 2019).

    qf[k]  = (q[k] + q[k-1]) / 2                                     2-tap position filter
    qd_hat = (qf[k] - qf[k-1]) / dt = (q[k] - q[k-2]) / (2 dt)
    v      = clip(kv * (kp * (q_g - q) - qd_hat), -u_max, u_max)    [V], u_max = 10 V
    The drive then produces the force ``drive_gain * v`` (gtau = 35.15 N/V). The logged ``vir``
    follows this law with no extra delay (3.7 mV RMS, docs/emps.md); the benchmark's Simulink
    model adds one sample of output delay, which the ``delay`` parameter can represent.
    """
    qd_hat = (q - q_prev2) / (2.0 * c.dt)
    return xp.clip(c.kp * c.kd * (q_target - q) - c.kd * qd_hat, -c.u_max, c.u_max)


@dataclass(frozen=True)
class ControlLaw:
    """A named control law and the kind of drive its output feeds."""

    name: str
    fn: Callable
    drive: Literal["voltage", "current", "effort"]
    description: str


CONTROL_LAWS: dict[str, ControlLaw] = {
    "dynamixel_pwm": ControlLaw("dynamixel_pwm", dynamixel_pwm, "voltage",
                                "Dynamixel X-series PWM position law (duty = kp*error_gain*error)"),
    "feetech_pwm": ControlLaw("feetech_pwm", feetech_pwm, "voltage",
                              "Feetech STS PWM position law"),
    "pd": ControlLaw("pd", pd_effort, "effort", "PD torque law with effort limit"),
    "emps_cascade": ControlLaw("emps_cascade", emps_cascade, "current",
                               "EMPS cascaded position/velocity law, +/-10 V, force = gtau * v"),
}

#: Default error gains per law (duty per rad per register unit).
DEFAULT_ERROR_GAIN = {"dynamixel_pwm": float(DYNAMIXEL_ERROR_GAIN), "feetech_pwm": float(FEETECH_ERROR_GAIN)}


def get_control_law(name: str) -> ControlLaw:
    try:
        return CONTROL_LAWS[name]
    except KeyError:
        raise UnknownNameError("control law", name, list(CONTROL_LAWS)) from None
