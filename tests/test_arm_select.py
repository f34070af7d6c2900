"""Whole-robot identification with a ground truth inside the model family: per-joint parameter
recovery and nested model selection on multi-joint logs (actuatorlab.synth.model_truth,
actuatorlab.identify.arm_fit)."""

from __future__ import annotations

import numpy as np
import pytest

from actuatorlab.errors import DataError, UnknownNameError
from actuatorlab.identify.arm_fit import fit_arm, select_arm
from actuatorlab.sim.arm_data import evaluate_arm, robot_with_model
from actuatorlab.robots import load_robot
from actuatorlab.synth.model_truth import draw_param_sets, model_logs

ROBOT = "open_manipulator_x"
ARM = ("joint1", "joint2", "joint3", "joint4")


@pytest.fixture(scope="module")
def robot():
    return load_robot(ROBOT)


@pytest.fixture(scope="module")
def m3_per_joint(robot):
    """m3 logs whose kt, Coulomb, viscous and load-dependent friction differ by up to 25 % from
    joint to joint (encoder-quantised), and the truth."""
    truth = draw_param_sets(robot, "m3", seed=1, set_values={"friction_viscous": 0.1})
    return truth, model_logs(robot, "m3", truth, n_logs=3, duration=3.0, seed=0)


def test_model_logs_replay_exactly(robot, m3_per_joint):
    truth, logs = m3_per_joint
    per_joint = {k: {j: float(truth[k][robot.index(j)]) for j in robot.joint_names} for k in truth}
    ev = evaluate_arm(robot, per_joint, logs, horizons=(100,), model="m3")
    # the only error left is the encoder quantisation (2 pi / 4096 rad: uniform, MAE = step / 4)
    assert ev["position_mae"] < 0.5 * 2 * np.pi / 4096
    nominal = evaluate_arm(robot, None, logs, horizons=(100,), model="m3")
    assert nominal["position_mae"] > 5 * ev["position_mae"]
    # same arguments, same arrays
    again = model_logs(robot, "m3", truth, n_logs=1, duration=3.0, seed=0)[0]
    assert np.array_equal(again["position/joint2"], logs[0]["position/joint2"])


def test_per_joint_recovery(robot, m3_per_joint):
    truth, logs = m3_per_joint
    r = fit_arm(robot, logs, model="m3", fixed=("R", "armature"), per_joint=True, max_evals=500,
                horizon=100, max_windows=9, seed=0)
    assert r["params"].keys() == {"kt", "friction_base", "friction_viscous", "load_friction"}
    assert set(r["params"]["kt"]) == set(ARM)  # the gripper is not logged: not fitted
    err = {k: np.array([r["params"][k][j] / truth[k][robot.index(j)] - 1 for j in ARM]) for k in r["params"]}
    # the nominal start is up to 25 % off per joint; measured after the fit (seed 0): kt <= 3 %,
    # Coulomb / viscous / load friction <= 15 / 4 / 3 % on joints 1-3; joint 4 (wrist, light
    # load) leaves viscous vs load friction weakly separated (67 % / 34 %)
    assert np.all(np.abs(err["kt"]) < 0.05), err["kt"]
    for k in ("friction_base", "friction_viscous", "load_friction"):
        assert np.all(np.abs(err[k][:3]) < 0.25), (k, err[k])
    assert r["train_mae"] < 0.15 * r["train_mae_nominal"]


@pytest.mark.parametrize("truth_model, expected, evals", [("m3", "m3", 250), ("m1", "m1", 120)])
def test_selection_finds_the_model_that_made_the_data(robot, truth_model, expected, evals):
    truth = draw_param_sets(robot, truth_model, seed=2, spread=0.0, set_values={"friction_viscous": 0.1})
    logs = model_logs(robot, truth_model, truth, n_logs=4, duration=3.0, seed=3)
    res = select_arm(robot, logs[:3], logs[3:], ladder=("m1", "m3"), max_evals=evals, horizon=100,
                     val_horizon=200, max_windows=9, final_evals=20, seed=0)
    rows = {row["model"]: row for row in res["table"]}
    assert res["selected"] == expected, res["table"]
    # m3 contains m1 and starts from its fit: never worse on the fit windows
    assert res["fits"]["m3"]["train_mse"] <= res["fits"]["m1"]["train_mse"] * (1 + 1e-9)
    assert rows["m3"]["parent"] == "m1"
    if truth_model == "m3":
        # measured: validation MAE 3.79 -> 0.54-1.05 mrad (gain 0.72-0.85 depending on CMA-ES
        # settings). The shared-set mu lands at 0.13-0.19 for a true 0.16 within this budget:
        # Coulomb and load-dependent friction trade against each other (per-joint recovery with
        # a larger budget is test_per_joint_recovery), so mu is only asserted to be clearly on
        assert rows["m3"]["gain_vs_parent"] > 0.5
        assert res["final"]["train_mae"] < 0.6 * rows["m1"]["train_mae"]
        assert res["final"]["params"]["load_friction"]["xm430_w350"] > 0.08
    else:
        assert rows["m3"]["gain_vs_parent"] < 0.02
    assert res["final"]["model"] == expected


def test_robot_with_model_and_errors(robot, m3_per_joint):
    m1 = robot_with_model(robot, "m1")
    assert m1.nominal_params()["load_friction"][0] == 0.0  # mechanisms m1 lacks are switched off
    assert robot_with_model(robot, "m3").nominal_params()["load_friction"][0] == robot.nominal_params()["load_friction"][0]
    with pytest.raises(UnknownNameError, match="m9"):
        robot_with_model(robot, "m9")
    bl = robot_with_model(robot, "m1+backlash")
    assert bl.compliant.all() and bl.nominal_params()["stiffness"][0] == pytest.approx(20.0)
    _, logs = m3_per_joint
    with pytest.raises(DataError, match="validation"):
        select_arm(robot, logs, [], ladder=("m1",))
