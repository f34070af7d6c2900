"""Excitation design for a floating-base robot hung in the air (the legged suite's identification protocol).

A legged robot is identified safely with its base fixed in the air and its legs excited one joint at a time
(:mod:`actuatorlab.synth.legged`). ``actuatorlab excite --robot anymal_c`` therefore designs on the robot
as the protocol runs it (:func:`in_air_setup`): the base welded (:func:`~actuatorlab.robots.fixed_base.
on_fixed_base`), the protocol's drive gains (:data:`~actuatorlab.synth.legged.TRAIN_GAIN`), candidates that
move one joint at a time around the standing pose inside the protocol's safety box
(:data:`~actuatorlab.synth.legged.SAFETY`: the box per joint type, 80 % of it for the commands, the
commanded speed cap, the torque cap as the effort share). The design is then run on the virtual hardware's
truth drives (:func:`truth_check`, the in-air simulator of the legged suite, the twelve drives ``synth``
draws for a seed) and every limit a selected segment breaks there is reported: the model the design used is
not the hardware.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import mujoco
import numpy as np

from ..errors import ModelError
from ..robots.fixed_base import on_fixed_base
from ..robots.loader import Robot, home_qpos
from ..synth.legged import JOINT_TYPES, SAFETY, TRAIN_GAIN, draw_units
from ..synth.legged_sim import LeggedRun, backed_off, legged_robot
from .candidates import RobotLimits, Segment

__all__ = ["floating_base", "in_air_setup", "truth_check"]


def floating_base(robot: Robot) -> bool:
    """True when the robot's MJCF has a free joint (a floating base)."""
    m = robot.model()
    return bool(m.njnt and m.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE) and not robot.fixed_base


def in_air_setup(robot: Robot, limits: RobotLimits) -> tuple[Robot, np.ndarray, RobotLimits]:
    """(the robot welded in the air with the protocol's gains, its standing pose (n,) [rad], the limits of
    the protocol: ranges = standing pose +- the safety box of the joint's type, margin = the 20 % of the
    smallest box the commands keep free, v_max and effort share capped by the protocol's). Joints whose name
    has no protocol type keep ``limits`` and need their own range."""
    types = dict(SAFETY.half_range)
    r = on_fixed_base(robot)
    kp, kd = TRAIN_GAIN
    r = dataclasses.replace(r, joints=tuple(dataclasses.replace(
        j, gains=tuple(sorted({**dict(j.gains), "kp": kp, "kd": kd}.items()))) for j in r.joints))
    home = home_qpos(r.model())[r.qpos_adr]
    ranges = dict((n, (lo, hi)) for n, lo, hi in limits.ranges)
    for i, j in enumerate(r.joint_names):
        jt = j.rsplit("_", 1)[-1]
        if j not in ranges and jt in types:
            ranges[j] = (float(home[i] - types[jt]), float(home[i] + types[jt]))
    margin = (1.0 - SAFETY.command_share) * min(types.values())
    share = min(SAFETY.torque / j.effort_limit for j in r.joints)
    lim = dataclasses.replace(limits, ranges=tuple((n, lo, hi) for n, (lo, hi) in ranges.items()),
                              margin=min(limits.margin, margin), v_max=min(limits.v_max, SAFETY.command_speed),
                              effort_share=min(limits.effort_share, share))
    return r, home, lim


def truth_check(robot: Robot, segments: list[Segment], seed: int = 0) -> list[dict[str, Any]]:
    """Every segment run on the virtual hardware's truth in the air (the drives ``synth --robot anymal_c
    --suite legged --seed SEED`` draws, the protocol's gains, no load): per segment its name, the truth's
    extremes per joint type (max |q - standing| [rad], |dq| [rad/s], |tau| [N.m]), the safety limits
    broken (empty: safe) and ``safe_amplitude``: the share of the segment's amplitude around the standing
    pose at which the truth stays inside them (the protocol's back-off, x0.7 per try; None after
    :data:`~actuatorlab.synth.legged_sim.MAX_TRIES` tries)."""
    if robot.name != "anymal_c":
        raise ModelError(f"the truth check is the legged suite's (anymal_c), not {robot.name}'s")
    lr = legged_robot(robot.name)
    units = draw_units(np.random.default_rng([int(seed), 0]), lr.n_joints)
    home = home_qpos(lr.model())[lr.qpos_adr]
    temp0 = np.array([a.thermal.ambient + a.thermal.start_rise for a in units])
    dt = units[0].sensors.log_dt
    out = []
    for k, s in enumerate(segments):
        if abs(s.dt - dt) > 1e-9:
            raise ModelError(f"segment {s.name}: command period {s.dt} s, the protocol logs at {dt} s")
        amp, _, tries, ex = backed_off(lr, units, LeggedRun(np.asarray(s.q) - home, TRAIN_GAIN, 0.0, temp0),
                                       [int(seed), 3, k], home)
        out.append({"segment": s.name, "extremes": {jt: {key.split("_", 2)[-1]: v for key, v in ex.items()
                                                         if key.startswith(jt)} for jt in JOINT_TYPES},
                    "broken": tries[0]["broken"] if tries else [], "safe_amplitude": amp})
    return out
