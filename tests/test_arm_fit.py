"""Multi-joint replay scores and the CMA-ES fit of a whole robot (actuatorlab.identify.arm_fit)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from actuatorlab.errors import DataError, UnknownNameError
from actuatorlab.identify.arm_fit import fit_arm
from actuatorlab.sim.arm_data import evaluate_arm
from actuatorlab.logs.format import Channel, Setup, Trajectory
from actuatorlab.logs.io import load_native
from actuatorlab.robots import load_robot
from actuatorlab.sim.arm import initial_state, make_inputs
from actuatorlab.sim.arm_native import rollout_native

ROBOT = "open_manipulator_x"


@pytest.fixture(scope="module")
def robot():
    return load_robot(ROBOT)


@pytest.fixture(scope="module")
def smoke_logs(tmp_path_factory):
    from actuatorlab.synth import run_synth

    out = tmp_path_factory.mktemp("smoke")
    run_synth(ROBOT, "smoke", out, 0)
    logs = [load_native(p, strict=False) for p in sorted(Path(out).rglob("*.parquet"))]
    assert logs
    return logs


def chirp_logs(robot, params, T=200, n_logs=2, seed=0, *, f0=(0.3, 0.2), f1=(2.0, 1.0), amp=(0.4, 0.3),
               prefix="chirp"):
    """Logs in the multi-joint convention made by the native path itself from chirp commands on
    joint1..joint4 (the gripper held at rest): per joint a chirp from f0 to f1 [Hz] of amplitude
    amp [rad], each drawn as ``low + width * U(0, 1)`` from the (low, width) pairs; logs are named
    ``{prefix}_{k}``."""
    rng = np.random.default_rng(seed)
    arm = [j for j in robot.joint_names if j.startswith("joint")]
    t = np.arange(T) * robot.control_dt
    logs = []
    for k in range(n_logs):
        qt = np.zeros((T, robot.n_joints))
        for j in arm:
            fa, fb, a = (lo + w * rng.random() for lo, w in (f0, f1, amp))
            phase = 2 * np.pi * (fa * t + 0.5 * (fb - fa) / t[-1] * t**2) + 6 * rng.random()
            qt[:, robot.index(j)] = a * np.sin(phase)
        _, o = rollout_native(robot, params, make_inputs(robot, qt), initial_state(robot, q=qt[0]))
        data, ch = {}, {}
        for j in arm:
            i = robot.index(j)
            for name, val, unit, kind in ((f"position/{j}", o.q[:, i], "rad", "measured"),
                                          (f"velocity/{j}", o.dq[:, i], "rad/s", "estimated"),
                                          (f"position_target/{j}", qt[:, i], "rad", "commanded")):
                data[name], ch[name] = val, Channel(unit, kind)
        setup = Setup("xm430-w350", controller="dynamixel_pwm", gains={"kp": 800}, supply_voltage=12.0,
                      extra={"robot": robot.name, "joints": arm})
        logs.append(Trajectory(f"{prefix}_{k}", t, data, ch, setup))
    return logs


def test_evaluate_smoke_logs_nominal(smoke_logs):
    r = evaluate_arm(ROBOT, None, smoke_logs)
    assert set(r["per_joint"]) == {"joint1", "joint2", "joint3", "joint4"}
    longest = max(t.n for t in smoke_logs)
    for j, d in r["per_joint"].items():
        expect = {str(h) for h in (100, 300, 600) if h <= longest}
        assert set(d) == expect, (j, d)
        for v in d.values():
            assert math.isfinite(v) and 0.0 <= v < 0.5  # a nominal replay tracks within 0.5 rad
    assert r["unit"] == "rad" and r["horizon"] == 300
    assert math.isfinite(r["position_mae"]) and r["position_mae"] > 0.0
    # longer open-loop horizons drift at least as far on average
    pooled = lambda h: np.mean([d[h] for d in r["per_joint"].values()])
    assert pooled("300") >= 0.8 * pooled("100")


def test_evaluate_exact_on_own_data_and_horizon_skip(robot):
    truth = robot.nominal_params()
    truth["kt"] = truth["kt"] * 0.8
    logs = chirp_logs(robot, truth, T=150, n_logs=1)
    r_true = evaluate_arm(robot, {"kt": truth["kt"]}, logs, horizons=(50, 100, 600))
    assert set(r_true["per_joint"]["joint1"]) == {"50", "100"}  # 600 > 150 samples: skipped
    assert r_true["position_mae"] < 1e-6  # windows restart exactly from the simulated state
    r_nom = evaluate_arm(robot, None, logs, horizons=(50, 100))
    assert r_nom["position_mae"] > 100 * max(r_true["position_mae"], 1e-9)


def test_fit_recovers_kt_and_viscous(robot):
    truth = robot.nominal_params()
    truth["kt"] = truth["kt"] * 0.8
    truth["friction_viscous"] = np.full_like(truth["kt"], 0.2)  # nominal is 0: set, not scaled
    logs = chirp_logs(robot, truth)
    r = fit_arm(ROBOT, logs, params=("kt", "friction_viscous"), max_evals=100, horizon=50, seed=0)
    kt = r["params"]["kt"]["xm430_w350"]
    fv = r["params"]["friction_viscous"]["xm430_w350"]
    assert kt == pytest.approx(truth["kt"][0], rel=0.10)
    assert fv == pytest.approx(0.2, rel=0.10)
    assert r["train_mae"] < 0.1 * r["train_mae_nominal"]
    assert r["evaluations"] <= 110 and r["wall_s"] > 0
    # the fitted parameters feed back into evaluate_arm
    ev = evaluate_arm(ROBOT, r["params"], logs, horizons=(50,))
    assert ev["position_mae"] == pytest.approx(r["train_mae"], rel=1e-6)


def test_fit_per_joint_layout(robot):
    logs = chirp_logs(robot, robot.nominal_params(), T=60, n_logs=1)
    r = fit_arm(ROBOT, logs, params=("kt",), per_joint=True, max_evals=8, horizon=30)
    # one value per logged joint; the gripper is not in the logs, so its set stays nominal
    assert set(r["params"]["kt"]) == {"joint1", "joint2", "joint3", "joint4"}
    assert r["param_sets"]["kt"][robot.index("gripper_left_joint")] == robot.nominal_params()["kt"][0]
    ev = evaluate_arm(ROBOT, r["params"], logs, horizons=(30,))
    assert ev["position_mae"] == pytest.approx(r["train_mae"], rel=1e-6)


def test_bad_inputs(robot, smoke_logs):
    with pytest.raises(UnknownNameError, match="no_such_robot"):
        evaluate_arm("no_such_robot", None, smoke_logs)
    t = smoke_logs[0]
    missing = t.without_channels("position/joint2")
    with pytest.raises(DataError, match="position/joint2"):
        evaluate_arm(ROBOT, None, [missing])
    other = t.replace(setup=Setup(t.setup.actuator, extra={**t.setup.extra, "robot": "koch_v1"}))
    with pytest.raises(DataError, match="koch_v1"):
        evaluate_arm(ROBOT, None, [other])
    with pytest.raises(DataError, match="joint2"):
        fit_arm(ROBOT, [missing], params=("kt",), max_evals=2)
    with pytest.raises(UnknownNameError, match="not_a_param"):
        fit_arm(ROBOT, smoke_logs[:1], params=("not_a_param",), max_evals=2)


def test_fit_of_a_single_parameter(robot):
    """A one-dimensional search (cma 4.5 fails on bounded 1-D problems without the padding in
    arm_fit._cma): kt x0.8 recovered alone."""
    p = robot.nominal_params()
    p["kt"] = p["kt"] * 0.8
    logs = chirp_logs(robot, p, T=120, n_logs=1)
    r = fit_arm(ROBOT, logs, params=("kt",), max_evals=60, horizon=60)
    assert r["params"]["kt"]["xm430_w350"] == pytest.approx(p["kt"][0], rel=0.01)


def test_fit_says_which_fitted_values_the_logs_do_not_determine(robot):
    """sensitivity=True: kt (x0.8, recovered) moves the fit's error on its joints by far more than 2 %
    when moved alone by 10 %; the Stribeck velocity with no Stribeck friction (0 in this config) moves
    nothing and is listed."""
    p = robot.nominal_params()
    p["kt"] = p["kt"] * 0.8
    assert p["friction_stribeck"][0] == 0.0 and p["stribeck_velocity"][0] > 0.0
    logs = chirp_logs(robot, p, T=120, n_logs=1)
    r = fit_arm(ROBOT, logs, params=("kt", "stribeck_velocity"), max_evals=40, horizon=60, sensitivity=True)
    s = r["sensitivity"]
    assert s["step"] == 0.1 and s["min_change"] == 0.02
    assert min(s["change"]["kt"]["xm430_w350"]) > 0.5
    assert s["change"]["stribeck_velocity"]["xm430_w350"] == [0.0, 0.0]
    assert s["not_determined"] == ["stribeck_velocity@xm430_w350"] and s["improvable"] == []
    # the set's objective: the sum of its 4 scored joints' MSE, i.e. 4 x the pooled MSE the fit minimised
    assert s["objective"]["xm430_w350"] == pytest.approx(4 * r["train_mse"], rel=1e-9)
    assert "sensitivity" not in fit_arm(ROBOT, logs, params=("kt",), max_evals=4, horizon=60)  # off by default


def test_set_sensitivity_definition_and_classes():
    """s = sqrt(MSE(value alone x (1 -+ 10 %)) / MSE) - 1 per set; a flat direction is not determined, a
    move that lowers the error by more than 2 % is improvable, a value at 0 has no entry."""
    from actuatorlab.identify.arm_fit import set_sensitivity

    def mse_per_set(cands):  # set 0: kt at its optimum 2.0, y 5 % short of its optimum 1.0; set 1: flat in kt
        return np.array([[1e-4 + (c["kt"][0] - 2.0) ** 2 + 0.5 * (c["y"][0] - 1.0) ** 2, 1e-4 + 0 * c["kt"][1]]
                         for c in cands])

    best = {"kt": np.array([2.0, 3.0]), "y": np.array([0.95, 0.0]), "z": np.array([7.0, 7.0])}
    s = set_sensitivity(mse_per_set, best, ["kt", "y"], [0, 1], ["a", "b"])
    m0 = 1e-4 + 0.5 * 0.05**2
    for k, f in enumerate((0.9, 1.1)):
        assert s["change"]["kt"]["a"][k] == pytest.approx(np.sqrt((m0 + (2.0 * f - 2.0) ** 2) / m0) - 1.0, rel=1e-12)
        assert s["change"]["y"]["a"][k] == pytest.approx(
            np.sqrt((1e-4 + 0.5 * (0.95 * f - 1.0) ** 2) / m0) - 1.0, rel=1e-12)
    assert s["change"]["kt"]["b"] == [0.0, 0.0] and s["change"]["y"]["b"] is None  # y = 0 on set b: no move
    assert s["not_determined"] == ["kt@b"] and s["improvable"] == ["y@a"]
    assert s["objective"] == {"a": pytest.approx(m0), "b": pytest.approx(1e-4)}
    assert "improvable" in s["rule"] and "10 %" in s["rule"]
