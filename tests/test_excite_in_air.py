"""Excitation design for a floating-base robot in the air (issue 44 item 2): the legged protocol's setup, its
candidates inside the safety box, and the design checked on the virtual hardware's truth."""

from __future__ import annotations

import numpy as np
import pytest

from actuatorlab.errors import ModelError
from actuatorlab.excite.candidates import RobotLimits, Segment, robot_candidates
from actuatorlab.excite.in_air import floating_base, in_air_setup, truth_check
from actuatorlab.robots.loader import load_robot
from actuatorlab.synth.legged import SAFETY, TRAIN_GAIN

ANYMAL = load_robot("anymal_c")


def test_the_in_air_setup_is_the_protocols():
    assert floating_base(ANYMAL) and not floating_base(load_robot("open_manipulator_x"))
    r, home, lim = in_air_setup(ANYMAL, RobotLimits())
    assert r.fixed_base and not floating_base(r) and r.model().nq == 12
    assert all(dict(j.gains)["kp"] == TRAIN_GAIN[0] and dict(j.gains)["kd"] == TRAIN_GAIN[1] for j in r.joints)
    ranges = {n: (lo, hi) for n, lo, hi in lim.ranges}
    for i, j in enumerate(r.joint_names):
        lo, hi = ranges[j]
        assert np.isclose(0.5 * (lo + hi), home[i]) and np.isclose(0.5 * (hi - lo), SAFETY.box(j[-3:]))
    assert lim.v_max == SAFETY.command_speed and np.isclose(lim.effort_share, SAFETY.torque / 80.0)
    assert np.isclose(lim.margin, 0.2 * 0.25)


def test_in_air_candidates_never_leave_the_commanded_safety_box():
    """Every single-joint candidate: one joint moves, inside standing +- 80 % of its type's box, commanded
    speed <= the cap."""
    r, home, lim = in_air_setup(ANYMAL, RobotLimits())
    segs = robot_candidates(r, None, lim, segment_s=1.5, families=("single",), home=home)
    assert len(segs) >= 12
    for s in segs:
        off = s.q - home
        moving = np.flatnonzero(np.max(np.abs(off), axis=0) > 1e-9)
        assert len(moving) <= 1, s.name
        for i in moving:
            box = SAFETY.box(r.joint_names[i][-3:])
            assert np.max(np.abs(off[:, i])) <= SAFETY.command_share * box + 1e-9, s.name
        assert np.max(np.abs(np.diff(s.q, axis=0))) / s.dt <= SAFETY.command_speed + 1e-6, s.name


def test_the_truth_check_finds_what_the_model_hides_and_backs_off():
    """A fast hip sweep (inside the box, faster than the commanded cap) overshoots the truth's speed cap;
    a slow one is safe at full amplitude; the unsafe one becomes safe after backing off."""
    r, home, _ = in_air_setup(ANYMAL, RobotLimits())
    t = np.arange(75) * 0.02
    i = r.index("LF_HFE")

    def seg(name, amp, f):
        q = np.tile(home, (t.size, 1))
        q[:, i] += amp * np.sin(2 * np.pi * f * t)
        return Segment(name, q, 0.02)

    out = truth_check(r, [seg("slow", 0.3, 0.3), seg("fast", 0.45, 2.5)])
    slow, fast = out
    assert slow["broken"] == [] and slow["safe_amplitude"] == 1.0
    assert fast["broken"] and any("HFE speed" in b for b in fast["broken"]), fast
    assert fast["safe_amplitude"] is not None and fast["safe_amplitude"] < 1.0
    assert slow["extremes"]["HFE"]["offset_rad"] < SAFETY.box("HFE")
    with pytest.raises(ModelError, match="open_manipulator_x"):
        truth_check(load_robot("open_manipulator_x"), [])
