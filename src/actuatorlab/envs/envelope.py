"""The operating envelope at run time: per joint and per episode, the time spent outside the region
the fitted model's training data covered (:mod:`actuatorlab.evaluate.envelope`).

An envelope (the ``envelope`` dict of a model.json, :func:`~actuatorlab.evaluate.envelope.
compute_envelope`) records 1-D ranges of ``position`` [rad | m], ``velocity`` [rad/s | m/s] and
``effort`` [1] (controller output over its limit), the ``saturation_level`` and the share of
training samples with a saturated controller. At every command tick of an episode each joint is
checked in four dimensions::

    position    q  outside [lower, upper]
    velocity    dq outside [lower, upper]
    effort      e = u / u_lim outside [lower, upper]     u the firmware output, u_lim = max_duty *
                                                         v_supply (PWM laws) or u_max (PD, EMPS)
    saturation  |e| >= saturation_level while the training data never saturated
                (regimes.saturated == 0)

with the envelope's own rules (:func:`~actuatorlab.evaluate.envelope.beyond`,
:func:`~actuatorlab.evaluate.envelope.saturated`: the evaluation's log check uses the same), so
a sample counted here is outside the evaluation's 1-D ranges too. What is specific to running
inside an environment is here: the per-joint bound arrays (jit-ready, +-inf where unchecked), the
normalisation of the firmware output into the effort [1] and the stacked counters.

and the tick counts (``DIMS`` + "any") are accumulated in the environment state; the environments
expose them as seconds (ticks x command_dt). The 2-D occupancy planes and the conditions are not
checked at run time (the 1-D ranges are what a policy can be held to). A joint without an
envelope, or a dimension the envelope lacks, is never outside.

``envelope`` passed to an environment is either one envelope dict (applied to every modelled
joint: one actuator type identified on one bench) or ``{joint name: envelope dict}``.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

import numpy as np

from ..errors import ModelError, UnknownNameError
from ..evaluate.envelope import beyond, saturated, validate_envelope
from ..models.control import DEFAULT_ERROR_GAIN

__all__ = ["DIMS", "EnvelopeBounds", "envelope_bounds", "effort_limit", "outside"]

#: checked dimensions, in the order of the counters (then "any")
DIMS: tuple[str, ...] = ("position", "velocity", "effort", "saturation")


class EnvelopeBounds(NamedTuple):
    """Per joint (n,): lower / upper of position [rad | m], velocity [rad/s | m/s], effort [1]
    (+-inf where unchecked); sat_level [1] (inf: saturation not checked)."""

    pos_lo: np.ndarray
    pos_hi: np.ndarray
    vel_lo: np.ndarray
    vel_hi: np.ndarray
    eff_lo: np.ndarray
    eff_hi: np.ndarray
    sat_level: np.ndarray


def envelope_bounds(robot, envelope: Mapping[str, Any] | None) -> EnvelopeBounds | None:
    """Per-joint bounds of ``envelope`` (one dict for every joint or {joint: dict}); None for None."""
    if envelope is None:
        return None
    n = robot.n_joints
    inf = np.full(n, np.inf)
    b = {k: (-inf if k.endswith("lo") else inf).copy() for k in EnvelopeBounds._fields}
    if "version" in envelope:
        per_joint = {j: envelope for j in robot.joint_names}
    else:
        per_joint = dict(envelope)
        for j in per_joint:
            if j not in robot.joint_names:
                raise UnknownNameError("joint", j, robot.joint_names)
    keys = {"position": ("pos_lo", "pos_hi"), "velocity": ("vel_lo", "vel_hi"), "effort": ("eff_lo", "eff_hi")}
    for j, env in per_joint.items():
        if env is None:
            continue
        validate_envelope(env, f"envelope of {j}")
        i = robot.index(j)
        for dim, (lo, hi) in keys.items():
            d = env["dimensions"].get(dim)
            if d is not None:
                b[lo][i], b[hi][i] = float(d["lower"]), float(d["upper"])
        if "effort" in env["dimensions"] and float(env.get("regimes", {}).get("saturated", 1.0)) == 0.0:
            b["sat_level"][i] = float(env["settings"].get("saturation_level", 0.95))
    if not any(np.isfinite(v).any() for v in b.values()):
        raise ModelError("envelope: no position, velocity or effort range for any joint")
    return EnvelopeBounds(**b)


def effort_limit(robot, lc) -> np.ndarray:
    """u_lim (n,) [V | N.m]: the firmware output of a saturated controller (PWM laws: max_duty x
    supply voltage; other laws: u_max), to normalise u into the envelope's effort [1]."""
    pwm = np.array([j.law in DEFAULT_ERROR_GAIN for j in robot.joints])
    v = np.array([j.supply_voltage for j in robot.joints])
    lim = np.where(pwm, np.asarray(lc.max_duty) * v, np.asarray(lc.u_max))
    return np.where(lim > 0, lim, 1.0)


def outside(xp, b: EnvelopeBounds, q, dq, effort):
    """(..., 5, n) bool: outside per dimension of :data:`DIMS`, then "any"; q, dq, effort (..., n)."""
    pos = beyond(q, b.pos_lo, b.pos_hi, xp)
    vel = beyond(dq, b.vel_lo, b.vel_hi, xp)
    eff = beyond(effort, b.eff_lo, b.eff_hi, xp)
    sat = saturated(effort, b.sat_level, xp)
    anyd = pos | vel | eff | sat
    return xp.stack([pos, vel, eff, sat, anyd], axis=-2)
