"""Search bounds from a robot config (actuatorlab.robots.bounds) in the whole-robot fit's box
(identify/arm_space.ArmSpace): a config with bounds moves the box and the start, one without keeps the
default box exactly, and a fit reaches a value the default box cannot."""

from __future__ import annotations


import numpy as np
import pytest

from actuatorlab.identify.arm_fit import fit_arm
from actuatorlab.identify.arm_space import BOX_FACTORS, ArmSpace
from actuatorlab.models.params import bounds_for
from actuatorlab.robots import load_robot
from actuatorlab.robots.bounds import set_bounds
from actuatorlab.sim.arm_data import robot_with_model
from test_arm_fit import chirp_logs
from test_robots import _omx, _write

NAMES = ("armature", "friction_viscous", "stiffness", "friction_base")


def _space(robot, model="m1+compliance"):
    r = robot_with_model(robot, model)
    return ArmSpace.build(NAMES, r.nominal_params(), None, set_bounds(r.groups)), r.nominal_params()


def test_config_without_bounds_keeps_the_default_box():
    sp, nom = _space(load_robot("open_manipulator_x"))
    a0, s0 = nom["armature"][0], nom["stiffness"][0]
    assert s0 == pytest.approx(np.sqrt(np.prod(bounds_for("stiffness", "servo"))))  # 20 N.m/rad: rigid -> mid-servo
    np.testing.assert_array_equal(sp.lower, [BOX_FACTORS[0] * a0, bounds_for("friction_viscous", "servo")[0],
                                             BOX_FACTORS[0] * s0, BOX_FACTORS[0] * nom["friction_base"][0]])
    np.testing.assert_array_equal(sp.upper, [BOX_FACTORS[1] * a0, bounds_for("friction_viscous", "servo")[1],
                                             BOX_FACTORS[1] * s0, BOX_FACTORS[1] * nom["friction_base"][0]])
    assert list(sp.log) == [True, False, True, True]
    for k in nom:
        np.testing.assert_array_equal(sp.nominal[k], nom[k])  # the start is the nominal


def test_config_bounds_move_the_box_and_the_start(tmp_path):
    cfg = _omx()
    a0 = cfg["actuators"]["xm430_w350"]["params"]["armature"]
    cfg["actuators"]["xm430_w350"]["bounds"] = {"armature": [20 * a0, 80 * a0], "stiffness": [50, 1000],
                                                "friction_viscous": [0.1, 3.0]}
    robot = load_robot(_write(tmp_path, cfg))
    sp, nom = _space(robot)
    np.testing.assert_allclose(sp.lower[:3], [20 * a0, 0.1, 50])
    np.testing.assert_allclose(sp.upper[:3], [80 * a0, 3.0, 1000])
    assert list(sp.log) == [True, False, True, True]
    # starts: geometric mean of log-scale bounds the nominal misses, middle of linear ones; unbounded as before
    assert sp.nominal["armature"][0] == pytest.approx(40 * a0)
    assert sp.nominal["stiffness"][0] == pytest.approx(np.sqrt(50 * 1000))
    assert sp.nominal["friction_viscous"][0] == pytest.approx(1.55)
    assert sp.nominal["friction_base"][0] == nom["friction_base"][0]
    assert np.all(sp.to_z(np.concatenate([sp.nominal[k] for k in NAMES])) > 0)  # inside, not on an edge
    assert robot.groups[0].bounds and load_robot("open_manipulator_x").groups[0].bounds == ()


def test_fit_reaches_outside_the_default_box(tmp_path):
    """Logs made with 12x the nominal armature: the default box (at most 5x) cannot reach it, the config's
    bounds can, and the fit lands near it."""
    cfg = _omx()
    a0 = cfg["actuators"]["xm430_w350"]["params"]["armature"]
    cfg["actuators"]["xm430_w350"]["bounds"] = {"armature": [a0, 40 * a0]}
    wide, plain = load_robot(_write(tmp_path, cfg)), load_robot("open_manipulator_x")
    truth = plain.nominal_params()
    truth["armature"] = truth["armature"] * 12
    logs = chirp_logs(plain, truth, T=120, n_logs=2)
    opts = dict(params=("armature",), max_evals=24, seed=0, horizon=60)
    got = fit_arm(wide, logs, **opts)["params"]["armature"]["xm430_w350"]
    boxed = fit_arm(plain, logs, **opts)["params"]["armature"]["xm430_w350"]
    assert boxed <= BOX_FACTORS[1] * a0 * (1 + 1e-9)
    assert got > BOX_FACTORS[1] * a0 and got == pytest.approx(12 * a0, rel=0.25)
